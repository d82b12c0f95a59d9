#!/usr/bin/env bash
# Side by side with llama.cpp on SmolLM2: builds both peers (mainline and ik_llama.cpp, cached by
# ../shared/peers/llama.cpp/build.sh), writes the files they run (llama-quantize of the shipped
# Q4_1 to Q8_0, Q4_0 and IQ4_NL) and the files Shrink runs (its 8-bit and 4.5-bit recipes), each
# once into a cache folder, then runs DecoderBenchmark on the pairs:
#   Q4_1: the shipped file on both sides;  8-bit: smollm2-int8-channel against Q8_0;
#   4.5-bit/Q4_0 and 4.5-bit/IQ4_NL: smollm2-int4-mixed-gptq against Q4_0 and IQ4_NL.
# Extra arguments go to DecoderBenchmark (--threads, --rounds, --json …).
#   Benchmarks/decoder-peers.sh [--rounds 3] [--json results.json]
set -euo pipefail
cd "$(dirname "$0")/.."
files=${SHRINK_DECODER_FILES:-$HOME/.cache/shrink-peers/smollm2-files}
peers=$HOME/.cache/shrink-peers/llama.cpp
build=../shared/peers/llama.cpp/build.sh
model=${SHRINK_MODELS_DIR:-$HOME/.cache/shrink/models}/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || python3 scripts/fetch-models.py smollm2
mainline=$(bash "$build" "$peers" mainline)
ik=$(bash "$build" "$peers" ik)
mkdir -p "$files"
for type in Q8_0 Q4_0 IQ4_NL; do
  [ -f "$files/$type.gguf" ] || "$mainline/llama-quantize" --allow-requantize "$model" "$files/$type.gguf" "$type" >/dev/null 2>&1
done
swift build -c release --product shrink >&2
swift build -c release --product DecoderBenchmark >&2
for recipe in smollm2-int8-channel smollm2-int4-mixed-gptq; do
  [ -f "$files/$recipe.safetensors" ] ||
    .build/release/shrink compress --model "$model" --recipe "recipes/$recipe.json" --output "$files/$recipe.safetensors" >&2
done
exec .build/release/DecoderBenchmark --peer "llama.cpp=$mainline/llama-bench" --peer "ik_llama.cpp=$ik/llama-bench" \
  --pair "Q4_1=$model,$model" --pair "8-bit=$files/smollm2-int8-channel.safetensors,$files/Q8_0.gguf" \
  --pair "4.5b/Q4_0=$files/smollm2-int4-mixed-gptq.safetensors,$files/Q4_0.gguf" \
  --pair "4.5b/IQ4_NL=$files/smollm2-int4-mixed-gptq.safetensors,$files/IQ4_NL.gguf" "$@"
