// --weights=external: the manifest lays weights.bin out, nothing writes it (no
// splat expanded); bench/write_weights.py fills it byte for byte as moec would.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %moec_src/bench/make_block_mlir.py --experts 8 --hidden 64 --inter 40 --top-k 2 -o %t/block.mlir
// RUN: moec compile %t/block.mlir --target=cpu -o %t/embedded
// RUN: moec compile %t/block.mlir --target=cpu --weights=external -o %t/external
// RUN: FileCheck %s < %t/external/manifest.txt
// RUN: not ls %t/external/weights.bin
// RUN: %python %moec_src/bench/write_weights.py %t/external --splat 0.01
// RUN: cmp %t/embedded/weights.bin %t/external/weights.bin
// RUN: not moec compile %t/block.mlir --target=cpu --weights=inline -o %t/bad 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not moec compile %t/block.mlir --weights=external 2>&1 | FileCheck %s --check-prefix=NOTARGET

// CHECK: --weights=external: weights.bin is not written
// CHECK: weights weights.bin 247872
// CHECK: input hidden_states f32 [-1,64]
// CHECK: weight constant0 f32 [8,64] 64 2048
// CHECK: weight constant1 f32 [8,80,64] 2112 163840
// CHECK: weight constant2 f32 [8,64,40] 165952 81920
// BAD: unknown --weights='inline' (embedded, external)
// NOTARGET: --weights needs --target
