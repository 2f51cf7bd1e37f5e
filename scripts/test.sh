#!/usr/bin/env bash
# The README's test command: on a fresh Debian 12 machine, installs every
# dependency, builds moec and runs every test (lit, GoogleTest, fixture checks).
# GPU tests report "skipped" where there is no GPU. ctest's summary line closes
# the output.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MOEC_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
log=$(mktemp -t moec-ctest.XXXXXX)
trap 'rm -f "$log"' EXIT
status=0
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" >"$log" 2>&1 || status=$?
cat "$log"
grep -E "tests passed|tests failed" "$log" | tail -n 1
exit "$status"
