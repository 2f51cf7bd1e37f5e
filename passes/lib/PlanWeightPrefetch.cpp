//===- PlanWeightPrefetch.cpp - weights read into L2 while memory idles ---===//
//
// At decode a projection streams its weight once (Qwen3-30B-A3B's q, k and v:
// 21 MB; o: 17 MB), and a kernel that short cannot reach copy bandwidth: ncu
// puts the few-rows kernel at 28-34 % of copy on them (and cuBLASLt at
// 33-44 %), the rest being the ramp up and the tail of one launch. Between
// two such kernels run norms, rotary, attention, the router and its sort:
// launches of a few microseconds each that leave the memory idle. Started
// there, the next projection's weight is in the L2 cache (50 MB on the H200)
// when its kernel runs.
//
// Rule, in whole models (functions with moe.kv_cache and a moe.embedding of
// the function's token ids): for each moe.linear or moe.multi_linear on the
// main stream whose weights are constants, a moe.prefetch of them goes right
// after the closest earlier op that streams weights on the main stream
// (moe.linear, moe.multi_linear, moe.grouped_matmul), or before the first op
// of the function when there is none, provided some op other than a view
// runs in between. It reads at most `l2-bytes` bytes (the weights in order,
// the last one cut), only when the step has at most `max-rows` tokens: the
// embedding's ids give the count. Ops on the shared expert's side stream
// (moe-plan-streams) neither get nor end a prefetch stretch.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace moec {
#define GEN_PASS_DEF_MOEPLANWEIGHTPREFETCH
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

bool onSideStream(Operation *op) { return op->hasAttr("moe.stream"); }

bool streamsWeights(Operation *op) {
  return isa<LinearOp, MultiLinearOp, GroupedMatmulOp>(op) && !onSideStream(op);
}

/// Ops that launch nothing: constants and views.
bool launchesNothing(Operation *op) {
  return isa<arith::ConstantOp, tensor::ReshapeOp, tensor::CollapseShapeOp,
             tensor::ExpandShapeOp, tensor::DimOp>(op);
}

/// The weights of a projection, when every one is a constant.
SmallVector<Value> constantWeights(Operation *op) {
  SmallVector<Value> weights;
  if (auto linear = dyn_cast<LinearOp>(op))
    weights.push_back(linear.getWeight());
  else if (auto multi = dyn_cast<MultiLinearOp>(op))
    llvm::append_range(weights, multi.getWeights());
  for (Value weight : weights)
    if (!weight.getDefiningOp<arith::ConstantOp>())
      return {};
  return weights;
}

int64_t bytesOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() * type.getElementTypeBitWidth() / 8;
}

struct MoEPlanWeightPrefetch : moec::impl::MoEPlanWeightPrefetchBase<MoEPlanWeightPrefetch> {
  using MoEPlanWeightPrefetchBase::MoEPlanWeightPrefetchBase;

  void runOnOperation() override {
    if (l2Bytes < 16 || maxRows < 1) {
      getOperation().emitError("moe-plan-weight-prefetch: l2-bytes must be at least 16 and "
                               "max-rows positive");
      return signalPassFailure();
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (function->hasAttr(kKVCacheAttr) && !function.getBody().empty())
        plan(function.getBody().front());
  }

  void plan(Block &block) {
    EmbeddingOp embedding;
    for (Operation &op : block)
      if ((embedding = dyn_cast<EmbeddingOp>(op)))
        break;
    if (!embedding || !isa<BlockArgument>(embedding.getIds()))
      return;
    Value rows = embedding.getIds();
    Operation *streaming = nullptr; // the last op that streamed weights
    bool idle = false;              // whether a launch ran since it
    Operation *first = nullptr;     // the function's first launch
    SmallVector<std::pair<Operation *, Operation *>> plans; // (after/before, projection)
    for (Operation &op : block) {
      if (launchesNothing(&op) || isa<func::ReturnOp>(op) || onSideStream(&op))
        continue;
      if (!first)
        first = &op;
      if (streamsWeights(&op)) {
        if (idle && !constantWeights(&op).empty())
          plans.push_back({streaming, &op});
        streaming = &op;
        idle = false;
        continue;
      }
      idle = true;
    }
    for (auto [after, projection] : plans) {
      OpBuilder builder(projection->getContext());
      if (after)
        builder.setInsertionPointAfter(after);
      else
        builder.setInsertionPoint(first);
      SmallVector<Value> weights;
      SmallVector<int64_t> bytes;
      int64_t left = l2Bytes;
      for (Value weight : constantWeights(projection)) {
        int64_t take = std::min(bytesOf(weight), left) / 16 * 16; // whole 16-byte lines
        if (take <= 0)
          break;
        weights.push_back(weight);
        bytes.push_back(take);
        left -= take;
      }
      if (weights.empty())
        continue;
      PrefetchOp::create(builder, projection->getLoc(), weights, rows,
                         builder.getDenseI64ArrayAttr(bytes), builder.getI64IntegerAttr(maxRows));
    }
  }
};

} // namespace
