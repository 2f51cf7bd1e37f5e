//===- Passes.td - moec's passes ---------------------------*- tablegen -*-===//

#ifndef MOEC_TRANSFORMS_PASSES_TD
#define MOEC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoERaiseONNX : Pass<"moe-raise-onnx", "::mlir::ModuleOp"> {
  let summary = "Raise transformers' batched_mm MoE exports (onnx dialect) to moe.layer";
  let description = [{
    Recognises the form torch.onnx.export gives a transformers MoE block with the
    batched_mm experts backend (per-slot GatherND of stacked expert weights,
    batched MatMul, activation, weighted ReduceSum over the top-k) for Mixtral,
    Qwen-MoE, gpt-oss and DeepSeek-V3 (with its shared expert), and replaces it
    by one moe.layer: routing kind, top-k, normalisation, group limits, scaling,
    activation with its clamps, gate/up layout, biases and shared experts are
    recovered, and weights stored [E, in, out] are transposed at compile time.
    Near misses are left alone.
  }];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect"];
}

def MoERaiseONNXModel : Pass<"moe-raise-onnx-model", "::mlir::ModuleOp"> {
  let summary = "Raise a whole-model ONNX export ([B, T] token ids to logits) to the step program";
  let description = [{
    Runs after moe-raise-onnx. A function whose only argument is integer token
    ids [B, T] read by an embedding Gather and whose only result is [B, T, V]
    logits (torch.onnx.export of a decoder's cache-free forward) becomes the
    step program the checkpoint importer builds: @forward(input_ids,
    positions, sequences: [N]) -> [N, V] of moe.embedding, moe.rms_norm,
    moe.linear (weights transposed to [out, in] at compile time), moe.rotary
    (inverse frequencies and attention factor read out of the constants),
    moe.attention (causal, sliding window, GQA, sinks, DeepSeek's MLA with
    kv_b_proj split into key and value projections and the shared rope key;
    KV-cache slots 0..L-1 in program order), moe.layer and arith.addf.
    Every form checks the constants it relies on; elementwise nodes and
    last-axis reductions that no form matches are lowered generically
    (moe.elementwise, fusing chains, and moe.reduce_rows); any other value on
    the way from the logits to the token ids that no form produces is an
    error at its node.
    Other functions are left alone. docs/onnx-import.md lists the forms.
  }];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def MoERaiseExpertLoops : Pass<"moe-raise-expert-loops", "::mlir::ModuleOp"> {
  let summary = "Raise hand-written expert loops (scf.for or unrolled, upstream dialects) to moe.layer";
  let description = [{
    Recognises a MoE experts module written by hand in upstream dialects that
    receives the routing as data (expert ids and weights [T, K]) and runs each
    expert densely over all tokens: an `scf.for` over experts 0..E-1 that
    slices expert e's weights, computes `silu(x·Wgᵀ)·(x·Wuᵀ)·Wdᵀ` with
    linalg ops, scales each token's row by `Σ_k w[t,k]·(ids[t,k] == e)` and
    accumulates; or the same body unrolled over per-expert weight constants,
    which are stacked into [E, ...] constants at compile time. The result is
    one moe.layer with precomputed routing (expert_ids, expert_weights).
    Every piece is checked (bounds, slices at the induction variable, the
    comparison, each body and indexing map); near misses are left alone.
    docs/pipeline.md states the forms.
  }];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoELowerLayer : Pass<"moe-lower-layer", "::mlir::ModuleOp"> {
  let summary = "Lower moe.layer to the sorted grouped-GEMM pipeline";
  let description = [{
    Rewrites each `moe.layer` into `moe.linear` (router logits, when the layer
    takes router weights) → `moe.route` → `moe.sort` → `moe.permute` →
    `moe.grouped_matmul` (gate and up, the activation as epilogue) →
    `moe.grouped_matmul` (down) → `moe.combine`, with the shared experts as
    `moe.linear`s whose output joins the combine. Separate gate and up weights
    are concatenated, at compile time when they are constants.
  }];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoEPartitionExperts : Pass<"moe-partition-experts", "::mlir::ModuleOp"> {
  let summary = "Keep one expert-parallel rank's experts; the others become the sentinel";
  let description = [{
    On the lowered form: each `moe.sort` over E experts keeps the E / ep-size
    experts of rank ep-rank (`first_expert`, `num_experts`), so every other id
    sorts to the sentinel tail and is never computed; the grouped matmuls keep
    that rank's slice of the stacked weights (sliced at compile time when
    constant); each `moe.combine` is followed by a `moe.all_reduce` of the
    partial outputs, and only rank 0 adds the shared experts so that the sum
    counts them once.

    ep-rank = -1 (the default) partitions for every rank at once: the sorts and
    the combines carry `ep_size` and read the rank at run time, and the stacked
    weights pass through `moe.ep_shard` (one artifact, each rank loading its
    slice). A given ep-rank slices constant weights at compile time. With
    ep-size = 1, ep-rank = 0 leaves the program as it is, and ep-rank = -1
    makes the program for a group of one (its rank and all-reduce at run time).
  }];
  let options = [
    Option<"epSize", "ep-size", "int64_t", "1", "number of expert-parallel ranks">,
    Option<"epRank", "ep-rank", "int64_t", "-1",
           "this rank, in [0, ep-size); -1: one program for every rank">
  ];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoEQuantizeExpertsFP8 : Pass<"moe-quantize-experts-fp8", "::mlir::ModuleOp"> {
  let summary = "Cast the experts' grouped matmuls to FP8 e4m3 with 128x128 block scales";
  let description = [{
    On the grouped form: each `moe.grouped_matmul` whose weights are a constant
    of f32, bf16 or f16 gets e4m3 weights with one f32 scale per 128x128 block
    (amax / 448, a dequantisation multiplier; an all-zero block gets 1), computed
    at compile time, and an `moe.quantize` of its rows (per row, per 128
    columns, at run time). Accumulation stays f32, the result type unchanged.
    Partial blocks at the edges get their own scales. Weights that are not
    constants, or already FP8, are left alone.
  }];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect"];
}

def MoEQuantizeExpertsMXFP4 : Pass<"moe-quantize-experts-mxfp4", "::mlir::ModuleOp"> {
  let summary = "Cast the experts' grouped matmuls to MXFP4: e2m1 weights, an e8m0 scale per 32";
  let description = [{
    On the grouped form: each `moe.grouped_matmul` without scales whose weights
    are a constant of f32, bf16 or f16 gets f4E2M1FN weights with f8E8M0FNU
    scales [E, N, ceil(K/32)], computed at compile time as triton_kernels'
    `downcast_to_mxfp` does by default (per 32 along K: f32(amax / 6) rounded up
    to a power of two; each code to nearest even). The rows stay unquantised.
    FP8 or MXFP4 weights, weights that are not constants and every `moe.linear`
    are left alone. A NaN or infinite weight, or weights filled at load
    (`moec.random_normal`), are errors. docs/dialect.md, "MXFP4 layout".
  }];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect"];
}

def MoECastExpertsBF16 : Pass<"moe-cast-experts-bf16", "::mlir::ModuleOp"> {
  let summary = "State in types what the CUDA target stores as bf16 (expert weights, rows)";
  let description = [{
    On the grouped form (the policy of `moec compile --target=cuda
    --expert-weights=bf16 [--expert-outputs=bf16]`, written into the IR): the
    f32 constant weights of every `moe.grouped_matmul` without FP8 scales, and
    of every `moe.linear` that is not the router's, whose K is a multiple of 8
    and whose weight is a constant, become bf16 constants (rounded to nearest
    even; splats stay splats, dense_resource blobs stay blobs). Values whose
    every reader is such a bf16-weight matmul's rows (permute's rows, the
    gate/up result, the shared expert's intermediate) get bf16 element types:
    those kernels round their rows to bf16 anyway, so no bit of any result
    changes. With `outputs=bf16`, a down projection whose result only
    moe.combine reads (as rows) is rounded to bf16 too (a precision choice).
    A non-FP8 grouped matmul whose weights cannot be stored as bf16 (not an f32
    constant of static shape, or K % 8 != 0) is an error, as in codegen.
  }];
  let options = [
    Option<"outputs", "outputs", "std::string", "\"f32\"",
           "the experts' down-projection results read only by moe.combine: f32 or bf16">
  ];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect"];
}

def MoECastModelBF16 : Pass<"moe-cast-model-bf16", "::mlir::ModuleOp"> {
  let summary = "A whole model's bf16 storage on the CUDA target: weights, embedding, KV cache";
  let description = [{
    The default of `moec compile --target=cuda` for a whole model (a function
    with `moe.kv_cache`, planned by moe-plan-kv-cache; `--precision=f32` leaves
    it out): in each such function, the rules of moe-cast-experts-bf16 (the
    experts' and every non-router `moe.linear`'s constant weights, the LM head
    among them, become bf16 constants; rows that only bf16-weight kernels read
    become bf16 values), and `moe.embedding`'s f32 constant table becomes a
    bf16 constant whose rows the op widens to f32. The router stays f32 (its
    logits choose the experts), and so do the norms, the rope frequencies and
    the activations between kernels (the residual stream). `moe.kv_cache` gets
    `element_type` (`cache`: bf16 or f32), the type the KV cache stores its
    rows in. Functions without a KV cache (blocks) are left alone; a function
    with `moe.attention` but no `moe.kv_cache` is an error (plan it first), as
    is a grouped matmul whose weights cannot be bf16.
  }];
  let options = [
    Option<"outputs", "outputs", "std::string", "\"f32\"",
           "the experts' down-projection results read only by moe.combine: f32 or bf16">,
    Option<"cache", "cache", "std::string", "\"bf16\"",
           "the KV cache's element type: bf16 or f32">
  ];
  let dependentDialects = ["::moec::moe::MoEDialect", "::mlir::arith::ArithDialect"];
}

def MoEFuseSiblingLinears : Pass<"moe-fuse-sibling-linears", "::mlir::ModuleOp"> {
  let summary = "Group projections of the same rows (attention's q, k, v) into moe.multi_linear";
  let description = [{
    In whole models (functions with `moe.kv_cache`; a block's shared expert
    and its gate go to a side stream instead, moe-plan-streams):
    `moe.linear` ops of one input value, in one block, without an epilogue and
    with bf16 weights (the CUDA kernel that runs siblings in one launch), alike
    in result element type and in having a bias, become `moe.multi_linear`
    ops of up to four, in program order, at the first of them where every
    operand of the group is already defined there. Run by `moec compile
    --target=cuda` for whole models after moe-cast-model-bf16; anything else
    is left alone.
  }];
  let dependentDialects = ["::moec::moe::MoEDialect"];
}

def MoEFuseResidualNorm : Pass<"moe-fuse-residual-norm", "::mlir::ModuleOp"> {
  let summary = "Fold a residual sum and the RMSNorm it feeds into moe.add_rms_norm";
  let description = [{
    In whole models (functions with `moe.kv_cache`): an `arith.addf` of two
    f32 [M, K] tensors read by a `moe.rms_norm` of the same block becomes a
    `moe.add_rms_norm` (the sum and its norm) at the sum, with the first such
    norm in program order, when the norm's weight is defined before the sum;
    the sum's other readers read the new op's `sum`. Run by `moec compile
    --target=cuda` for whole models; anything else is left alone.
  }];
  let dependentDialects = ["::moec::moe::MoEDialect"];
}

def MoEPlanStreams : Pass<"moe-plan-streams", "::mlir::ModuleOp"> {
  let summary = "Mark the shared expert's side branch for the CUDA side stream (moe.stream)";
  let description = [{
    For each `moe.combine` addend and addend gate: the backward slice through
    `moe.linear` ops and views down to the function's inputs (or views of
    them) and constants. When nothing outside the slice but the combine reads
    its values, none of them is a function result, and it holds a
    `moe.linear`, its ops get `moe.stream = 1 : i64` (they run on the side
    stream, beside the routed chain, joined at the combine) and the views of
    inputs it reads get `moe.stream_input_view` (emitted first, aliases only).
    Semantics are unchanged.
  }];
  let dependentDialects = ["::moec::moe::MoEDialect"];
}

def MoEPlanKVCache : Pass<"moe-plan-kv-cache", "::mlir::ModuleOp"> {
  let summary = "Size the KV cache of a whole model (moe.kv_cache on its function)";
  let description = [{
    A function that holds `moe.attention` ops gets
    `moe.kv_cache = {max_batch = B : i64, max_seq = S : i64}`: the runtime
    keeps one cache slot per attention op (its `layer`), each of `max_batch`
    sequences of `max_seq` positions, and a run may name sequences below B
    and positions below S. Errors: two attention ops of one slot, slots that
    are not 0..L-1, a non-positive size, or B·S past 2^40 positions. Functions
    without attention are left alone; an existing plan is replaced.
  }];
  let options = [
    Option<"maxBatch", "max-batch", "int64_t", "4", "sequences the KV cache holds">,
    Option<"maxSeq", "max-seq", "int64_t", "2048", "positions per sequence">
  ];
  let dependentDialects = ["::moec::moe::MoEDialect"];
}

def MoELegalizeForCodegen : Pass<"moe-legalize-for-codegen", "::mlir::ModuleOp"> {
  let summary = "Leave only func, arith, tensor and moe ops in the grouped phase";
  let description = [{
    onnx.Constant becomes arith.constant (dense_resource blobs are kept, not
    copied); the views codegen accepts (onnx.Reshape, onnx.Squeeze,
    onnx.Unsqueeze, onnx.Identity, onnx.Flatten) become tensor.collapse_shape,
    tensor.expand_shape or tensor.reshape (with a constant shape). Views that
    change the innermost dimension, and every other op outside func, arith,
    tensor and moe, are errors naming the op.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::tensor::TensorDialect"];
}

#endif // MOEC_TRANSFORMS_PASSES_TD
