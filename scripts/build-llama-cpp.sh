#!/usr/bin/env bash
# Builds llama.cpp's llama-perplexity (CPU) from the source that PyPI's llama-cpp-python source
# package vendors, once, into a cache folder, and prints the path of the binary. The tests run it
# on GGUF files Shrink exports (llama.cpp must compute what Shrink computes).
#   scripts/build-llama-cpp.sh            # cache: $SHRINK_LLAMA_CPP_DIR, else ~/.cache/shrink/llama.cpp
# Needs cmake and a C++ compiler (Debian: cmake g++); about 3 minutes on 2 cores, nothing when cached.
set -euo pipefail
version=0.3.36
cache=${SHRINK_LLAMA_CPP_DIR:-$HOME/.cache/shrink/llama.cpp}
source_dir="$cache/llama_cpp_python-$version/vendor/llama.cpp"
binary="$source_dir/build/bin/llama-perplexity"
if [ ! -x "$binary" ]; then
    mkdir -p "$cache"
    archive="$cache/llama_cpp_python-$version.tar.gz"
    if [ ! -f "$archive" ]; then
        python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: -d "$cache" "llama-cpp-python==$version" >&2
    fi
    rm -rf "$cache/llama_cpp_python-$version"
    tar -xzf "$archive" -C "$cache"
    cmake -S "$source_dir" -B "$source_dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
          -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
    cmake --build "$source_dir/build" -j"$(nproc)" --target llama-perplexity >&2
fi
echo "$binary"
