//===- PlanKVCache.cpp - the size of a whole model's KV cache -------------===//
//
// The cache belongs to the runtime, but how large it is is a decision, so it
// is stated in the IR: the printers read `moe.kv_cache` and the slots'
// columns from the attention ops, and decide nothing themselves.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace moec {
#define GEN_PASS_DEF_MOEPLANKVCACHE
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

/// 2^40 cached positions in all: far more than any host or device holds.
constexpr int64_t kMaxCachedPositions = int64_t{1} << 40;

struct MoEPlanKVCache : moec::impl::MoEPlanKVCacheBase<MoEPlanKVCache> {
  using Base::Base;

  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      SmallVector<AttentionOp> attentions;
      function.walk([&](AttentionOp op) { attentions.push_back(op); });
      if (attentions.empty())
        continue;
      int64_t batch = maxBatch, positions = maxSeq;
      if (batch < 1 || positions < 1 || batch > kMaxCachedPositions / positions) {
        function.emitError() << "the KV cache of " << batch << " sequences of " << positions
                             << " positions is not a size (each at least 1, together at most "
                             << kMaxCachedPositions << " positions)";
        return signalPassFailure();
      }
      llvm::DenseMap<int64_t, AttentionOp> slots;
      for (AttentionOp op : attentions) {
        int64_t slot = op.getLayerAttr().getInt();
        auto [it, inserted] = slots.try_emplace(slot, op);
        if (!inserted) {
          InFlightDiagnostic diag = op.emitError()
                                    << "two moe.attention ops use KV cache slot " << slot;
          diag.attachNote(it->second.getLoc()) << "the other one";
          return signalPassFailure();
        }
      }
      for (int64_t slot = 0; slot < static_cast<int64_t>(slots.size()); ++slot)
        if (!slots.count(slot)) {
          function.emitError() << "the " << slots.size()
                               << " moe.attention ops must use KV cache slots 0.."
                               << slots.size() - 1 << "; slot " << slot << " is missing";
          return signalPassFailure();
        }
      Builder builder(function.getContext());
      function->setAttr(kKVCacheAttr,
                        builder.getDictionaryAttr(
                            {builder.getNamedAttr("max_batch", builder.getI64IntegerAttr(batch)),
                             builder.getNamedAttr("max_seq", builder.getI64IntegerAttr(positions))}));
    }
  }
};

} // namespace
