#!/usr/bin/env bash
# The main job end to end on the default model (all-MiniLM-L6-v2): install what is needed, fetch
# the model, build the CLI, compress the model with every shipped recipe and compare them with the
# uncompressed model on the STS-B test split (size, accuracy, drift, latency, compression time).
# The table is printed; the reports go to reports/minilm (report.json, .csv, .md, pareto.svg).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh minilm
swift build -c release --product shrink --quiet
.build/release/shrink compare --model minilm --recipes recipes/minilm-*.json --task stsb --output reports/minilm
