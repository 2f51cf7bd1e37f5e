#!/usr/bin/env bash
# check-install.sh BUILD SOURCE WORK CMAKE GENERATOR CXX HAS_CUDA
# Installs BUILD into WORK/prefix, checks the layout (docs/design.md, "Build"),
# then configures, builds and runs test/install/consumer against the installed
# package: moec_load of a missing artifact, and of a CPU artifact compiled by the
# installed moec, run on the mixtral fixture and compared with its outputs.
set -euo pipefail
build=$1 src=$2 work=$3 cmake=$4 generator=$5 cxx=$6 cuda=$7
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"

status=0
expect() { # expect PATH: present in the prefix
  [ -e "$prefix/$1" ] || { echo "FAIL: $1 not installed"; status=1; }
}
refuse() { # refuse PATH: absent from the prefix
  [ ! -e "$prefix/$1" ] || { echo "FAIL: $1 installed"; status=1; }
}
for tool in moec moec-opt moec-translate moec-interp moec-run; do expect bin/$tool; done
for lib in kernels runtime tooling; do expect lib/libmoec_$lib.a; done
for file in moec/moec.h moec/runtime/cpu/MoEKernels.h moec/runtime/KernelParams.h \
            moec/runtime/Compare.h moec/runtime/Npz.h; do expect include/$file; done
for file in moecConfig.cmake moecConfigVersion.cmake moecTargets.cmake; do
  expect lib/cmake/moec/$file
done
if [ "$cuda" = ON ]; then
  expect lib/libmoec_kernels_cuda.a
  expect include/moec/runtime/cuda/MoEKernels.h
else
  refuse lib/libmoec_kernels_cuda.a
fi
# Internal headers and the compiler's own libraries stay out.
refuse include/moec/runtime/cuda/Tuning.h
refuse include/Tuning.h
if ls "$prefix"/lib/libMoEC* >/dev/null 2>&1; then echo "FAIL: the compiler's libraries installed"; status=1; fi
if grep -rq "BF16Tile\|FP8Tile\|kSortOneBlockMaxSlots" "$prefix/include"; then
  echo "FAIL: a public header names tile choices"; status=1
fi
(cd "$prefix" && find . -type f -o -type l | sort | grep -v '^./include/moec/runtime/.*/' ) \
  >"$work/layout.txt"

"$cmake" -S "$src/test/install/consumer" -B "$work/consumer" -G "$generator" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" >"$work/consumer-configure.log" || {
  cat "$work/consumer-configure.log"; exit 1; }
"$cmake" --build "$work/consumer" >"$work/consumer-build.log" || {
  cat "$work/consumer-build.log"; exit 1; }
grep "moec 0" "$work/consumer-configure.log"

# A missing artifact: the loader's error, exit status 2.
set +e
"$work/consumer/consumer" "$work/nowhere" >"$work/missing.txt"
rc=$?
set -e
cat "$work/missing.txt"
if [ $rc -ne 2 ] || ! grep -q "^moec_load: .*nowhere" "$work/missing.txt"; then
  echo "FAIL: consumer on a missing artifact (exit $rc)"; status=1
fi

# A CPU artifact compiled by the installed moec, run by the consumer and by the
# installed moec-run.
fx=$src/test/fixtures/mixtral
"$prefix/bin/moec" compile "$fx/model.onnx" --target=cpu -o "$work/artifact"
"$work/consumer/consumer" "$work/artifact" "$fx/inputs.npz" "$fx/expected.npz" | tee "$work/run.txt"
grep -q "^output \[1, 7, 64\]: max abs err .*: ok$" "$work/run.txt" || {
  echo "FAIL: consumer's comparison"; status=1; }
"$prefix/bin/moec-run" "$work/artifact" --inputs "$fx/inputs.npz" \
  --expected-outputs "$fx/expected.npz" --scale-atol
[ $status -eq 0 ] && echo "PASS: install layout and consumer"
exit $status
