//===- EmitModelOps.cpp - the shared emitter's whole-model ops ------------===//
//
// The ops around the MoE blocks of a whole model (moe.embedding,
// moe.rms_norm, moe.rotary, moe.attention, and arith.addf for the residual
// sums): their checks, their results, and the kernel calls. Activations are
// token-major [N, C] with N the step's token count (the artifact's T). The
// KV cache's slots are collected here; its size is moe-plan-kv-cache's, read
// from the function.
//
//===----------------------------------------------------------------------===//

#include "EmitterBase.h"

#include "moec/Dialect/MoE/MoEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace moec::codegen {

LogicalResult Emitter::checkModelTarget(Operation *op) {
  if (!hasModelKernels())
    return unsupported(op, "whole-model ops have no kernels on " + targetPhrase() +
                               " yet; compile for --target=cpu");
  return success();
}

LogicalResult Emitter::emitEmbedding(moe::EmbeddingOp op) {
  if (failed(checkModelTarget(op)))
    return failure();
  FailureOr<ValueInfo *> ids = operand(op, op.getIds(), "ids", /*floatOnly=*/false);
  // A bf16 table (moe-cast-model-bf16) gives f32 rows, widened as read.
  bool bf16 = cast<RankedTensorType>(op.getTable().getType()).getElementType().isBF16();
  FailureOr<ValueInfo *> table =
      failed(ids) ? ids : operand(op, op.getTable(), "table", true, false, bf16);
  if (failed(table))
    return failure();
  if (bf16 && !(*table)->weightOffset)
    return unsupported(op, "a bf16 table must be a constant");
  if (!cast<RankedTensorType>(op.getIds().getType()).getElementType().isInteger(64))
    return unsupported(op, "ids must be i64");
  Dim rows = (*ids)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), rows);
  if (failed(out))
    return failure();
  comment(op);
  checkedKernel(op, bf16 ? "embeddingBF16" : "embedding",
                {(*ids)->var, dimExpr(rows), (*table)->var, dimExpr((*table)->dims[0]),
                 dimExpr((*table)->dims[1]), (*out)->var});
  return success();
}

LogicalResult Emitter::emitRMSNorm(moe::RMSNormOp op) {
  if (failed(checkModelTarget(op)))
    return failure();
  FailureOr<ValueInfo *> in = operand(op, op.getInput(), "input");
  FailureOr<ValueInfo *> weight = failed(in) ? in : operand(op, op.getWeight(), "weight");
  if (failed(weight))
    return failure();
  Dim rows = (*in)->dims[0];
  if ((*in)->dims[1].perToken)
    return unsupported(op, "the normalised dimension scales with the token count");
  FailureOr<ValueInfo *> out = define(op, op.getResult(), rows);
  if (failed(out))
    return failure();
  comment(op);
  kernel("rmsNorm", {(*in)->var, dimExpr(rows), dimExpr((*in)->dims[1]), (*weight)->var,
                     dimExpr((*weight)->dims[0]), floatLiteral(op.getEpsilon().convertToDouble()),
                     floatLiteral(op.getWeightOffset().convertToDouble()), (*out)->var});
  return success();
}

LogicalResult Emitter::emitAddRMSNorm(moe::AddRMSNormOp op) {
  if (failed(checkModelTarget(op)))
    return failure();
  FailureOr<ValueInfo *> in = operand(op, op.getInput(), "input");
  FailureOr<ValueInfo *> addend = failed(in) ? in : operand(op, op.getAddend(), "addend");
  FailureOr<ValueInfo *> weight = failed(addend) ? addend : operand(op, op.getWeight(), "weight");
  if (failed(weight))
    return failure();
  Dim rows = (*in)->dims[0];
  if ((*in)->dims[1].perToken)
    return unsupported(op, "the normalised dimension scales with the token count");
  FailureOr<ValueInfo *> sum = define(op, op.getSum(), rows);
  FailureOr<ValueInfo *> out = failed(sum) ? sum : define(op, op.getResult(), rows);
  if (failed(out))
    return failure();
  comment(op);
  kernel("addRmsNorm",
         {(*in)->var, (*addend)->var, dimExpr(rows), dimExpr((*in)->dims[1]), (*weight)->var,
          dimExpr((*weight)->dims[0]), floatLiteral(op.getEpsilon().convertToDouble()),
          floatLiteral(op.getWeightOffset().convertToDouble()), (*sum)->var, (*out)->var});
  return success();
}

LogicalResult Emitter::emitRotary(moe::RotaryOp op) {
  if (failed(checkModelTarget(op)))
    return failure();
  FailureOr<ValueInfo *> in = operand(op, op.getInput(), "input");
  FailureOr<ValueInfo *> positions =
      failed(in) ? in : operand(op, op.getPositions(), "positions", /*floatOnly=*/false);
  FailureOr<ValueInfo *> invFreq =
      failed(positions) ? positions : operand(op, op.getInvFreq(), "inv_freq");
  if (failed(invFreq))
    return failure();
  if (!cast<RankedTensorType>(op.getPositions().getType()).getElementType().isInteger(64))
    return unsupported(op, "positions must be i64");
  Dim rows = (*in)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), rows);
  if (failed(out))
    return failure();
  comment(op);
  kernel("rotary", {(*in)->var, dimExpr(rows), dimExpr((*in)->dims[1]), (*positions)->var,
                    (*invFreq)->var, dimExpr((*invFreq)->dims[0]),
                    std::to_string(op.getHeadDimAttr().getInt()),
                    std::to_string(op.getOffsetAttr().getInt()),
                    op.getInterleaved() ? "true" : "false",
                    floatLiteral(op.getScale().convertToDouble()), (*out)->var});
  return success();
}

LogicalResult Emitter::emitAttention(moe::AttentionOp op) {
  if (failed(checkModelTarget(op)))
    return failure();
  if (!cacheMaxBatch)
    return unsupported(op, "its function has no KV cache plan (moe.kv_cache: run "
                           "moe-plan-kv-cache, which moec compile --target does)");
  FailureOr<ValueInfo *> query = operand(op, op.getQuery(), "query");
  FailureOr<ValueInfo *> key = failed(query) ? query : operand(op, op.getKey(), "key");
  FailureOr<ValueInfo *> value = failed(key) ? key : operand(op, op.getValue(), "value");
  FailureOr<ValueInfo *> positions =
      failed(value) ? value : operand(op, op.getPositions(), "positions", /*floatOnly=*/false);
  FailureOr<ValueInfo *> sequences =
      failed(positions) ? positions
                        : operand(op, op.getSequences(), "sequences", /*floatOnly=*/false);
  if (failed(sequences))
    return failure();
  for (Value index : {op.getPositions(), op.getSequences()})
    if (!cast<RankedTensorType>(index.getType()).getElementType().isInteger(64))
      return unsupported(op, "positions and sequences must be i64");
  bool failedFlag = false;
  std::string shared = optionalOperand(op, op.getKeyShared(), "key_shared", failedFlag);
  std::string sinks = optionalOperand(op, op.getSinks(), "sinks", failedFlag);
  if (failedFlag)
    return failure();
  int64_t heads = op.getNumHeadsAttr().getInt(), kvHeads = op.getNumKvHeadsAttr().getInt();
  int64_t keyColumns = (*key)->dims[1].size, valueColumns = (*value)->dims[1].size;
  int64_t sharedDim = op.getKeyShared() ? values[op.getKeyShared()].dims[1].size : 0;
  Dim rows = (*query)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), rows);
  if (failed(out))
    return failure();
  // Slots are 0..L-1 (moe-plan-kv-cache checked them); each holds its keys
  // (with the shared slice) and values.
  auto slot = static_cast<size_t>(op.getLayerAttr().getInt());
  if (cacheSlots.size() <= slot)
    cacheSlots.resize(slot + 1, {0, 0});
  cacheSlots[slot] = {keyColumns + sharedDim, valueColumns};
  comment(op);
  checkedKernel(op, "attention",
                {"cache", std::to_string(slot), (*query)->var, (*key)->var, (*value)->var, shared,
                 sinks, (*positions)->var, (*sequences)->var, dimExpr(rows),
                 std::to_string(heads), std::to_string(kvHeads),
                 std::to_string(keyColumns / kvHeads), std::to_string(sharedDim),
                 std::to_string(valueColumns / kvHeads),
                 floatLiteral(op.getScale().convertToDouble()),
                 std::to_string(op.getWindowAttr().getInt()), (*out)->var});
  return success();
}

LogicalResult Emitter::emitAdd(arith::AddFOp op) {
  if (!isa<RankedTensorType>(op.getType()))
    return unsupported(op, "a scalar sum outside a kernel");
  if (failed(checkModelTarget(op)))
    return failure();
  FailureOr<ValueInfo *> lhs = operand(op, op.getLhs(), "lhs");
  FailureOr<ValueInfo *> rhs = failed(lhs) ? lhs : operand(op, op.getRhs(), "rhs");
  if (failed(rhs))
    return failure();
  std::optional<Dim> count = countOf((*lhs)->dims);
  if (!count)
    return unsupported(op, "a tensor with two token dimensions");
  FailureOr<ValueInfo *> out = define(op, op.getResult(), (*lhs)->dims[0]);
  if (failed(out))
    return failure();
  comment(op);
  kernel("add", {(*lhs)->var, (*rhs)->var, dimExpr(*count), (*out)->var});
  return success();
}

LogicalResult Emitter::readKVCachePlan() {
  auto plan = function->getAttrOfType<DictionaryAttr>(moe::kKVCacheAttr);
  if (!plan)
    return success();
  auto batch = plan.getAs<IntegerAttr>("max_batch");
  auto seq = plan.getAs<IntegerAttr>("max_seq");
  if (batch && seq && batch.getInt() > 0 && seq.getInt() > 0) {
    cacheMaxBatch = batch.getInt();
    cacheMaxSeq = seq.getInt();
  }
  // The rows' type: f32 unless moe-cast-model-bf16 chose bf16, which only a
  // target with bf16 kernels stores.
  if (Attribute element = plan.get(moe::kKVCacheElementType)) {
    auto type = dyn_cast<TypeAttr>(element);
    cacheBF16 = type && type.getValue().isBF16();
    if (!type || !(type.getValue().isF32() || (cacheBF16 && hasBF16Kernels())))
      return function.emitError()
             << "cannot generate code for the KV cache of element type " << element << ": "
             << targetPhrase() << " stores "
             << (hasBF16Kernels() ? "f32 or bf16" : "f32") << " rows";
  }
  return success();
}

} // namespace moec::codegen
