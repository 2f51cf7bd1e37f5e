// Bad FP8 checkpoints (quantization_config fp8, DeepSeek-V3's layout: `X.weight`
// F8_E4M3 with `X.weight_scale_inv` per 128x128 block): a clear error naming
// the tensor, a non-zero exit, and no artifact left behind.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: cp -r %fixtures/models/deepseek_v3_fp8/checkpoint %t/good

// A dense projection without its block scales (renamed in the header, same length).
// RUN: cp -r %t/good %t/scale && sed -i 's/layers.0.self_attn.q_a_proj.weight_scale_inv/layers.0.self_attn.q_a_proj.weight_scale_inX/' %t/scale/model.safetensors
// RUN: not moec compile %t/scale --target=cpu -o %t/scale-art 2>&1 | FileCheck %s --check-prefix=SCALE
// SCALE: tensor 'model.layers.0.self_attn.q_a_proj.weight_scale_inv' is missing: 'model.layers.0.self_attn.q_a_proj.weight' is F8_E4M3 [64, 192] and needs its block scales [1, 2], in blocks of 128x128 (quantization_config.weight_block_size)
// RUN: not ls %t/scale-art

// An expert without its block scales.
// RUN: cp -r %t/good %t/expert && sed -i 's/experts.5.up_proj.weight_scale_inv/experts.5.up_proj.weight_scale_inX/' %t/expert/model.safetensors
// RUN: not moec compile %t/expert --compile-to=moe -o %t/expert.mlir 2>&1 | FileCheck %s --check-prefix=EXPERT
// EXPERT: tensor 'model.layers.1.mlp.experts.5.up_proj.weight_scale_inv' is missing: 'model.layers.1.mlp.experts.5.up_proj.weight' is F8_E4M3 [128, 192] and needs its block scales [1, 2]
// RUN: not ls %t/expert.mlir

// Scales whose shape the blocks contradict (weight_block_size [128, 64]).
// RUN: cp -r %t/good %t/blocks && sed -i 's/^      128$/      64/' %t/blocks/config.json
// RUN: not moec compile %t/blocks --target=cpu -o %t/blocks-art 2>&1 | FileCheck %s --check-prefix=BLOCKS
// BLOCKS: tensor 'model.layers.0.self_attn.q_a_proj.weight_scale_inv' has shape [1, 2], but 'model.layers.0.self_attn.q_a_proj.weight' [64, 192] in blocks of 128x64 (quantization_config.weight_block_size) needs [1, 3]
// RUN: not ls %t/blocks-art

// FP8 weights without a quantization_config.
// RUN: cp -r %t/good %t/config && sed -i '/"quantization_config": {/,/^  },$/d' %t/config/config.json
// RUN: not moec compile %t/config --target=cpu -o %t/config-art 2>&1 | FileCheck %s --check-prefix=CONFIG
// CONFIG: tensor 'model.layers.0.self_attn.q_a_proj.weight' is F8_E4M3, but config.json has no fp8 quantization_config
// RUN: not ls %t/config-art

// Experts whose gate and up rows (64) are not whole 128-row blocks: moe.layer's
// gate_up cannot stack them with one scale per block, and moec does not
// quantise them again.
// RUN: %python %fixtures/models/fp8_checkpoint_forms.py narrow %t/good %t/narrow 64
// RUN: not moec compile %t/narrow --target=cpu -o %t/narrow-art 2>&1 | FileCheck %s --check-prefix=NARROW
// NARROW: tensor 'model.layers.1.mlp.experts.0.gate_proj.weight' is F8_E4M3 with 64 rows, not a multiple of 128: moe.layer's FP8 gate_up stacks the experts' gate_proj and up_proj rows with one scale per 128x128 block
// RUN: not ls %t/narrow-art
