#!/usr/bin/env bash
# Compresses a model (a folder or a weights file) inside a memory cgroup smaller than the model (Linux, root: cgroup v2 or v1),
# so that the model is larger than the memory the process may use, page cache included; prints
# the cgroup's peak usage and how often it hit the limit, and checks that the output is
# byte-identical to an unconstrained run of the same recipe.
#   Benchmarks/larger-than-memory.sh /tmp/shrink-scale/llama-4.8e9 recipes/minilm-int4-block32.json 3
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: larger-than-memory.sh <model> <recipe> <limit GiB>}
recipe=${2:?usage: larger-than-memory.sh <model> <recipe> <limit GiB>}
limit_gib=${3:?usage: larger-than-memory.sh <model> <recipe> <limit GiB>}
swift build -c release --product shrink >&2
shrink=$(swift build -c release --product shrink --show-bin-path)/shrink
weights=$model
[ -d "$model" ] && weights="$model/model.safetensors"
folder=$(dirname "$weights")
limit=$((limit_gib * 1024 * 1024 * 1024))
name="shrink-larger-than-memory-$$"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    group=/sys/fs/cgroup/$name
    mkdir "$group"
    echo "$limit" > "$group/memory.max"
    echo 0 > "$group/memory.swap.max" 2>/dev/null || true
    peak_file="$group/memory.peak"; events="$group/memory.events"
else
    group=/sys/fs/cgroup/memory/$name
    mkdir "$group"
    echo "$limit" > "$group/memory.limit_in_bytes"
    echo 0 > "$group/memory.swappiness"
    peak_file="$group/memory.max_usage_in_bytes"; events="$group/memory.oom_control"
fi
trap 'rmdir "$group" 2>/dev/null || true' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) threads"
echo "model: $model, $(awk -v b="$(stat -c %s "$weights")" 'BEGIN { printf "%.2f GB", b / 1e9 }'); memory limit ${limit_gib} GiB (page cache included)"
sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true
constrained="$folder/constrained.safetensors"
( echo $BASHPID > "$group/cgroup.procs"; exec "$shrink" compress --model "$model" --recipe "$recipe" --output "$constrained" ) > "$folder/constrained.log" 2>&1 \
    || { echo "constrained run failed:"; tail -3 "$folder/constrained.log"; exit 1; }
grep -E "estimated peak|time:" "$folder/constrained.log"
echo "cgroup peak $(awk '{ printf "%.2f GB", $1 / 1e9 }' "$peak_file") (page cache included); $(tr '\n' ' ' < "$events")"
reference="$folder/unconstrained.safetensors"
"$shrink" compress --model "$model" --recipe "$recipe" --output "$reference" > /dev/null 2>&1
if cmp -s "$constrained" "$reference"; then echo "output byte-identical to the unconstrained run ($(stat -c %s "$reference") bytes)"; else echo "outputs DIFFER"; exit 1; fi
rm -f "$constrained" "$reference"
