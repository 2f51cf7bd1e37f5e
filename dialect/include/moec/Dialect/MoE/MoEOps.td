//===- MoEOps.td - moe dialect operations ------------------*- tablegen -*-===//
//
// Shapes in the descriptions: T tokens, H hidden size, E experts (local experts
// for the lowered ops), K top-k, S = T * K routed slots, I intermediate size.
// docs/dialect.md is the full statement of the semantics.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_MOE_MOEOPS_TD
#define MOEC_DIALECT_MOE_MOEOPS_TD

include "moec/Dialect/MoE/MoEDialect.td"
include "moec/Dialect/MoE/MoEAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/CommonAttrConstraints.td"

// Element types the compute ops read and write. FP8 appears only where block
// scales come with it (grouped_matmul, quantize).
def MoE_Float : AnyTypeOf<[F16, BF16, F32, F64]>;
def MoE_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def MoE_MatmulOperand : RankedTensorOf<[F16, BF16, F32, F64, F8E4M3FN]>;
def MoE_IndexTensor : RankedTensorOf<[I32, I64]>;
def MoE_I32Tensor : RankedTensorOf<[I32]>;
def MoE_ScaleTensor : RankedTensorOf<[F32]>;
// moe.grouped_matmul's weights may also be MXFP4 (e2m1 codes with one e8m0
// scale per 32 along K: docs/dialect.md, "MXFP4 layout").
def MoE_GroupedWeights : RankedTensorOf<[F16, BF16, F32, F64, F8E4M3FN, F4E2M1FN]>;
def MoE_WeightScaleTensor : RankedTensorOf<[F32, F8E8M0FNU]>;

// Routing attributes shared by moe.layer and moe.route.
defvar MoE_RoutingArguments = (ins
  MoE_RoutingKindAttr:$routing,
  ConfinedAttr<I64Attr, [IntPositive]>:$top_k,
  DefaultValuedAttr<BoolAttr, "false">:$normalize,
  DefaultValuedAttr<I64Attr, "1">:$num_groups,
  DefaultValuedAttr<I64Attr, "1">:$topk_groups,
  DefaultValuedAttr<F64Attr, "1.0">:$routed_scaling_factor
);

//===----------------------------------------------------------------------===//
// The high-level op
//===----------------------------------------------------------------------===//

def MoE_LayerOp : MoE_Op<"layer", [Pure, AttrSizedOperandSegments]> {
  let summary = "one Mixture-of-Experts block: router, routed experts, shared experts";
  let description = [{
    The meaning of a whole MoE block, independent of the form it was found in.

    Router: `logits = hidden · router_weightᵀ + router_bias` (or the given
    `router_logits`), then `routing` picks `top_k` experts per token and their
    weights (see `moe.route`). Or the routing comes precomputed, as a
    hand-written experts module takes it: `expert_ids` [T, K] (i32 or i64) and
    `expert_weights` [T, K]; then the routing attributes other than `top_k`
    (= K) keep their defaults, and an id outside [0, E) is the sentinel: that
    slot adds nothing. Each chosen expert `e` computes, in the
    `[out, in]` orientation of every weight here:

    ```
    gu = gate_up_weight[e] · x + gate_up_bias[e]       (separate: gate and up apart)
    h  = activation(gu) per gate_up_layout              ([2I] -> [I] when gated)
    y  = down_weight[e] · h + down_bias[e]
    ```

    Weights that are already FP8 (an e4m3 checkpoint, DeepSeek-V3's convention)
    are given as f8E4M3FN `gate_up` / `down` with their f32 block scales
    `gate_up_scales` [E, ⌈2I/128⌉, ⌈H/128⌉] and `down_scales` [E, ⌈H/128⌉,
    ⌈I/128⌉] (the `weight_scale_inv` dequantisation multipliers,
    docs/dialect.md "FP8 layout"); gate and up must then come fused.

    and the block returns `Σ_k weight[t, k] · y_k` plus, when present, the shared
    expert `down_s · act(gate_up_s · x)` (its gate and up concatenated when the
    activation is gated), scaled by `sigmoid(shared_gate_weight · x)` when that
    is given (Qwen2-MoE).

    ```mlir
    %y = moe.layer %x : tensor<?x64xf32>
           router_weight(%wr : tensor<8x64xf32>)
           gate_up(%wgu : tensor<8x256x64xf32>) down(%wd : tensor<8x64x128xf32>)
           {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true,
            activation = #moe.activation<silu>,
            gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x64xf32>
    ```
  }];
  let arguments = !con((ins
    MoE_FloatTensor:$hidden,
    Optional<MoE_FloatTensor>:$router_weight,
    Optional<MoE_FloatTensor>:$router_logits,
    Optional<MoE_IndexTensor>:$expert_ids,
    Optional<MoE_FloatTensor>:$expert_weights,
    Optional<MoE_FloatTensor>:$router_bias,
    Optional<MoE_FloatTensor>:$correction_bias,
    MoE_GroupedWeights:$gate_up_weight,
    Optional<MoE_FloatTensor>:$up_weight,
    MoE_GroupedWeights:$down_weight,
    Optional<MoE_FloatTensor>:$gate_up_bias,
    Optional<MoE_FloatTensor>:$up_bias,
    Optional<MoE_FloatTensor>:$down_bias,
    Optional<MoE_WeightScaleTensor>:$gate_up_scales,
    Optional<MoE_WeightScaleTensor>:$down_scales,
    Optional<MoE_FloatTensor>:$shared_gate_up_weight,
    Optional<MoE_FloatTensor>:$shared_down_weight,
    Optional<MoE_FloatTensor>:$shared_gate_weight),
    MoE_RoutingArguments,
    (ins MoE_ActivationAttr:$activation,
         MoE_GateUpLayoutAttr:$gate_up_layout));
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $hidden `:` type($hidden)
    (`router_weight` `(` $router_weight^ `:` type($router_weight) `)`)?
    (`router_logits` `(` $router_logits^ `:` type($router_logits) `)`)?
    (`expert_ids` `(` $expert_ids^ `:` type($expert_ids) `)`)?
    (`expert_weights` `(` $expert_weights^ `:` type($expert_weights) `)`)?
    (`router_bias` `(` $router_bias^ `:` type($router_bias) `)`)?
    (`correction_bias` `(` $correction_bias^ `:` type($correction_bias) `)`)?
    `gate_up` `(` $gate_up_weight `:` type($gate_up_weight) `)`
    (`up` `(` $up_weight^ `:` type($up_weight) `)`)?
    `down` `(` $down_weight `:` type($down_weight) `)`
    (`gate_up_bias` `(` $gate_up_bias^ `:` type($gate_up_bias) `)`)?
    (`up_bias` `(` $up_bias^ `:` type($up_bias) `)`)?
    (`down_bias` `(` $down_bias^ `:` type($down_bias) `)`)?
    (`gate_up_scales` `(` $gate_up_scales^ `:` type($gate_up_scales) `)`)?
    (`down_scales` `(` $down_scales^ `:` type($down_scales) `)`)?
    (`shared_gate_up` `(` $shared_gate_up_weight^ `:` type($shared_gate_up_weight) `)`)?
    (`shared_down` `(` $shared_down_weight^ `:` type($shared_down_weight) `)`)?
    (`shared_gate` `(` $shared_gate_weight^ `:` type($shared_gate_weight) `)`)?
    attr-dict `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of experts E (dimension 0 of the stacked weights); dynamic if unknown.
    int64_t getNumExperts();
    /// Intermediate size I of one expert; dynamic if unknown.
    int64_t getIntermediateSize();
    bool isGated() { return getGateUpLayout() != GateUpLayout::None; }
    /// Whether the routing comes as data (expert_ids, expert_weights).
    bool hasPrecomputedRouting() { return static_cast<bool>(getExpertIds()); }
  }];
}

//===----------------------------------------------------------------------===//
// The lowered ops
//===----------------------------------------------------------------------===//

def MoE_RouteOp : MoE_Op<"route", [Pure]> {
  let summary = "router logits to top-k expert ids and routing weights";
  let description = [{
    Per token (row of `logits`, [T, E]), in f32:
    - `softmax_topk`: `p = softmax(logits)`; ids = top-k of `p + correction_bias`;
      weights = `p[ids]`.
    - `topk_softmax`: ids = top-k of `logits + correction_bias`; weights =
      softmax of `logits[ids]` over the k chosen.
    - `sigmoid_group_topk`: `s = sigmoid(logits)`, `c = s + correction_bias`; the
      experts split into `num_groups` groups of E / num_groups; a group scores the
      sum of its two largest `c`; the `topk_groups` best groups stay, the others
      are masked to -inf; ids = top-k of the masked `c`; weights = `s[ids]`.

    Then, if `normalize`, weights /= (Σ weights + 1e-20); finally weights *=
    `routed_scaling_factor`. Ids come in descending order of score; ties go to the
    lower id. Results: ids [T, K] i32 in [0, E) and weights [T, K] f32.
  }];
  let arguments = !con((ins
    MoE_FloatTensor:$logits,
    Optional<MoE_FloatTensor>:$correction_bias), MoE_RoutingArguments);
  let results = (outs MoE_I32Tensor:$expert_ids, MoE_ScaleTensor:$weights);
  let assemblyFormat = [{
    $logits
    (`correction_bias` `(` $correction_bias^ `:` type($correction_bias) `)`)?
    attr-dict `:` type($logits) `->` type($expert_ids) `,` type($weights)
  }];
  let hasVerifier = 1;
}

def MoE_SortOp : MoE_Op<"sort", [Pure]> {
  let summary = "stable sort of routed slots by local expert id, with the sentinel";
  let description = [{
    `expert_ids` is [T, K]; slot `s = t * K + k` holds `expert_ids[t, k]`. A slot
    is local when `first_expert <= id < first_expert + num_experts`; its local id
    is `id - first_expert`. Every other id (negative, too large, or another rank's)
    becomes the sentinel `num_experts`.

    - `permutation` [S] i32: the slots ordered by local id, sentinels last; the
      sort is stable, so slots with the same id keep ascending slot order.
    - `offsets` [num_experts] i32: inclusive end offsets. Local expert `e` owns
      sorted rows `[e == 0 ? 0 : offsets[e-1], offsets[e])`.
    - `num_valid` (0-d i32) = `offsets[num_experts - 1]`: rows at or past it are
      sentinel rows, never computed.

    With `ep_size` (one program for every expert-parallel rank), the first local
    expert is `rank · num_experts`, the rank being the one the program runs as;
    `first_expert` is then 0.
  }];
  let arguments = (ins
    MoE_IndexTensor:$expert_ids,
    ConfinedAttr<I64Attr, [IntPositive]>:$num_experts,
    DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$first_expert,
    OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$ep_size);
  let results = (outs MoE_I32Tensor:$permutation, MoE_I32Tensor:$offsets,
                      MoE_I32Tensor:$num_valid);
  let assemblyFormat = [{
    $expert_ids attr-dict `:` type($expert_ids) `->` type($permutation) `,`
    type($offsets) `,` type($num_valid)
  }];
  let hasVerifier = 1;
}

def MoE_PermuteOp : MoE_Op<"permute", [Pure]> {
  let summary = "gather token rows into expert-sorted order";
  let description = [{
    `result[r] = hidden[permutation[r] floordiv top_k]` for `r < num_valid`; rows
    at or past `num_valid` are unspecified and never read.
  }];
  let arguments = (ins MoE_FloatTensor:$hidden, MoE_I32Tensor:$permutation,
                       MoE_I32Tensor:$num_valid,
                       ConfinedAttr<I64Attr, [IntPositive]>:$top_k);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $hidden `,` $permutation `,` $num_valid attr-dict `:`
    type($hidden) `,` type($permutation) `,` type($num_valid) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_GroupedMatmulOp : MoE_Op<"grouped_matmul", [Pure, AttrSizedOperandSegments]> {
  let summary = "sorted rows times stacked expert weights, group by group";
  let description = [{
    For sorted row `r` of expert `e` (by `offsets`, as `moe.sort` defines them):
    `acc = lhs[r] · weights[e]ᵀ (+ bias[e])`, accumulated in f32; then, when an
    `epilogue` activation is given, `result[r] = activation(acc)` per
    `epilogue_layout` (gated layouts halve N), else `result[r] = acc`. Rows at or
    past `offsets[E-1]` are never computed and their contents are unspecified.

    FP8: an `f8E4M3FN` operand comes with its scales, which are dequantisation
    multipliers. `lhs_scales` is [S, ceil(K/128)]: one per row per 128 columns.
    `weight_scales` is [E, ceil(N/128), ceil(K/128)]: one per 128×128 block. Each
    128-wide K block's partial sum is multiplied by both scales as it is added.

    MXFP4: `f4E2M1FN` weights [E, N, K] come with `weight_scales` of
    `f8E8M0FNU` [E, N, ceil(K/32)]: weight `[e, n, k]` stands for its e2m1
    value times `2^(s - 127)` of scale `[e, n, k/32]`. The rows are f32, bf16 or
    f16 (weight-only quantisation).
  }];
  let arguments = (ins
    MoE_MatmulOperand:$lhs,
    MoE_GroupedWeights:$weights,
    MoE_I32Tensor:$offsets,
    Optional<MoE_FloatTensor>:$bias,
    Optional<MoE_ScaleTensor>:$lhs_scales,
    Optional<MoE_WeightScaleTensor>:$weight_scales,
    OptionalAttr<MoE_ActivationAttr>:$epilogue,
    OptionalAttr<MoE_GateUpLayoutAttr>:$epilogue_layout);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $weights `,` $offsets
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`lhs_scales` `(` $lhs_scales^ `:` type($lhs_scales) `)`)?
    (`weight_scales` `(` $weight_scales^ `:` type($weight_scales) `)`)?
    attr-dict `:` type($lhs) `,` type($weights) `,` type($offsets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_ActivationOp : MoE_Op<"activation", [Pure]> {
  let summary = "expert activation on projected rows, gated or not";
  let description = [{
    Concatenated: `g = input[:, :N/2]`, `u = input[:, N/2:]`; interleaved:
    `g = input[:, 0::2]`, `u = input[:, 1::2]`; the result is `f(g) * (u + beta)`,
    [M, N/2], with the clamps of `#moe.activation`. Layout `none`: `f(input)`.
  }];
  let arguments = (ins MoE_FloatTensor:$input, MoE_ActivationAttr:$activation,
                       MoE_GateUpLayoutAttr:$layout);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def MoE_CombineOp : MoE_Op<"combine", [Pure, AttrSizedOperandSegments]> {
  let summary = "weighted scatter-add of sorted expert rows back to token order";
  let description = [{
    `result[t] = Σ_k weights[t, k] · rows[r]` over the slots `s = t * K + k`
    whose sorted row `r` (`permutation[r] = s`) is below `num_valid`, summed in
    f32 in ascending k and rounded once. Sentinel rows add nothing and are never
    read, so NaN or garbage there cannot leak; a token whose every slot is a
    sentinel gets an exact zero row (plus the addend, if any).

    An optional `addend` [T, H] (the shared experts' output) is added to the f32
    sum before the rounding, scaled per token by `sigmoid(addend_gate[t])` when
    `addend_gate` [T, 1] is given (Qwen2-MoE's shared-expert gate).

    With `ep_size` (one program for every expert-parallel rank) the addend is
    added on rank 0 only, so that the ranks' all-reduced sum counts it once.
  }];
  let arguments = (ins MoE_FloatTensor:$rows, MoE_I32Tensor:$permutation,
                       MoE_FloatTensor:$weights, MoE_I32Tensor:$num_valid,
                       Optional<MoE_FloatTensor>:$addend,
                       Optional<MoE_FloatTensor>:$addend_gate,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$ep_size);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $permutation `,` $weights `,` $num_valid
    (`addend` `(` $addend^ `:` type($addend) `)`)?
    (`addend_gate` `(` $addend_gate^ `:` type($addend_gate) `)`)?
    attr-dict `:`
    type($rows) `,` type($permutation) `,` type($weights) `,` type($num_valid)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_LinearOp : MoE_Op<"linear", [Pure]> {
  let summary = "a dense projection, x · Wᵀ + b, with an optional activation epilogue";
  let description = [{
    `input` [M, K], `weight` [N, K], optional `bias` [N]: `acc = input · weightᵀ +
    bias` in f32, then the `epilogue` activation per `epilogue_layout` (gated
    layouts halve N), rounded once to the result type. The router's logits and
    the shared experts are such projections.
  }];
  let arguments = (ins MoE_FloatTensor:$input, MoE_FloatTensor:$weight,
                       Optional<MoE_FloatTensor>:$bias,
                       OptionalAttr<MoE_ActivationAttr>:$epilogue,
                       OptionalAttr<MoE_GateUpLayoutAttr>:$epilogue_layout);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict `:`
    type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_MultiLinearOp : MoE_Op<"multi_linear", [Pure, AttrSizedOperandSegments]> {
  let summary = "sibling dense projections of the same rows, x · Wᵢᵀ + bᵢ";
  let description = [{
    `input` [M, K]; `weights`, one to four, [Nᵢ, K] of one element type;
    `biases` none, or one [Nᵢ] per weight. Result i [M, Nᵢ] is exactly
    `moe.linear(input, weights[i], biases[i])` without an epilogue (the
    results share one element type). moe-fuse-sibling-linears forms it from
    projections of one input (attention's q, k and v) so that a target can
    run them in one launch.
  }];
  let arguments = (ins MoE_FloatTensor:$input, Variadic<MoE_FloatTensor>:$weights,
                       Variadic<MoE_FloatTensor>:$biases);
  let results = (outs Variadic<MoE_FloatTensor>:$results);
  let assemblyFormat = [{
    $input `,` $weights (`biases` `(` $biases^ `:` type($biases) `)`)? attr-dict `:`
    type($input) `,` type($weights) `->` type($results)
  }];
  let hasVerifier = 1;
}

def MoE_QuantizeOp : MoE_Op<"quantize", [Pure]> {
  let summary = "per-row, 128-column-group quantisation to FP8 e4m3";
  let description = [{
    For each row and each group `g` of 128 columns (the last group may be
    shorter): `scale = max(amax / 448, 1e-12)`, `q = e4m3(x / scale)`.
    Results: `q` [M, K] f8E4M3FN and `scales` [M, ceil(K/128)] f32, the
    dequantisation multipliers `moe.grouped_matmul` takes as `lhs_scales`.
  }];
  let arguments = (ins MoE_FloatTensor:$input);
  let results = (outs RankedTensorOf<[F8E4M3FN]>:$result, MoE_ScaleTensor:$scales);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($result) `,` type($scales)
  }];
  let hasVerifier = 1;
}

def MoE_EPShardOp : MoE_Op<"ep_shard", [Pure]> {
  let summary = "this expert-parallel rank's experts of a tensor stacked by expert";
  let description = [{
    `input` [E, ...] is stacked by expert along dimension 0; the result [E /
    ep_size, ...] holds experts `[r · L, (r + 1) · L)`, L = E / ep_size, r the rank
    the program runs as. One program then serves every rank: a constant input is
    stored whole, and each rank's loader maps only its slice.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$ep_size);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def MoE_AllReduceOp : MoE_Op<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "sum of partial expert outputs across the expert-parallel ranks";
  let description = [{
    Each of the `ep_size` ranks holds the output of its local experts; the result
    on every rank is their element-wise sum. Not pure: it communicates.
  }];
  let arguments = (ins MoE_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$ep_size);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

include "moec/Dialect/MoE/ModelOps.td"
include "moec/Dialect/MoE/ModelGenericOps.td"

#endif // MOEC_DIALECT_MOE_MOEOPS_TD
