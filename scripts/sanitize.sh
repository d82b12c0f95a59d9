#!/usr/bin/env bash
# Builds the package and its tests with a sanitizer (optimized, as the suite runs) and runs the
# suite under it; a sanitizer report fails the run. Arguments after the sanitizer go to
# `swift test` (e.g. --filter WorkerPool).
#   scripts/sanitize.sh address [swift test arguments…]   # AddressSanitizer
#   scripts/sanitize.sh thread  [swift test arguments…]   # ThreadSanitizer
# OpenBLAS runs with one thread under ThreadSanitizer: its uninstrumented workers synchronize by
# spinning on plain loads, which the sanitizer cannot see and would report as races in the caller.
# Under ThreadSanitizer the tests run one at a time (--no-parallel): Swift Testing otherwise starts
# every case at once, and at the sanitizer's slowdown the real-model cases then share the cores so
# long that none finishes (ShrinkModelsTests: no test done in 900 s; one at a time, all 80 in
# 1,244 s). Threads inside a test (the worker pool, kernels, concurrent sessions) still run together.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizer=${1:?usage: scripts/sanitize.sh address|thread [swift test arguments…]}
shift
case "$sanitizer" in
    address) export ASAN_OPTIONS="halt_on_error=1:${ASAN_OPTIONS:-}" LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-suppressions.txt:${LSAN_OPTIONS:-}" ;;
    thread) export TSAN_OPTIONS="halt_on_error=1:${TSAN_OPTIONS:-}" OPENBLAS_NUM_THREADS=1 ;;
    *) echo "sanitize.sh: unknown sanitizer '$sanitizer'; expected address or thread" >&2; exit 2 ;;
esac
scripts/setup.sh
# SwiftPM's --sanitize instruments the C targets (kernels, support) as well as the Swift ones.
flags=(-c release -Xswiftc -enable-testing --sanitize "$sanitizer" --build-path ".build/$sanitizer")
swift build "${flags[@]}" --build-tests
serial=()
if [ "$sanitizer" = thread ]; then serial=(--no-parallel); fi
swift test "${flags[@]}" --skip-build "${serial[@]}" "$@"
