//===- ModelOps.td - the decoder ops around the MoE blocks -*- tablegen -*-===//
//
// What a whole decoder-only model adds around moe.layer: token embedding,
// RMSNorm, rotary embedding and causal attention over the KV cache that the
// runtime owns. Every activation is a token-major matrix [N, C]: N tokens of
// any sequences of one step (a prefill of several prompts, or one token per
// sequence when decoding), each token carrying its sequence and position.
// docs/dialect.md, "Whole models", states the semantics once.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_MOE_MODELOPS_TD
#define MOEC_DIALECT_MOE_MODELOPS_TD

def MoE_EmbeddingOp : MoE_Op<"embedding", [Pure]> {
  let summary = "rows of the embedding table, one per token id";
  let description = [{
    `ids` [N] (i32 or i64), `table` [V, H]: `result[n] = table[ids[n]]`, of
    the table's element type, or f32 from a bf16 or f16 table (widened
    exactly). An id outside [0, V) is an error at run time, not a row.
  }];
  let arguments = (ins MoE_IndexTensor:$ids, MoE_FloatTensor:$table);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` type($ids) `,` type($table) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_RMSNormOp : MoE_Op<"rms_norm", [Pure]> {
  let summary = "root-mean-square normalisation of groups of columns";
  let description = [{
    `input` [M, K], `weight` [G] with G dividing K: each row's K columns form
    K / G groups of G contiguous columns (one group per row for a hidden
    state; one per head for Qwen3's query and key norms), each normalised on
    its own: `y = x / sqrt(mean(x²) + epsilon) · (weight_offset + weight)`,
    the mean in f32 or wider.
  }];
  let arguments = (ins MoE_FloatTensor:$input, MoE_FloatTensor:$weight,
                       F64Attr:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_offset);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_AddRMSNormOp : MoE_Op<"add_rms_norm", [Pure]> {
  let summary = "a residual sum and its RMS normalisation";
  let description = [{
    `input` and `addend` [M, K] f32: `sum = input + addend` (one f32 rounding
    an element, as arith.addf), then `result = moe.rms_norm(sum, weight)` with
    the same `epsilon`, `weight_offset` and groups. Both results are the
    values the two ops would give; moe-fuse-residual-norm forms it where a
    residual sum feeds a norm, so that a target computes both in one pass.
  }];
  let arguments = (ins MoE_FloatTensor:$input, MoE_FloatTensor:$addend,
                       MoE_FloatTensor:$weight, F64Attr:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_offset);
  let results = (outs MoE_FloatTensor:$sum, MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $addend `,` $weight attr-dict `:` type($input) `,` type($addend) `,`
    type($weight) `->` type($sum) `,` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_RotaryOp : MoE_Op<"rotary", [Pure]> {
  let summary = "rotary position embedding of a slice of every head";
  let description = [{
    `input` [N, heads · head_dim], `positions` [N], `inv_freq` [R/2] f32: in
    every head, the R columns from `offset` rotate by the angles
    `positions[n] · inv_freq[i]`, their cosine and sine multiplied by `scale`
    (YaRN's attention factor). Pairs are (i, i + R/2) of the slice (the
    "rotate half" form), or (2i, 2i + 1) when `interleaved`. Other columns pass
    through. The frequencies carry the rope variant (default, YaRN, ...):
    the front end computes them once.
  }];
  let arguments = (ins MoE_FloatTensor:$input, MoE_IndexTensor:$positions,
                       MoE_ScaleTensor:$inv_freq,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       DefaultValuedAttr<I64Attr, "0">:$offset,
                       DefaultValuedAttr<BoolAttr, "false">:$interleaved,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions `,` $inv_freq attr-dict `:` type($input) `,` type($positions)
    `,` type($inv_freq) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_AttentionOp : MoE_Op<"attention", [AttrSizedOperandSegments]> {
  let summary = "causal attention of a step's tokens over the KV cache";
  let description = [{
    `query` [N, Hq · D], `key` [N, Hkv · Dk], `value` [N, Hkv · Dv], `positions`
    and `sequences` [N]; optional `key_shared` [N, Dr] (one more key slice that
    every head shares: DeepSeek-V3's decoupled rope key, D = Dk + Dr) and
    `sinks` [Hq] (gpt-oss). Result [N, Hq · Dv].

    The KV cache of slot `layer` belongs to the runtime and lives across the
    program's runs of one generation. First each token's key and value are
    written at (sequences[n], positions[n]); then token n attends over its
    sequence's entries at positions p with p <= positions[n] and, when
    `window` > 0, p > positions[n] - window: query head h reads KV head
    h / (Hq / Hkv), with weights `softmax_p(scale · q·k_p)` (a sink adds
    `exp(sinks[h])` to the denominator only). Every position read must have
    been written, in this run or an earlier one. A program run on a fresh
    cache with positions 0..T-1 is the cache-free causal forward.
  }];
  let arguments = (ins MoE_FloatTensor:$query, MoE_FloatTensor:$key,
                       MoE_FloatTensor:$value, MoE_IndexTensor:$positions,
                       MoE_IndexTensor:$sequences,
                       Optional<MoE_FloatTensor>:$key_shared,
                       Optional<MoE_FloatTensor>:$sinks,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$layer,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       F64Attr:$scale,
                       DefaultValuedAttr<I64Attr, "0">:$window);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $positions `,` $sequences
    (`key_shared` `(` $key_shared^ `:` type($key_shared) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value) `,` type($positions)
    `,` type($sequences) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // MOEC_DIALECT_MOE_MODELOPS_TD
