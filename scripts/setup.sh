#!/usr/bin/env bash
# Installs everything moec needs on a fresh Debian 12 machine: the compiler toolchain
# (MLIR/LLVM 22, ONNX, protobuf, ninja; clang-22 and its sanitizer runtimes for the
# fuzz ctests), OpenBLAS (bench/cpu_gemm.cpp measures the CPU kernels' matrix
# product against it; the kernels do not link it) from apt and the Python test
# tooling from PyPI.
# Idempotent and quiet: it prints nothing unless something fails.
set -euo pipefail

log=$(mktemp -t moec-setup.XXXXXX)
trap 'rm -f "$log"' EXIT
fail() { echo "setup.sh: $1 failed; its output follows" >&2; cat "$log" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

apt_packages=(
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22
  libonnx-dev libprotobuf-dev protobuf-compiler
  ninja-build cmake g++ libgtest-dev zlib1g-dev python3-venv
  libclang-rt-22-dev
  libopenblas-dev
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq >"$log" 2>&1 || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >"$log" 2>&1 || fail "apt-get install ${missing[*]}"
fi

# Python tooling lives in a project-local virtual environment so that it never fights
# the system's python3 (Debian's python3-onnx) or a pyenv shim.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv" >"$log" 2>&1 || fail "python3 -m venv"
fi
if ! "$venv/bin/python" -c "import numpy, onnx, onnxruntime" >/dev/null 2>&1; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$root/scripts/requirements.txt" >"$log" 2>&1 || fail "pip install"
fi
# The Python package (python/, docs/python.md): its build backend and bindings,
# pytest, and torch + transformers for its tensor and swap tests, at the pinned
# versions of python/requirements-test.txt.
if ! "$venv/bin/python" - "$root/python/requirements-test.txt" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, pinned = line.split("==")
        assert version(name) == pinned, name
PY
then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$root/python/requirements-test.txt" >"$log" 2>&1 || fail "pip install (python/)"
fi
# CUTLASS's headers (the runtime's prefill wgmma kernel) come in PyPI's
# nvidia-cutlass wheel; only the headers are used, so not its Python dependencies.
# Only where CUDA is: without nvcc the runtime builds no CUDA at all.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if ! "$venv/bin/python" -c "import cutlass_library" >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
      nvidia-cutlass==4.2.0.0 >"$log" 2>&1 || fail "pip install nvidia-cutlass"
  fi
fi
