#!/usr/bin/env bash
# The README's main command: sets up, builds, and runs moec on the example MoE
# block. Today moec parses, verifies and prints the block (examples/mixtral-block.mlir);
# compiling it and running it on the CPU or GPU arrives with the codegen issue (5),
# and this script will then compile and run it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MOEC_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" >/dev/null
"$build/bin/moec-opt" "$root/examples/mixtral-block.mlir"
