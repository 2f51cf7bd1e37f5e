// moec-run on a CPU artifact: any token count from 0 to --max-tokens (the
// reference is the f64 interpreter on the same grouped-phase program), the
// output file keyed by the graph's output name, and --bench's summary.

// RUN: rm -rf %t && split-file %s %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu --max-tokens=7 -o %t/mixtral
// RUN: moec compile %fixtures/mixtral/model.onnx -o %t/mixtral.mlir

// Exactly max tokens (the fixture has 7).
// RUN: moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --outputs %t/out7.npz --expected-outputs %fixtures/mixtral/expected.npz --scale-atol | FileCheck %s --check-prefix=SEVEN
// SEVEN: output [1, 7, 64]: {{.*}}: ok
// The output file holds the output under its graph name.
// RUN: moec-interp %t/mixtral.mlir --inputs %fixtures/mixtral/inputs.npz --expected-outputs %t/out7.npz --scale-atol | FileCheck %s --check-prefix=SEVEN

// One token and no token, against the interpreter.
// RUN: moec-interp %t/one.mlir --outputs %t/one.npz
// RUN: moec-interp %t/mixtral.mlir --inputs %t/one.npz --outputs %t/one-ref.npz
// RUN: moec-run %t/mixtral --inputs %t/one.npz --expected-outputs %t/one-ref.npz | FileCheck %s --check-prefix=ONE
// ONE: output [1, 1, 64]: {{.*}}: ok
// RUN: moec-interp %t/zero.mlir --outputs %t/zero.npz
// (zero.npz holds no 'output': the run succeeds and the comparison says so.)
// RUN: not moec-run %t/mixtral --inputs %t/zero.npz --outputs %t/zero-out.npz --expected-outputs %t/zero.npz | FileCheck %s --check-prefix=ZERO
// ZERO: output: MISSING from {{.*}}zero.npz
// ZERO: note: {{.*}}zero.npz array 'hidden_states' names no output; not compared
// RUN: ls %t/zero-out.npz

// RUN: moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --bench 5 | FileCheck %s --check-prefix=BENCH
// BENCH: bench: 5 runs, 7 tokens: median {{[0-9.]+}} ms, p10 {{[0-9.]+}} ms, p90 {{[0-9.]+}} ms, min {{[0-9.]+}} ms, max {{[0-9.]+}} ms

// --on-stream queues runs with moec_run_async, which takes CUDA artifacts only:
// for a CPU one the C API refuses before anything runs, and says why.
// RUN: not moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --outputs %t/on-stream.npz --on-stream 2>&1 | FileCheck %s --check-prefix=ON-STREAM
// ON-STREAM: moec-run: error: --on-stream: {{.*}}mixtral: moec_run_async: a 'cpu' artifact runs on the host; call moec_run (only 'cuda' artifacts queue on a stream)
// RUN: not ls %t/on-stream.npz

// Results do not depend on the number of threads.
// RUN: env MOEC_NUM_THREADS=1 moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --expected-outputs %t/out7.npz --rtol 0 --atol 0 | FileCheck %s --check-prefix=EXACT
// RUN: env MOEC_NUM_THREADS=3 moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --expected-outputs %t/out7.npz --rtol 0 --atol 0 | FileCheck %s --check-prefix=EXACT
// EXACT: output [1, 7, 64]: max abs err 0.00e+00, max rel err 0.00e+00: ok
// RUN: env MOEC_NUM_THREADS=none not moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=THREADS
// THREADS: moec-run: error: MOEC_NUM_THREADS='none' is not a thread count in [1, 4096]

// A mismatch exits with 1 (here: the wrong expected output).
// RUN: not moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --expected-outputs %fixtures/qwen3_moe/expected.npz | FileCheck %s --check-prefix=MISMATCH
// MISMATCH: output [1, 7, 64]: max abs err {{.*}}: MISMATCH in {{[0-9]+}} of 448 elements (rtol 1.0e-05, atol 1.0e-06)

//--- one.mlir
func.func @f() -> (tensor<1x1x64xf32> {onnx.name = "hidden_states"}) {
  %c = arith.constant dense<0.25> : tensor<1x1x64xf32>
  return %c : tensor<1x1x64xf32>
}

//--- zero.mlir
func.func @f() -> (tensor<1x0x64xf32> {onnx.name = "hidden_states"}) {
  %c = arith.constant dense<1.0> : tensor<1x0x64xf32>
  return %c : tensor<1x0x64xf32>
}
