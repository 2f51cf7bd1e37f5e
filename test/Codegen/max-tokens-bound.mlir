// --max-tokens is bounded: a count whose token slots (top-k up to 16 a
// token) would pass 2^31, which the kernels index in 32 bits, or wrap the
// workspace's size, is refused before anything is written.

// RUN: rm -rf %t && mkdir -p %t
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --max-tokens=9223372036854775807 -o %t/a 2>&1 | FileCheck %s --check-prefix=MAX
// MAX: moec: --max-tokens=9223372036854775807 is more than 16777216, the most an artifact takes (its kernels index token slots in 32 bits)
// RUN: not ls %t/a
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --max-tokens=1000000000000 -o %t/a 2>&1 | FileCheck %s --check-prefix=TERA
// TERA: moec: --max-tokens=1000000000000 is more than 16777216
// RUN: not ls %t/a
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --max-tokens=16777217 -o %t/a 2>&1 | FileCheck %s --check-prefix=ONE-MORE
// ONE-MORE: moec: --max-tokens=16777217 is more than 16777216
// RUN: not ls %t/a
// Beyond int64: the flag's parser refuses it.
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --max-tokens=99999999999999999999 -o %t/a 2>&1 | FileCheck %s --check-prefix=WIDE
// WIDE: max-tokens{{.*}}99999999999999999999
// RUN: not ls %t/a

// The bound itself compiles, and its manifest records it.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu --max-tokens=16777216 -o %t/b
// RUN: FileCheck %s --check-prefix=BOUND < %t/b/manifest.txt
// BOUND: max_tokens 16777216
