// --weights=external: the manifest lays weights.bin out, nothing writes it (no
// splat expanded); bench/write_weights.py fills it byte for byte as moec would.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %moec_src/bench/make_block_mlir.py --experts 8 --hidden 64 --inter 40 --top-k 2 -o %t/block.mlir
// RUN: moec compile %t/block.mlir --target=cpu -o %t/embedded
// RUN: moec compile %t/block.mlir --target=cpu --weights=external -o %t/external
// RUN: FileCheck %s < %t/external/manifest.txt
// RUN: not ls %t/external/weights.bin
// RUN: %python %moec_src/bench/write_weights.py %t/external --splat router=0.01 --splat gate_up=0.02 --splat down=0.03
// RUN: cmp %t/embedded/weights.bin %t/external/weights.bin
// The four benchmark shapes compile without expanding a splat (DeepSeek-V3: 45 GB).
// RUN: %python %moec_src/bench/make_block_mlir.py --model deepseek-v3 -o %t/deepseek.mlir
// RUN: moec compile %t/deepseek.mlir --target=cpu --weights=external -o %t/deepseek
// RUN: FileCheck %s --check-prefix=DEEPSEEK < %t/deepseek/manifest.txt
// RUN: %python %moec_src/bench/make_block_mlir.py --model gpt-oss-120b -o %t/gpt-oss.mlir
// RUN: moec compile %t/gpt-oss.mlir --target=cpu --weights=external -o %t/gpt-oss
// RUN: FileCheck %s --check-prefix=GPTOSS < %t/gpt-oss/manifest.txt
// RUN: not moec compile %t/block.mlir --target=cpu --weights=inline -o %t/bad 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not moec compile %t/block.mlir --weights=external 2>&1 | FileCheck %s --check-prefix=NOTARGET

// CHECK: --weights=external: weights.bin is not written
// CHECK: weights weights.bin 248064
// CHECK: input hidden_states f32 [-1,64]
// CHECK: weight router f32 [8,64] 256 2048
// CHECK: weight gate_up f32 [8,80,64] 2304 163840
// CHECK: weight down f32 [8,64,40] 166144 81920
// BAD: unknown --weights='inline' (embedded, external)
// NOTARGET: --weights needs --target
// DEEPSEEK: weights weights.bin 45280658688
// DEEPSEEK: weight router f32 [256,7168] 256
// DEEPSEEK: weight correction_bias f32 [256]
// DEEPSEEK: weight gate_up f32 [256,4096,7168]
// DEEPSEEK: weight down f32 [256,7168,2048]
// DEEPSEEK: weight shared_gate_up f32 [4096,7168]
// DEEPSEEK: weight shared_down f32 [7168,2048]
// GPTOSS: weight router f32 [128,2880]
// GPTOSS: weight router_bias f32 [128]
// GPTOSS: weight gate_up f32 [128,5760,2880]
// GPTOSS: weight gate_up_bias f32 [128,5760]
// GPTOSS: weight down f32 [128,2880,2880]
// GPTOSS: weight down_bias f32 [128,2880]
