// Bad MXFP4 checkpoints (quantization_config mxfp4, gpt-oss's layout: the
// experts' `_blocks` U8 [E, N, K/32, 16] with `_scales` U8 [E, N, K/32]): a
// clear error naming the tensor, a non-zero exit, and no artifact left behind.
// The good one imports with its experts kept MXFP4 (the checks of its numbers:
// ctest e2e.model.checkpoint-mxfp4.gpt_oss).
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: cp -r %fixtures/models/gpt_oss_mxfp4/checkpoint %t/good
// RUN: moec compile %t/good --compile-to=moe | FileCheck %s --check-prefix=GOOD
// GOOD: gate_up(%{{.*}} : tensor<8x64x64xf4E2M1FN>) down(%{{.*}} : tensor<8x64x32xf4E2M1FN>)
// GOOD-SAME: gate_up_scales(%{{.*}} : tensor<8x64x2xf8E8M0FNU>) down_scales(%{{.*}} : tensor<8x64x1xf8E8M0FNU>)

// Blocks without their scales (renamed in the header, same length).
// RUN: cp -r %t/good %t/scales && sed -i 's/layers.0.mlp.experts.down_proj_scales/layers.0.mlp.experts.down_proj_scaleX/' %t/scales/model.safetensors
// RUN: not moec compile %t/scales --target=cpu -o %t/scales-art 2>&1 | FileCheck %s --check-prefix=SCALES
// SCALES: tensor 'model.layers.0.mlp.experts.down_proj_scales' is missing (the gpt_oss layout needs it)
// RUN: not ls %t/scales-art

// Scales of another dtype.
// RUN: cp -r %t/good %t/dtype && sed -i 's/down_proj_scales":{"dtype":"U8"/down_proj_scales":{"dtype":"I8"/' %t/dtype/model.safetensors
// RUN: not moec compile %t/dtype --target=cpu -o %t/dtype-art 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: tensor 'model.layers.0.mlp.experts.down_proj_scales' has dtype I8; MXFP4 blocks and scales are U8
// RUN: not ls %t/dtype-art

// The e8m0 NaN (0xFF) as a scale.
// RUN: cp -r %t/good %t/nan
// RUN: %python -c "import json, struct, sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); b[8 + n + h[sys.argv[2]]['data_offsets'][0] + 3] = 255; open(p, 'wb').write(b)" %t/nan/model.safetensors model.layers.1.mlp.experts.gate_up_proj_scales
// RUN: not moec compile %t/nan --target=cpu -o %t/nan-art 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: tensor 'model.layers.1.mlp.experts.gate_up_proj_scales' holds the e8m0 NaN scale 0xFF (row 1, block 1)
// RUN: not ls %t/nan-art

// MXFP4 blocks without a quantization_config.
// RUN: cp -r %t/good %t/config && sed -i '/"quantization_config": {/,/^  },$/d' %t/config/config.json
// RUN: not moec compile %t/config --target=cpu -o %t/config-art 2>&1 | FileCheck %s --check-prefix=CONFIG
// CONFIG: tensor 'model.layers.0.mlp.experts.gate_up_proj_blocks' is MXFP4, but config.json has no mxfp4 quantization_config
// RUN: not ls %t/config-art
