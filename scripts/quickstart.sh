#!/usr/bin/env bash
# The main job end to end on the default model (all-MiniLM-L6-v2): install what is needed, fetch
# the model, build the CLI, and inspect the model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh minilm
swift build -c release --product shrink --quiet
.build/release/shrink inspect minilm
