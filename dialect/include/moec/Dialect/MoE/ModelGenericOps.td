//===- ModelGenericOps.td - generic ops of the step program -*- tablegen -*-===//
//
// What moe-raise-onnx-model builds where no known form (moe.rms_norm,
// moe.linear, moe.rotary, ...) matches: a fused elementwise chain over the
// token rows, and a reduction of each row. docs/dialect.md, "Whole models",
// states the semantics once.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_MOE_MODELGENERICOPS_TD
#define MOEC_DIALECT_MOE_MODELGENERICOPS_TD

def MoE_ReduceKind : I32EnumAttr<"ReduceKind", "how moe.reduce_rows combines a row", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Mean", 1, "mean">,
  I32EnumAttrCase<"Max", 2, "max">
]> {
  let cppNamespace = "::moec::moe";
  let genSpecializedAttr = 0;
}
def MoE_ReduceKindAttr : EnumAttr<MoE_Dialect, MoE_ReduceKind, "reduce"> {
  let assemblyFormat = "`<` $value `>`";
}

def MoE_ElementwiseOp : MoE_Op<"elementwise", [Pure, IsolatedFromAbove]> {
  let summary = "a fused chain of scalar ops over the elements of token rows";
  let description = [{
    The result is [N, C]. Each operand is token-major [N, C], a column [N, 1]
    (one value per row, broadcast over the columns), a row vector [C]
    (broadcast over the rows), or a scalar (rank 0, or [1]). The body takes
    one scalar per operand, of the operand's element type, and yields one
    scalar of the result's: `result[n, c] = body(a[n, c], w[c], s, ...)`. The
    body holds `arith` and `math` ops on scalars only.

    ```mlir
    %y = moe.elementwise %x, %w : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32> {
    ^bb0(%a: f32, %b: f32):
      %p = arith.mulf %a, %b : f32
      moe.yield %p : f32
    }
    ```
  }];
  let arguments = (ins Variadic<MoE_FloatTensor>:$inputs);
  let results = (outs MoE_FloatTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $inputs attr-dict `:` type($inputs) `->` type($result) $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def MoE_YieldOp : MoE_Op<"yield", [Pure, Terminator, HasParent<"ElementwiseOp">]> {
  let summary = "the scalar that moe.elementwise's body computes";
  let arguments = (ins AnyTypeOf<[F16, BF16, F32, F64]>:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def MoE_ReduceRowsOp : MoE_Op<"reduce_rows", [Pure]> {
  let summary = "the sum, mean or maximum of each row";
  let description = [{
    `input` [N, C] (C > 0), result [N, 1]: `result[n, 0]` is the sum, the mean
    or the maximum of row n's C columns, accumulated in f32 or wider in
    ascending column order and rounded once to the result type.
  }];
  let arguments = (ins MoE_FloatTensor:$input, MoE_ReduceKindAttr:$kind);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // MOEC_DIALECT_MOE_MODELGENERICOPS_TD
