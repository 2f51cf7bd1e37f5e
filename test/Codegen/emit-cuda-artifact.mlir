// REQUIRES: cuda-build
// `moec compile --target=cuda` (needs nvcc, not a GPU): the artifact layout of
// the CPU target with `target cuda`, and model.cu beside model.so. The code
// itself: emit-cuda.mlir.

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --max-tokens=16 -o %t/mixtral
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/mixtral/manifest.txt
// MANIFEST: moec-artifact 4
// MANIFEST: target cuda
// MANIFEST: library model.so
// MANIFEST: max_tokens 16
// MANIFEST: input hidden_states f32 [1,-1,64]
// MANIFEST: output output f32 [1,-1,64]
// MANIFEST: library_hash {{[0-9a-f]{16}$}}
// MANIFEST: weights_sample_hash {{[0-9a-f]{16}$}}
// MANIFEST: weights_hash {{[0-9a-f]{16}$}}
// MANIFEST-NEXT: manifest_hash {{[0-9a-f]{16}$}}
// RUN: ls %t/mixtral/model.so %t/mixtral/weights.bin %t/mixtral/model.cu
// The printed source is the translation's.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral.mlir -o %t/mixtral.cu
// RUN: sed '/moec_artifact_plan()/,$d' %t/mixtral/model.cu | grep -v '^ *// ' | grep -v '^$' > %t/artifact.cu
// RUN: grep -v '^ *// ' %t/mixtral.cu | grep -v '^$' > %t/translated.cu
// RUN: diff %t/artifact.cu %t/translated.cu

// Without a device, loading reports it (a GPU machine runs the e2e.cuda tests).
// RUN: %if cuda %{ true %} %else %{ not moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=NODEV %}
// NODEV: moec-run: error: {{.*}}model.so: the model's state could not be created: creating the CUDA model: no CUDA device answers
