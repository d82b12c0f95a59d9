#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need, then builds optimized (tests
# touch real models) and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift test -c release -Xswiftc -enable-testing "$@"
