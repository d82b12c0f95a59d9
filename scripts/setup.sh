#!/usr/bin/env bash
# Installs what Shrink needs on a fresh Debian 12 machine with the Swift toolchain, and is safe to
# run again: Debian's libblas-dev (CBLAS header and reference library) and libopenblas0-pthread
# (an optimized BLAS that Debian's alternatives put behind the same libblas.so.3) and cmake and g++
# (to build llama.cpp) when missing, the Python packages the cross-check tests use, the models
# (scripts/fetch-models.py; pass model names to fetch only those, default: all) and, when no model
# is named, llama.cpp's llama-perplexity (scripts/build-llama-cpp.sh, cached; about 4 minutes the
# first time).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg -s libblas-dev libopenblas0-pthread cmake g++ >/dev/null 2>&1; then
    echo "setup: installing libblas-dev, libopenblas0-pthread, cmake and g++"
    sudo_cmd=""
    if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq libblas-dev libopenblas0-pthread cmake g++ >/dev/null
fi

if ! python3 -c "import safetensors, numpy, ml_dtypes, gguf, mlx.core, mlx_lm, tokenizers" >/dev/null 2>&1; then
    echo "setup: installing safetensors, numpy, ml_dtypes, gguf, mlx (CPU), mlx-lm and tokenizers from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
fi

python3 scripts/fetch-models.py "$@"

# The whole setup (no model named, as scripts/test.sh runs it) also builds what the tests compare
# against; the quick start, which names its model, does not need it.
if [ $# -eq 0 ]; then
    perplexity=$(scripts/build-llama-cpp.sh)
    echo "setup: llama.cpp's llama-perplexity at $perplexity"
fi
