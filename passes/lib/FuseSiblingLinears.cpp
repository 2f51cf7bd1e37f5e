//===- FuseSiblingLinears.cpp - projections of one input, one op ----------===//
//
// Attention's q, k and v (MLA's q_a and kv_a) project the same normed rows.
// At decode each is a few microseconds of weight streaming behind a launch of
// its own, and the small ones (k, v: a few hundred weight rows) cannot fill
// the GPU alone. As one moe.multi_linear the CUDA target streams all their
// weights in one launch.
//
// Rule, in whole models (functions with moe.kv_cache; a block's shared
// expert and its gate run on a side stream instead, moe-plan-streams):
// moe.linear ops of the same input value, in one block, without an
// epilogue, with bf16 weights (the bf16 kernel is the one that runs siblings
// together), and alike in result element type and in having a bias, become
// moe.multi_linear ops of up to four, in program order, placed at the first
// of them when every operand of the group is defined there already. Anything
// else is left as it is.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

#include "llvm/ADT/MapVector.h"

namespace moec {
#define GEN_PASS_DEF_MOEFUSESIBLINGLINEARS
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

constexpr size_t kMaxSiblings = 4; // moe.multi_linear's limit

Type elementOf(Value value) { return cast<RankedTensorType>(value.getType()).getElementType(); }

bool fusible(LinearOp op) {
  return !op.getEpilogue() && !op.getEpilogueLayout() && elementOf(op.getWeight()).isBF16();
}

struct MoEFuseSiblingLinears
    : moec::impl::MoEFuseSiblingLinearsBase<MoEFuseSiblingLinears> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (!function->hasAttr(kKVCacheAttr))
        continue;
      DominanceInfo dominance(function);
      // Per input, block, result element type and bias presence, the
      // candidates in program order (a walk visits a block's ops in order).
      llvm::MapVector<std::tuple<Value, Block *, Type, unsigned>, SmallVector<LinearOp>> groups;
      function.walk([&](LinearOp op) {
        if (fusible(op))
          groups[{op.getInput(), op->getBlock(), elementOf(op.getResult()),
                  op.getBias() ? 1u : 0u}]
              .push_back(op);
      });
      for (auto &[key, ops] : groups) {
        MutableArrayRef<LinearOp> all(ops);
        for (size_t first = 0; first + 1 < all.size(); first += kMaxSiblings)
          fuse(all.slice(first, std::min(kMaxSiblings, all.size() - first)), dominance);
      }
    }
  }

  /// Replaces `ops` (2-4, program order) by one moe.multi_linear at the first.
  static void fuse(MutableArrayRef<LinearOp> ops, DominanceInfo &dominance) {
    if (ops.size() < 2)
      return;
    Operation *at = ops.front();
    for (LinearOp op : ops.drop_front())
      for (Value operand : op->getOperands())
        if (!dominance.properlyDominates(operand, at))
          return; // e.g. a weight computed between the siblings
    SmallVector<Value> weights, biases;
    SmallVector<Type> types;
    for (LinearOp op : ops) {
      weights.push_back(op.getWeight());
      if (op.getBias())
        biases.push_back(op.getBias());
      types.push_back(op.getResult().getType());
    }
    OpBuilder builder(at);
    SmallVector<Location> locations;
    for (LinearOp op : ops)
      locations.push_back(op.getLoc());
    auto fused = MultiLinearOp::create(builder, builder.getFusedLoc(locations), types,
                                       ops.front().getInput(), weights, biases);
    for (auto [op, result] : llvm::zip(ops, fused.getResults())) {
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
  }
};

} // namespace
