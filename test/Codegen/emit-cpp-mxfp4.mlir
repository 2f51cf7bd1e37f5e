// `moec compile --expert-weights=mxfp4 --target=cpu`: MXFP4 experts as code.
// The weights are stored packed (manifest dtype f4e2m1: a row of K codes in
// ceil(K/32) blocks of 16 bytes, code 2j in byte j's low nibble) beside their
// e8m0 scale bytes (f8e8m0, [E, N, ceil(K/32)]); the grouped matmuls become
// groupedMatmulMXFP4 on f32 rows. End-to-end numbers:
// test/Codegen/check-mxfp4-artifact.py.

// RUN: rm -rf %t && split-file %s %t
// RUN: moec compile %fixtures/mixtral/model.onnx --expert-weights=mxfp4 --target=cpu -o %t/mixtral
// RUN: moec compile %fixtures/mixtral/model.onnx --expert-weights=mxfp4 --target=cpu --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cpp %t/mixtral.mlir -o %t/mixtral.cpp
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/mixtral/manifest.txt
// Gate/up [8, 80, 64]: 8·80 rows of two blocks, 32 bytes each; down [8, 64, 40]:
// K = 40 is a block and a partial one, 32 bytes a row too.
// MANIFEST: weight gate.weight f32 [8,64]
// MANIFEST-DAG: weight experts_e2m1{{(_[0-9]+)?}} f4e2m1 [8,80,64] {{[0-9]+}} 20480
// MANIFEST-DAG: weight experts_e8m0_scales{{(_[0-9]+)?}} f8e8m0 [8,80,2] {{[0-9]+}} 1280
// MANIFEST-DAG: weight experts_e2m1{{(_[0-9]+)?}} f4e2m1 [8,64,40] {{[0-9]+}} 16384
// MANIFEST-DAG: weight experts_e8m0_scales{{(_[0-9]+)?}} f8e8m0 [8,64,2] {{[0-9]+}} 1024
// RUN: FileCheck %s --check-prefix=CODE < %t/mixtral.cpp
// CODE: permute(pool, in0, 64, {{v[0-9]+}}, *{{v[0-9]+}}, 2, [[ROWS:v[0-9]+]]);
// CODE: const uint8_t *[[GU:w[0-9]+]] = reinterpret_cast<const uint8_t *>(weights + {{[0-9]+}}); // experts_e2m1
// CODE: const uint8_t *[[GUS:w[0-9]+]] = reinterpret_cast<const uint8_t *>(weights + {{[0-9]+}}); // experts_e8m0_scales
// CODE: groupedMatmulMXFP4(pool, [[ROWS]], 64, [[GU]], [[GUS]], 8, 80, [[OFFSETS:v[0-9]+]], nullptr, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Concatenated, {{.*}}}, [[H:v[0-9]+]]);
// CODE: groupedMatmulMXFP4(pool, [[H]], 40, {{w[0-9]+}}, {{w[0-9]+}}, 8, 64, [[OFFSETS]], nullptr, Epilogue{}, {{v[0-9]+}});
// CODE-NOT: groupedMatmul(
// CODE-NOT: quantizeE4M3

// The packed bytes: K = 35 codes [0.5, 6, -6, -0.5, 0 (30 times), -2] are
// 0x1, 0x7, 0xF, 0x9, ..., 0xC: bytes 0x71 0x9F, zeros, 0x0C alone in byte 17
// (the code past K is zero), then zeros to the end of the second block.
// RUN: moec compile %t/pack.mlir --target=cpu -o %t/pack
// RUN: FileCheck %s --check-prefix=PACKED-MANIFEST < %t/pack/manifest.txt
// PACKED-MANIFEST: weight constant0 f4e2m1 [1,1,35] 256 32
// PACKED-MANIFEST: weight constant1 f8e8m0 [1,1,2] 512 2
// RUN: od -A n -t x1 -j 256 -N 32 %t/pack/weights.bin | FileCheck %s --check-prefix=PACKED
// PACKED: 71 9f 00 00 00 00 00 00 00 00 00 00 00 00 00 00
// PACKED-NEXT: 00 0c 00 00 00 00 00 00 00 00 00 00 00 00 00 00
// RUN: od -A n -t x1 -j 512 -N 2 %t/pack/weights.bin | FileCheck %s --check-prefix=PACKED-SCALES
// PACKED-SCALES: 7f 80

// The flag's rules (the CUDA target's MXFP4 code: emit-cuda-mxfp4.mlir).
// RUN: not moec compile %fixtures/mixtral/model.onnx --expert-weights=mxfp4 --fp8 2>&1 | FileCheck %s --check-prefix=FLAG-FP8
// FLAG-FP8: --expert-weights=mxfp4 and --fp8 are two casts of the experts; choose one
// RUN: not moec compile %fixtures/mixtral/model.onnx --expert-weights=mxfp4 --compile-to=moe 2>&1 | FileCheck %s --check-prefix=FLAG-PHASE
// FLAG-PHASE: --expert-weights=mxfp4 casts the experts at the end of the grouped phase; drop --compile-to=moe
// RUN: not moec compile %fixtures/mixtral/model.onnx --expert-weights=f4 2>&1 | FileCheck %s --check-prefix=FLAG-NOTARGET
// FLAG-NOTARGET: --expert-weights needs --target=cuda (only =mxfp4 works without a target)
// RUN: not moec compile %fixtures/mixtral/model.onnx --expert-weights=f4 --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=FLAG-UNKNOWN
// FLAG-UNKNOWN: unknown --expert-weights='f4' (f32, bf16, mxfp4)
// RUN: not ls %t/a
// Without a target the cast is printed (the interpreter runs it).
// RUN: moec compile %fixtures/mixtral/model.onnx --expert-weights=mxfp4 | FileCheck %s --check-prefix=IR
// IR: moe.grouped_matmul {{.*}} weight_scales(%{{.*}} : tensor<8x80x2xf8E8M0FNU>) {{.*}} : tensor<?x64xf32>, tensor<8x80x64xf4E2M1FN>, tensor<8xi32> -> tensor<?x40xf32>
// IR: moe.grouped_matmul {{.*}} weight_scales(%{{.*}} : tensor<8x64x2xf8E8M0FNU>) : tensor<?x40xf32>, tensor<8x64x40xf4E2M1FN>, tensor<8xi32> -> tensor<?x64xf32>

//--- pack.mlir
func.func @f(%x: tensor<?x35xf32>, %o: tensor<1xi32>) -> tensor<?x1xf32> {
  %w = arith.constant dense<[[[0.5, 6.0, -6.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0]]]> : tensor<1x1x35xf4E2M1FN>
  %s = arith.constant dense<[[[1.0, 2.0]]]> : tensor<1x1x2xf8E8M0FNU>
  %0 = moe.grouped_matmul %x, %w, %o weight_scales(%s : tensor<1x1x2xf8E8M0FNU>) : tensor<?x35xf32>, tensor<1x1x35xf4E2M1FN>, tensor<1xi32> -> tensor<?x1xf32>
  return %0 : tensor<?x1xf32>
}
