//===- PartitionExperts.cpp - expert parallelism on the lowered form -------===//
//
// Rank r of ep-size keeps experts [r·L, (r+1)·L), L = E / ep-size. The sort does
// the rest: every other id falls in the sentinel tail, which no kernel computes
// and the combine never reads; the all-reduce then sums the ranks' partial
// outputs.
//
// With ep-rank = -1 (the default of `moec compile --ep-size=N`) the program
// serves every rank: the sort and the combine carry `ep_size` and read the rank
// at run time, and the stacked weights go through moe.ep_shard, so the artifact
// stores every expert once and each rank's loader maps only its own. With a
// given ep-rank, constant weights are sliced at compile time and the artifact
// carries that rank's experts alone.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace moec {
#define GEN_PASS_DEF_MOEPARTITIONEXPERTS
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

/// Experts [first, first + count) of a tensor stacked by expert along dim 0;
/// with first < 0, the running rank's (moe.ep_shard of `epSize`).
Value sliceExperts(OpBuilder &builder, Location loc, Value stacked, int64_t first,
                   int64_t count, int64_t epSize) {
  auto type = cast<RankedTensorType>(stacked.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = count;
  auto sliceType = RankedTensorType::get(shape, type.getElementType());
  if (first < 0)
    return EPShardOp::create(builder, loc, sliceType, stacked, builder.getI64IntegerAttr(epSize))
        .getResult();
  if (std::optional<ArrayRef<char>> bytes = getConstantBytes(stacked);
      bytes && type.hasStaticShape()) {
    size_t perExpert = bytes->size() / type.getDimSize(0);
    return makeConstant(builder, loc, sliceType,
                        bytes->slice(first * perExpert, count * perExpert), "experts_slice");
  }
  SmallVector<OpFoldResult> offsets(type.getRank(), builder.getIndexAttr(0));
  offsets[0] = builder.getIndexAttr(first);
  SmallVector<OpFoldResult> sizes, strides(type.getRank(), builder.getIndexAttr(1));
  for (int64_t d = 0; d < type.getRank(); ++d)
    sizes.push_back(d == 0 ? builder.getIndexAttr(count)
                           : (ShapedType::isDynamic(shape[d])
                                  ? OpFoldResult(tensor::DimOp::create(builder, loc, stacked, d)
                                                     .getResult())
                                  : builder.getIndexAttr(shape[d])));
  return tensor::ExtractSliceOp::create(builder, loc, sliceType, stacked, offsets, sizes,
                                        strides)
      .getResult();
}

struct MoEPartitionExperts : moec::impl::MoEPartitionExpertsBase<MoEPartitionExperts> {
  using Base::Base;

  void runOnOperation() override {
    if (epSize < 1 || epRank < -1 || epRank >= epSize) {
      getOperation().emitError() << "moe-partition-experts: ep-rank must be in [0, ep-size) "
                                    "or -1 (every rank), got ep-size = "
                                 << int64_t(epSize) << ", ep-rank = " << int64_t(epRank);
      return signalPassFailure();
    }
    // One rank's program of a group of one is the program itself; the
    // program for every rank of a group of one reads its rank and all-reduces
    // as any group's does.
    if (epSize == 1 && epRank >= 0)
      return;
    SmallVector<SortOp> sorts;
    getOperation().walk([&](SortOp sort) { sorts.push_back(sort); });
    for (SortOp sort : sorts)
      if (failed(partition(sort)))
        return signalPassFailure();
  }

  LogicalResult partition(SortOp sort) {
    int64_t experts = static_cast<int64_t>(sort.getNumExperts());
    if (sort.getFirstExpert() != 0 || sort.getEpSize())
      return sort.emitError("moe-partition-experts: this sort is already partitioned");
    if (experts % epSize != 0)
      return sort.emitError() << "moe-partition-experts: " << experts
                              << " experts do not split evenly over ep-size = " << int64_t(epSize);
    bool everyRank = epRank < 0;
    int64_t local = experts / epSize, first = everyRank ? -1 : epRank * local;
    OpBuilder builder(sort);

    // The sort keeps this rank's experts; its offsets shrink to them.
    sort.setNumExperts(local);
    if (everyRank)
      sort.setEpSize(epSize);
    else
      sort.setFirstExpert(first);
    sort.getOffsets().setType(RankedTensorType::get({local}, builder.getI32Type()));

    for (Operation *user : llvm::make_early_inc_range(sort.getOffsets().getUsers())) {
      auto matmul = dyn_cast<GroupedMatmulOp>(user);
      if (!matmul)
        return user->emitError("moe-partition-experts: the offsets of a sort may only feed "
                               "moe.grouped_matmul");
      builder.setInsertionPoint(matmul);
      Location loc = matmul.getLoc();
      matmul.getWeightsMutable().assign(
          sliceExperts(builder, loc, matmul.getWeights(), first, local, epSize));
      if (Value bias = matmul.getBias())
        matmul.getBiasMutable().assign(sliceExperts(builder, loc, bias, first, local, epSize));
      if (Value scales = matmul.getWeightScales())
        matmul.getWeightScalesMutable().assign(
            sliceExperts(builder, loc, scales, first, local, epSize));
    }

    // Each combine's partial sum is all-reduced; only rank 0 adds the shared experts.
    for (Operation *user : llvm::make_early_inc_range(sort.getNumValid().getUsers())) {
      auto combine = dyn_cast<CombineOp>(user);
      if (!combine)
        continue;
      if (everyRank && combine.getAddend())
        combine.setEpSize(epSize);
      else if (epRank != 0) {
        combine.getAddendMutable().clear();
        combine.getAddendGateMutable().clear();
      }
      builder.setInsertionPointAfter(combine);
      auto reduce = AllReduceOp::create(builder, combine.getLoc(), combine.getType(),
                                        combine.getResult(),
                                        builder.getI64IntegerAttr(epSize));
      combine.getResult().replaceAllUsesExcept(reduce.getResult(), reduce);
    }
    return success();
  }
};

} // namespace
