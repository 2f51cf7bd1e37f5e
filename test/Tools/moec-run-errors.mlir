// moec-run rejects a missing or corrupt artifact and inputs that do not match
// its manifest with an error naming the file or tensor and the reason, exit
// status 2, and no output file.

// RUN: rm -rf %t && split-file %s %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu -o %t/mixtral
// RUN: moec compile %fixtures/ort-qmoe/model.onnx --target=cpu -o %t/qmoe
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu --max-tokens=4 -o %t/mixtral-4

// The good case writes the output.
// RUN: moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --outputs %t/good.npz --expected-outputs %fixtures/mixtral/expected.npz --scale-atol | FileCheck %s --check-prefix=GOOD
// GOOD: output [1, 7, 64]: max abs err {{.*}}: ok
// RUN: ls %t/good.npz

// RUN: not moec-run %t/nowhere --inputs %fixtures/mixtral/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: moec-run: error: {{.*}}nowhere: not an artifact directory (No such file or directory)
// RUN: not ls %t/out.npz

// RUN: cp -r %t/mixtral %t/bad-manifest && echo "moec-artifact 4" > %t/bad-manifest/manifest.txt && echo "target gpu9" >> %t/bad-manifest/manifest.txt
// RUN: not moec-run %t/bad-manifest --inputs %fixtures/mixtral/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=MANIFEST
// MANIFEST: moec-run: error: {{.*}}bad-manifest/manifest.txt: target 'gpu9' cannot run here (this runtime runs 'cpu' and 'cuda' artifacts)
// RUN: not ls %t/out.npz

// RUN: cp -r %t/mixtral %t/no-manifest && rm %t/no-manifest/manifest.txt
// RUN: not moec-run %t/no-manifest --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=NO-MANIFEST
// NO-MANIFEST: moec-run: error: {{.*}}no-manifest/manifest.txt: cannot open (No such file or directory); is this a moec artifact directory?

// RUN: cp -r %t/mixtral %t/truncated && truncate -s 1000 %t/truncated/weights.bin
// RUN: not moec-run %t/truncated --inputs %fixtures/mixtral/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=TRUNCATED
// TRUNCATED: moec-run: error: {{.*}}truncated/weights.bin: holds 1000 bytes, the manifest says 248064 (truncated or from another build?)
// RUN: not ls %t/out.npz

// RUN: cp -r %t/mixtral %t/no-library && echo garbage > %t/no-library/model.so
// RUN: not moec-run %t/no-library --inputs %fixtures/mixtral/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=LIBRARY
// LIBRARY: moec-run: error: {{.*}}no-library/model.so: does not match the manifest's library_hash (damaged, truncated, or from another build); recompile the model
// RUN: not ls %t/out.npz

// Inputs of another model: the names do not match.
// RUN: not moec-run %t/mixtral --inputs %fixtures/ort-moe/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=NAMES
// NAMES: moec-run: note: {{.*}}ort-moe/inputs.npz array 'input' names no input of the model; ignored
// NAMES: moec-run: error: {{.*}}ort-moe/inputs.npz: {{.*}}mixtral: input 'hidden_states' is missing
// RUN: not ls %t/out.npz

// The right names with the wrong sizes: 8 experts' probabilities for 4.
// RUN: not moec-run %t/qmoe --inputs %fixtures/ort-moe/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: moec-run: error: {{.*}}: input 'router_probs': dimension 1 is 8, expected shape [T, 4]
// RUN: not ls %t/out.npz

// The right name with the wrong dtype (written by moec-interp from f64.mlir).
// RUN: moec-interp %t/f64.mlir --outputs %t/f64.npz
// RUN: not moec-run %t/mixtral --inputs %t/f64.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: moec-run: error: {{.*}}f64.npz: input 'hidden_states' is f64, expected f32
// RUN: not ls %t/out.npz

// Inputs that disagree on the token count.
// RUN: moec-interp %t/tokens.mlir --outputs %t/tokens.npz
// RUN: not moec-run %t/qmoe --inputs %t/tokens.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=TOKENS
// TOKENS: moec-run: error: {{.*}}: input 'router_probs': token dimension 0 is 2 but other tensors have 3 tokens
// RUN: not ls %t/out.npz

// More tokens (7) than the artifact was compiled for.
// RUN: not moec-run %t/mixtral-4 --inputs %fixtures/mixtral/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=MAX
// MAX: moec-run: error: {{.*}}: 7 tokens exceed the artifact's max tokens (4); recompile with a larger --max-tokens
// RUN: not ls %t/out.npz

// Usage errors.
// RUN: not moec-run %t/mixtral 2>&1 | FileCheck %s --check-prefix=NO-INPUTS
// NO-INPUTS: moec-run: error: no --inputs given
// RUN: not moec-run %t/mixtral --inputs %t/missing.npz 2>&1 | FileCheck %s --check-prefix=NO-NPZ
// NO-NPZ: moec-run: error: {{.*}}missing.npz
// RUN: not moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --bench 0 2>&1 | FileCheck %s --check-prefix=BENCH
// BENCH: moec-run: error: --bench: not a positive count: '0'

//--- f64.mlir
func.func @f() -> (tensor<1x2x64xf64> {onnx.name = "hidden_states"}) {
  %c = arith.constant dense<1.0> : tensor<1x2x64xf64>
  return %c : tensor<1x2x64xf64>
}

//--- tokens.mlir
func.func @f() -> (tensor<3x64xf32> {onnx.name = "input"}, tensor<2x4xf32> {onnx.name = "router_probs"}) {
  %x = arith.constant dense<1.0> : tensor<3x64xf32>
  %p = arith.constant dense<0.5> : tensor<2x4xf32>
  return %x, %p : tensor<3x64xf32>, tensor<2x4xf32>
}
