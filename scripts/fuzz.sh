#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/ (-sanitize=fuzzer,address, linked with lld) and runs each
# for a bounded time on its committed corpus (Fuzz/Corpus/<target>), new inputs going to a scratch
# folder; a crash (ASan: any memory error), timeout or out-of-memory stops that target with its
# input in Fuzz/Crashes/<target>/. Leak detection is off: LeakSanitizer reports the targets'
# one-time startup objects (the model's vocabulary, configuration) held by Swift globals, and
# Foundation's file reading, as leaks at exit.
#   scripts/fuzz.sh <seconds per target> [target ...]    (default: every target)
# Needs the models (scripts/fetch-models.py): the recipe and tokenizer targets read MiniLM and SmolLM2.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: scripts/fuzz.sh <seconds per target> [target ...]}
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(FuzzSafetensors FuzzGGUF FuzzRecipe FuzzGate FuzzTokenizers); fi
swift build --package-path Fuzz -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld -debug-info-format none >&2
bin=$(swift build --package-path Fuzz -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld -debug-info-format none --show-bin-path)
status=0
for target in "${targets[@]}"; do
    scratch=$(mktemp -d)
    mkdir -p "Fuzz/Crashes/$target"
    echo "fuzz: $target for $seconds s" >&2
    if ! ASAN_OPTIONS=detect_leaks=0 "$bin/$target" -detect_leaks=0 -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="Fuzz/Crashes/$target/" "$scratch" "Fuzz/Corpus/$target" 2> "$scratch.log"; then
        status=1
        tail -40 "$scratch.log" >&2
    fi
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done" "$scratch.log" | sed "s/^/  $target: /" >&2 || true
    rm -rf "$scratch" "$scratch.log"
done
exit $status
