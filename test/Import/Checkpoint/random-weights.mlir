// moec compile DIR --random-weights[=SEED]: config.json alone, every weight a
// placeholder marked with its fill (docs/artifact.md, "Weights filled at
// load"), the manifest's fills, and the flag's errors.
//
// RUN: rm -rf %t && mkdir -p %t/qwen %t/gpt %t/deepseek
// RUN: cp %fixtures/models/qwen3_moe/checkpoint/config.json %t/qwen/
// RUN: cp %fixtures/models/gpt_oss/checkpoint/config.json %t/gpt/
// RUN: cp %fixtures/models/deepseek_v3/checkpoint/config.json %t/deepseek/

// The step program: the seed on the module, normals of initializer_range
// (0.15 here) as marked splats of distinct values (2^16, 2^16 + 2^9, ...:
// constant folding merges equal constants), RMSNorm weights ones, the rotary
// frequencies computed.
// RUN: moec compile %t/qwen --random-weights=7 --compile-to=moe | FileCheck %s --check-prefix=IR
// IR: module attributes {moec.random_seed = 7 : ui64}
// IR-DAG: arith.constant dense_resource<rotary.inv_freq> : tensor<8xf32>
// IR-DAG: arith.constant {moec.name = "model.embed_tokens.weight", moec.random_normal = 1.500000e-01 : f64} dense<6.553600e+04> : tensor<128x64xf32>
// IR-DAG: arith.constant {moec.name = "model.layers.0.input_layernorm.weight"} dense<1.000000e+00> : tensor<64xf32>
// IR-DAG: arith.constant {moec.name = "model.layers.1.mlp.experts.gate_up_proj", moec.random_normal = 1.500000e-01 : f64} dense<{{[0-9.]+}}e+04> : tensor<8x64x64xf32>
// IR-NOT: dense_resource<model.

// No value: seed 0. The same config with the flag compiles whatever
// safetensors lie beside it (here: none).
// RUN: moec compile %t/qwen --random-weights --compile-to=moe | FileCheck %s --check-prefix=SEED0
// SEED0: module attributes {moec.random_seed = 0 : ui64}

// The artifact: weights.bin holds only the stored weights; the manifest
// states the image, the seed and every weight's fill.
// RUN: moec compile %t/qwen --random-weights=7 --target=cpu --max-batch=2 --max-seq=16 -o %t/qwen-art
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/qwen-art/manifest.txt
// MANIFEST: moec-artifact 4
// MANIFEST: weights weights.bin 288
// MANIFEST: weights_image {{[0-9]+}}
// MANIFEST: random_seed 7
// MANIFEST-DAG: weight model.embed_tokens.weight f32 [128,64] {{[0-9]+}} 32768 normal 0x1.333334p-3
// MANIFEST-DAG: weight model.layers.0.input_layernorm.weight f32 [64] {{[0-9]+}} 256 constant 0x1p+0
// MANIFEST-DAG: weight rotary.inv_freq f32 [8] {{[0-9]+}} 32 stored 256
// MANIFEST-DAG: weight model.layers.1.mlp.experts.gate_up_proj f32 [8,64,64] {{[0-9]+}} 131072 normal 0x1.333334p-3
// Every random weight keeps a tensor of its own (none merged by folding).
// MANIFEST-DAG: weight model.layers.0.self_attn.v_proj.weight f32 [32,64] {{[0-9]+}} 8192 normal
// MANIFEST-DAG: weight model.layers.1.self_attn.v_proj.weight f32 [32,64] {{[0-9]+}} 8192 normal
// MANIFEST-DAG: weight model.layers.1.self_attn.o_proj.weight f32 [64,64] {{[0-9]+}} 16384 normal
// MANIFEST-DAG: weight lm_head.weight f32 [128,64] {{[0-9]+}} 32768 normal
// RUN: moec-run %t/qwen-art --inputs %fixtures/models/qwen3_moe/prompt.npz --outputs %t/logits.npz 2>&1 | FileCheck %s --check-prefix=NOTE
// NOTE: moec: note: {{.*}}qwen-art holds random weights (seed 7), filled at load: its outputs mean nothing

// gpt-oss: biases and sinks are zeros.
// RUN: moec compile %t/gpt --random-weights=1 --target=cpu --max-batch=1 --max-seq=16 -o %t/gpt-art
// RUN: FileCheck %s --check-prefix=GPT < %t/gpt-art/manifest.txt
// GPT-DAG: weight model.layers.0.self_attn.sinks f32 [4] {{[0-9]+}} 16 constant 0x0p+0
// GPT-DAG: weight model.layers.0.self_attn.q_proj.bias f32 [64] {{[0-9]+}} 256 constant 0x0p+0
// GPT-DAG: weight model.layers.0.mlp.router.bias f32 [8] {{[0-9]+}} 32 constant 0x0p+0

// DeepSeek-V3 with --fp8: the experts' codes are random e4m3 of deviation 64
// with block scales sigma/64; e_score_correction_bias is zeros.
// RUN: moec compile %t/deepseek --random-weights=1 --fp8 --target=cpu --max-batch=1 --max-seq=16 -o %t/deepseek-art
// RUN: FileCheck %s --check-prefix=FP8 < %t/deepseek-art/manifest.txt
// FP8-DAG: weight model.layers.1.mlp.experts.gate_up_proj.e4m3 f8e4m3 [8,64,64] {{[0-9]+}} 32768 normal 0x1p+6
// FP8-DAG: weight model.layers.1.mlp.experts.gate_up_proj.e4m3_scales f32 [8,1,1] {{[0-9]+}} 32 constant 0x1.333334p-9
// FP8-DAG: weight model.layers.1.mlp.gate.e_score_correction_bias f32 [8] {{[0-9]+}} 32 constant 0x0p+0

// Errors. A config.json alone, without the flag: the missing safetensors,
// and the flag that would compile it.
// RUN: not moec compile %t/qwen --target=cpu -o %t/none 2>&1 | FileCheck %s --check-prefix=NOWEIGHTS
// NOWEIGHTS: holds neither model.safetensors nor model.safetensors.index.json (a config.json alone compiles with --random-weights, weights filled at load)
// RUN: not ls %t/none

// A bad SEED.
// RUN: not moec compile %t/qwen --random-weights=abc --target=cpu -o %t/none 2>&1 | FileCheck %s --check-prefix=SEED
// RUN: not moec compile %t/qwen --random-weights=-1 --target=cpu -o %t/none 2>&1 | FileCheck %s --check-prefix=SEED
// RUN: not moec compile %t/qwen --random-weights=18446744073709551616 --target=cpu -o %t/none 2>&1 | FileCheck %s --check-prefix=SEED
// SEED: moec: --random-weights='{{.*}}': SEED must be a decimal integer in [0, 2^64)
// RUN: not ls %t/none

// Not a checkpoint directory, and --weights=external.
// RUN: not moec compile %s --random-weights=1 -o %t/none 2>&1 | FileCheck %s --check-prefix=NOTDIR
// NOTDIR: moec: --random-weights needs a checkpoint directory (one holding config.json)
// RUN: not moec compile %t/qwen --random-weights=1 --target=cpu --weights=external -o %t/none 2>&1 | FileCheck %s --check-prefix=EXTERNAL
// EXTERNAL: moec: --random-weights fills the weights at load; --weights=external is for weights filled elsewhere
// RUN: not ls %t/none

// A config.json that is not JSON.
// RUN: mkdir -p %t/broken && echo "{" > %t/broken/config.json
// RUN: not moec compile %t/broken --random-weights=1 --compile-to=moe 2>&1 | FileCheck %s --check-prefix=JSON
// JSON: config.json: not valid JSON
