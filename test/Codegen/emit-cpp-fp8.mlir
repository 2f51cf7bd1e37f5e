// `moec compile --fp8 --target=cpu`: the fp8 phase as code. Weights are stored
// as e4m3 bytes (manifest dtype f8e4m3) with their f32 128x128 block scales;
// moe.quantize becomes quantizeE4M3 over the rows that hold data (the valid
// rows after moe.permute, offsets[E-1] after a grouped matmul), and the FP8
// grouped matmul groupedMatmulFP8 (e4m3 rows) or groupedMatmulFP8Weights (f32
// rows, weight-only FP8). End-to-end numbers: test/Codegen/check-fp8-artifact.py.

// RUN: rm -rf %t && split-file %s %t
// RUN: moec compile %fixtures/mixtral/model.onnx --fp8 --target=cpu -o %t/mixtral
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu --fp8 --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cpp %t/mixtral.mlir -o %t/mixtral.cpp
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/mixtral/manifest.txt
// MANIFEST: weight gate.weight f32 [8,64]
// MANIFEST: weight experts_e4m3_1 f8e4m3 [8,80,64] {{[0-9]+}} 40960
// MANIFEST: weight experts_e4m3_scales_1 f32 [8,1,1]
// MANIFEST: weight experts_e4m3 f8e4m3 [8,64,40] {{[0-9]+}} 20480
// MANIFEST: weight experts_e4m3_scales f32 [8,1,1]
// RUN: FileCheck %s --check-prefix=CODE < %t/mixtral.cpp
// CODE: permute(pool, in0, 64, {{v[0-9]+}}, *[[VALID:v[0-9]+]], 2, [[ROWS:v[0-9]+]]);
// CODE: quantizeE4M3(pool, [[ROWS]], *[[VALID]], 64, [[Q:v[0-9]+]], [[S:v[0-9]+]]);
// CODE: const uint8_t *[[GU:w[0-9]+]] = reinterpret_cast<const uint8_t *>(weights + {{[0-9]+}}); // experts_e4m3_1
// CODE: const float *[[GUS:w[0-9]+]] = reinterpret_cast<const float *>(weights + {{[0-9]+}}); // experts_e4m3_scales_1
// CODE: groupedMatmulFP8(pool, [[Q]], [[S]], 64, [[GU]], [[GUS]], 8, 80, [[OFFSETS:v[0-9]+]], nullptr, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Concatenated, {{.*}}}, [[H:v[0-9]+]]);
// CODE: quantizeE4M3(pool, [[H]], [[OFFSETS]][8 - 1], 40, [[Q2:v[0-9]+]], [[S2:v[0-9]+]]);
// CODE: groupedMatmulFP8(pool, [[Q2]], [[S2]], 40, {{w[0-9]+}}, {{w[0-9]+}}, 8, 64, [[OFFSETS]], nullptr, Epilogue{}, {{v[0-9]+}});
// CODE-NOT: groupedMatmul(

// Weight-only FP8 (f32 rows, e4m3 weights with block scales).
// RUN: moec compile %t/weight-only.mlir --target=cpu --emit=mlir -o %t/weight-only.mlir
// RUN: moec-translate --emit-cpp %t/weight-only.mlir -o %t/weight-only.cpp
// RUN: FileCheck %s --check-prefix=WEIGHTS < %t/weight-only.cpp
// WEIGHTS: groupedMatmulFP8Weights(pool, in0, 128, w0, in1, 2, 128, in2, nullptr, Epilogue{}, v0);

// The CUDA target's FP8 calls: test/Codegen/emit-cuda-errors.mlir (FP8-EXPERTS).

//--- weight-only.mlir
func.func @f(%x: tensor<?x128xf32>, %s: tensor<2x1x1xf32>, %o: tensor<2xi32>) -> tensor<?x128xf32> {
  %w = arith.constant dense<1.0> : tensor<2x128x128xf8E4M3FN>
  %0 = moe.grouped_matmul %x, %w, %o weight_scales(%s : tensor<2x1x1xf32>) : tensor<?x128xf32>, tensor<2x128x128xf8E4M3FN>, tensor<2xi32> -> tensor<?x128xf32>
  return %0 : tensor<?x128xf32>
}
