// Every result is rounded once to its declared element type (nearest even for
// floats; integers truncate toward zero), while ops compute in f64.

// RUN: moec-interp %s --function main --print | FileCheck %s
// RUN: moec-interp %s --function bf16_argument --inputs %S/Inputs/bf16-from-f32.npz --print | FileCheck %s --check-prefix=BF16

// f32: 1 + 1e-8 is 1. f16 (spacing 2 above 2048): 2049 -> 2048 and
// 2051 -> 2052, ties to the even mantissa. bf16 (spacing 2 above 256): 257 -> 256,
// 259 -> 260. f64 keeps 1 + 1e-12 (printed with 17 digits). i32: -7 / 2
// truncates to -3.
// CHECK: result0 = tensor<1xf32> [1]
// CHECK: result1 = tensor<2xf16> [2048, 2052]
// CHECK: result2 = tensor<2xbf16> [256, 260]
// CHECK: result3 = tensor<1xf64> [1.0000000000010001]
// CHECK: result4 = tensor<2xi32> [-3, 3]
func.func @main() -> (tensor<1xf32>, tensor<2xf16>, tensor<2xbf16>, tensor<1xf64>, tensor<2xi32>) {
  %a = arith.constant dense<1.0> : tensor<1xf32>
  %b = arith.constant dense<1.0e-8> : tensor<1xf32>
  %f32 = "onnx.Add"(%a, %b) : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %h = arith.constant dense<[2048.0, 2050.0]> : tensor<2xf16>
  %one_h = arith.constant dense<1.0> : tensor<f16>
  %f16 = "onnx.Add"(%h, %one_h) : (tensor<2xf16>, tensor<f16>) -> tensor<2xf16>
  %bf = arith.constant dense<[256.0, 258.0]> : tensor<2xbf16>
  %one_bf = arith.constant dense<1.0> : tensor<bf16>
  %bf16 = "onnx.Add"(%bf, %one_bf) : (tensor<2xbf16>, tensor<bf16>) -> tensor<2xbf16>
  %d = arith.constant dense<1.0> : tensor<1xf64>
  %e = arith.constant dense<1.0e-12> : tensor<1xf64>
  %f64 = "onnx.Add"(%d, %e) : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %n = arith.constant dense<[-7, 7]> : tensor<2xi32>
  %two = arith.constant dense<2> : tensor<i32>
  %i32 = "onnx.Div"(%n, %two) : (tensor<2xi32>, tensor<i32>) -> tensor<2xi32>
  return %f32, %f16, %bf16, %f64, %i32 : tensor<1xf32>, tensor<2xf16>, tensor<2xbf16>, tensor<1xf64>, tensor<2xi32>
}

// Arguments are rounded to their type too: an f32 array for a bf16 argument
// (numpy has no bf16). 257 and 259 are ties (-> 256, 260); 1e-3 has the
// 8-bit significand 131/128 · 2^-10 = 0.00099945068359375.
// BF16: x = tensor<4xbf16> [1, 256, 260, 0.000999450684]
func.func @bf16_argument(%x: tensor<4xbf16> {onnx.name = "x"}) -> (tensor<4xbf16> {onnx.name = "x"}) {
  return %x : tensor<4xbf16>
}
