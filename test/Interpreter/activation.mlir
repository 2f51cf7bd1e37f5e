// moe.activation and #moe.activation (docs/dialect.md, "Activation"): gated
// layouts compute f(g)·(u + beta) after clamping g <= limit, |u| <= limit;
// layout none computes f(x). Expected values: the formulas by hand, rounded to
// f32 (sigmoid(7) = 0.99908895, sigmoid(-1) = 0.26894142, Φ(1) = 0.84134475,
// Φ(-2) = 0.02275013).

// RUN: moec-interp %s --function gpt_oss_clamped --print | FileCheck %s --check-prefix=SWIGLU
// RUN: moec-interp %s --function ungated --print | FileCheck %s --check-prefix=NONE
// RUN: moec-interp %s --function concatenated_relu --print | FileCheck %s --check-prefix=CONCAT

// Interleaved [g0, u0, g1, u1] = [10, 9, -1, -8]: g0 -> 7, u0 -> 7:
// 7·sigmoid(7)·(7 + 1) = 55.9489822; u1 -> -7: -1·sigmoid(-1)·(-7 + 1) = 1.61364853.
// SWIGLU: result0 = tensor<1x2xf32> {{\[}}[55.9489822, 1.61364853]]
func.func @gpt_oss_clamped() -> tensor<1x2xf32> {
  %x = arith.constant dense<[[10.0, 9.0, -1.0, -8.0]]> : tensor<1x4xf32>
  %y = moe.activation %x {activation = #moe.activation<silu, alpha = 1.0, beta = 1.0, limit = 7.0>,
                          layout = #moe.gate_up_layout<interleaved>} : tensor<1x4xf32> -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}

// gelu (erf form): 1·Φ(1) and -2·Φ(-2); relu; identity.
// NONE: result0 = tensor<1x2xf32> {{\[}}[0.841344774, -0.0455002636]]
// NONE: result1 = tensor<1x2xf32> {{\[}}[1, 0]]
// NONE: result2 = tensor<1x2xf32> {{\[}}[1, -2]]
func.func @ungated() -> (tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>) {
  %x = arith.constant dense<[[1.0, -2.0]]> : tensor<1x2xf32>
  %g = moe.activation %x {activation = #moe.activation<gelu>, layout = #moe.gate_up_layout<none>}
      : tensor<1x2xf32> -> tensor<1x2xf32>
  %r = moe.activation %x {activation = #moe.activation<relu>, layout = #moe.gate_up_layout<none>}
      : tensor<1x2xf32> -> tensor<1x2xf32>
  %i = moe.activation %x {activation = #moe.activation<identity>, layout = #moe.gate_up_layout<none>}
      : tensor<1x2xf32> -> tensor<1x2xf32>
  return %g, %r, %i : tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>
}

// Concatenated [g0, g1, u0, u1] = [3, -1, 2, 5]: relu(3)·2, relu(-1)·5. In bf16:
// the result rounds to bf16 (6 and 0 are exact).
// CONCAT: result0 = tensor<2x2xbf16> {{\[}}[6, 0], [3, 0]]
func.func @concatenated_relu() -> tensor<2x2xbf16> {
  %x = arith.constant dense<[[3.0, -1.0, 2.0, 5.0], [1.5, 0.0, 2.0, 7.0]]> : tensor<2x4xbf16>
  %y = moe.activation %x {activation = #moe.activation<relu>, layout = #moe.gate_up_layout<concatenated>}
      : tensor<2x4xbf16> -> tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}
