#!/usr/bin/env bash
# Compresses synthetic Llama-shaped BF16 model folders of the given sizes (Benchmarks/synthetic_model.py,
# written once into $SHRINK_SCALE_DIR, default /tmp/shrink-scale, with a tokenizer and 128 calibration
# lines of about 512 tokens) with a data-free uint4-block recipe, a 4-bit palette recipe and a GPTQ
# uint4-block recipe calibrated on those lines ($SHRINK_SCALE_RECIPES picks among "int4 palette
# gptq", default all), and prints per size and recipe: time, GB/s of input, peak RSS (what `shrink
# compress` reports, getrusage) next to the estimate it printed before starting, and the output's
# size, next to the machine's free memory.
#   Benchmarks/scale.sh 0.3e9 1.2e9 4.8e9
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("${@:-0.3e9}")
folder=${SHRINK_SCALE_DIR:-/tmp/shrink-scale}
read -r -a chosen <<< "${SHRINK_SCALE_RECIPES:-int4 palette gptq}"
mkdir -p "$folder"
swift build -c release --product shrink >&2
shrink=$(swift build -c release --product shrink --show-bin-path)/shrink
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) threads; $(awk '/MemAvailable/ {printf "%.1f", $2 / 1048576}' /proc/meminfo) GiB available"
echo "| parameters | input GB | recipe | seconds | input GB/s | peak RSS GB | estimate GB | output GB | peak − output GB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for size in "${sizes[@]}"; do
    model="$folder/llama-$size"
    [ -f "$model/model.safetensors" ] || python3 Benchmarks/synthetic_model.py --shape llama --params "$size" --dtype bf16 --calibration 128,512 --output "$model" >&2
    python3 - "$model/gptq-int4-block32.json" <<'PY'
import json, sys
json.dump({"op_type": {"linear": {"quantize": {"bits": 4, "mode": "affine", "signed": False, "granularity": "per_block", "block_size": 32,
                                               "scale_dtype": "u8", "method": "gptq", "damping": 0.01, "act_order": True}}, "embedding": None},
           "calibration": {"data": "calibration.txt", "limit": 128}, "weight_threshold": 2048}, open(sys.argv[1], "w"), indent=1)
PY
    input=$(stat -c %s "$model/model.safetensors")
    for choice in "${chosen[@]}"; do
        case $choice in
            int4) recipe=recipes/minilm-int4-block32.json ;;
            palette) recipe=recipes/minilm-palette-4bit-grouped16.json ;;
            gptq) recipe=$model/gptq-int4-block32.json ;;
            *) echo "unknown recipe choice $choice (int4, palette, gptq)" >&2; exit 2 ;;
        esac
        output="$folder/out.safetensors"
        report=$("$shrink" compress --model "$model" --recipe "$recipe" --output "$output" 2>"$folder/compress.log")
        estimate=$(sed -n 's/.*estimated peak memory \([0-9]*\) MB.*/\1/p' "$folder/compress.log")
        seconds=$(sed -n 's/.*time: \([0-9.]*\) s.*/\1/p' <<< "$report")
        peak=$(sed -n 's/.*peak memory \([0-9]*\) MB.*/\1/p' <<< "$report")
        written=$(stat -c %s "$output")
        awk -v p="$size" -v i="$input" -v r="$(basename "$recipe" .json)" -v s="$seconds" -v m="$peak" -v e="$estimate" -v o="$written" 'BEGIN {
            printf "| %.1f B | %.2f | %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", p / 1e9, i / 1e9, r, s, i / 1e9 / s, m / 1e3, e / 1e3, o / 1e9, m / 1e3 - o / 1e9 }'
        rm -f "$output"
    done
done
