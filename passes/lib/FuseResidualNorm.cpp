//===- FuseResidualNorm.cpp - a residual sum and the norm it feeds --------===//
//
// Every decoder layer adds a block's output to the residual stream and
// normalises the sum for the next block, twice a layer. At decode each is a
// launch of a few microseconds that reads a row the other just wrote. As one
// moe.add_rms_norm the CUDA target reads the two rows once and writes the sum
// and its norm in one launch.
//
// Rule, in whole models (functions with moe.kv_cache): an arith.addf of two
// f32 [M, K] tensors, in the block of a moe.rms_norm that reads it, becomes a
// moe.add_rms_norm with the first such norm (in program order), placed at the
// norm when the norm's weight is defined before the sum; the sum's other
// readers read the new op's sum. Anything else is left as it is.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace moec {
#define GEN_PASS_DEF_MOEFUSERESIDUALNORM
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

bool isF32Matrix(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == 2 && tensor.getElementType().isF32();
}

struct MoEFuseResidualNorm : moec::impl::MoEFuseResidualNormBase<MoEFuseResidualNorm> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (!function->hasAttr(kKVCacheAttr))
        continue;
      DominanceInfo dominance(function);
      SmallVector<arith::AddFOp> sums;
      function.walk([&](arith::AddFOp add) { sums.push_back(add); });
      for (arith::AddFOp add : sums)
        fuse(add, dominance);
    }
  }

  /// Replaces `add` and the first moe.rms_norm of its block that reads it.
  static void fuse(arith::AddFOp add, DominanceInfo &dominance) {
    if (!isF32Matrix(add.getType()) || !isF32Matrix(add.getLhs().getType()) ||
        !isF32Matrix(add.getRhs().getType()))
      return;
    RMSNormOp norm;
    for (Operation *user : add.getResult().getUsers()) {
      auto candidate = dyn_cast<RMSNormOp>(user);
      if (!candidate || candidate.getInput() != add.getResult() ||
          candidate->getBlock() != add->getBlock() ||
          !isF32Matrix(candidate.getResult().getType()))
        continue;
      if (!norm || candidate->isBeforeInBlock(norm))
        norm = candidate;
    }
    if (!norm || !dominance.properlyDominates(norm.getWeight(), add))
      return;
    // At the sum: every reader of the sum comes after it, and the norm's
    // weight is defined before it.
    OpBuilder builder(add);
    auto fused = AddRMSNormOp::create(
        builder, builder.getFusedLoc({add.getLoc(), norm.getLoc()}), add.getType(),
        norm.getResult().getType(), add.getLhs(), add.getRhs(), norm.getWeight(),
        norm.getEpsilonAttr(), norm.getWeightOffsetAttr());
    norm.getResult().replaceAllUsesWith(fused.getResult());
    norm.erase();
    add.getResult().replaceAllUsesWith(fused.getSum());
    add.erase();
  }
};

} // namespace
