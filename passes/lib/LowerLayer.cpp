//===- LowerLayer.cpp - moe.layer to the sorted grouped-GEMM pipeline ------===//
//
// One moe.layer becomes: router logits (moe.linear, unless given) → route
// (unless the routing itself is given) → sort by expert (sentinel tail) →
// permute → grouped matmul for gate and up with the activation as epilogue →
// grouped matmul for down → combine, with the shared experts as moe.linear ops
// whose output joins the combine's sum. The rules every op keeps are in
// docs/dialect.md; why it is built this way is in docs/pipeline.md.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace moec {
#define GEN_PASS_DEF_MOELOWERLAYER
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

constexpr int64_t kDynamic = ShapedType::kDynamic;

int64_t multiplyDims(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) ? kDynamic : a * b;
}

/// Concatenates `first` and `second` along `dim`: at compile time when both are
/// constants (weights usually are), else with tensor.concat.
Value concatenate(PatternRewriter &rewriter, Location loc, Value first, Value second,
                  int64_t dim, StringRef name) {
  auto firstType = cast<RankedTensorType>(first.getType());
  auto secondType = cast<RankedTensorType>(second.getType());
  SmallVector<int64_t> shape(firstType.getShape());
  int64_t sizeA = firstType.getDimSize(dim), sizeB = secondType.getDimSize(dim);
  shape[dim] =
      ShapedType::isDynamic(sizeA) || ShapedType::isDynamic(sizeB) ? kDynamic : sizeA + sizeB;
  auto type = RankedTensorType::get(shape, firstType.getElementType());
  std::optional<ArrayRef<char>> a = getConstantBytes(first), b = getConstantBytes(second);
  if (a && b && type.hasStaticShape()) {
    // Row-major: the outer dims [0, dim) are blocks; each block is the first
    // operand's slab followed by the second's.
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d)
      outer *= shape[d];
    size_t slabA = a->size() / outer, slabB = b->size() / outer;
    std::vector<char> bytes;
    bytes.reserve(a->size() + b->size());
    for (int64_t i = 0; i < outer; ++i) {
      bytes.insert(bytes.end(), a->begin() + i * slabA, a->begin() + (i + 1) * slabA);
      bytes.insert(bytes.end(), b->begin() + i * slabB, b->begin() + (i + 1) * slabB);
    }
    return makeConstant(rewriter, loc, type, bytes, name);
  }
  return tensor::ConcatOp::create(rewriter, loc, type, dim, ValueRange{first, second})
      .getResult();
}

struct LowerLayerPattern : OpRewritePattern<LayerOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value hidden = op.getHidden();
    auto hiddenType = cast<RankedTensorType>(hidden.getType());
    Type elementType = hiddenType.getElementType();
    Type f32 = rewriter.getF32Type();
    Type i32 = rewriter.getI32Type();
    int64_t tokens = hiddenType.getDimSize(0), hiddenSize = hiddenType.getDimSize(1);
    int64_t experts = op.getNumExperts(), intermediate = op.getIntermediateSize();
    int64_t topK = static_cast<int64_t>(op.getTopK());
    int64_t slots = multiplyDims(tokens, topK);
    if (ShapedType::isDynamic(experts))
      return rewriter.notifyMatchFailure(op, "the number of experts must be static");

    // Router, unless the routing is given: then its ids go straight to the sort
    // (which takes i32 and i64 and makes any id outside [0, E) the sentinel)
    // and its weights, in f32 as the combine sums them, to the combine.
    Value ids = op.getExpertIds(), routingWeights = op.getExpertWeights();
    if (routingWeights) {
      auto weightsType = cast<RankedTensorType>(routingWeights.getType());
      auto f32Type = RankedTensorType::get(weightsType.getShape(), f32);
      unsigned width = weightsType.getElementType().getIntOrFloatBitWidth();
      if (width < 32)
        routingWeights = arith::ExtFOp::create(rewriter, loc, f32Type, routingWeights);
      else if (width > 32)
        routingWeights = arith::TruncFOp::create(rewriter, loc, f32Type, routingWeights);
    } else {
      Value logits = op.getRouterLogits();
      if (!logits)
        logits = LinearOp::create(rewriter, loc, RankedTensorType::get({tokens, experts}, f32),
                                  hidden, op.getRouterWeight(), op.getRouterBias(),
                                  /*epilogue=*/nullptr, /*epilogue_layout=*/nullptr)
                     .getResult();
      auto route = RouteOp::create(
          rewriter, loc, RankedTensorType::get({tokens, topK}, i32),
          RankedTensorType::get({tokens, topK}, f32), logits, op.getCorrectionBias(),
          op.getRoutingAttr(), op.getTopKAttr(), op.getNormalizeAttr(), op.getNumGroupsAttr(),
          op.getTopkGroupsAttr(), op.getRoutedScalingFactorAttr());
      ids = route.getExpertIds();
      routingWeights = route.getWeights();
    }

    // Sort by expert; invalid ids become the sentinel tail.
    auto sort = SortOp::create(rewriter, loc, RankedTensorType::get({slots}, i32),
                               RankedTensorType::get({experts}, i32),
                               RankedTensorType::get({}, i32), ids, experts,
                               /*first_expert=*/0, /*ep_size=*/nullptr);
    Value rows = PermuteOp::create(rewriter, loc,
                                   RankedTensorType::get({slots, hiddenSize}, elementType),
                                   hidden, sort.getPermutation(), sort.getNumValid(), topK)
                     .getResult();

    // Gate and up in one grouped matmul; separate weights are fused first.
    GateUpLayout layout = op.getGateUpLayout();
    Value gateUp = op.getGateUpWeight(), gateUpBias = op.getGateUpBias();
    if (layout == GateUpLayout::Separate) {
      gateUp = concatenate(rewriter, loc, gateUp, op.getUpWeight(), 1, "gate_up_weight");
      if (gateUpBias || op.getUpBias()) {
        if (!gateUpBias || !op.getUpBias())
          return rewriter.notifyMatchFailure(op, "only one of the gate and up biases is given");
        gateUpBias = concatenate(rewriter, loc, gateUpBias, op.getUpBias(), 1, "gate_up_bias");
      }
      layout = GateUpLayout::Concatenated;
    }
    auto layoutAttr = GateUpLayoutAttr::get(getContext(), layout);
    Value activated =
        GroupedMatmulOp::create(rewriter, loc,
                                RankedTensorType::get({slots, intermediate}, elementType), rows,
                                gateUp, sort.getOffsets(), gateUpBias, /*lhs_scales=*/Value(),
                                /*weight_scales=*/op.getGateUpScales(), op.getActivationAttr(),
                                layoutAttr)
            .getResult();
    Value down = GroupedMatmulOp::create(
                     rewriter, loc, RankedTensorType::get({slots, hiddenSize}, elementType),
                     activated, op.getDownWeight(), sort.getOffsets(), op.getDownBias(), Value(),
                     /*weight_scales=*/op.getDownScales(), /*epilogue=*/nullptr,
                     /*epilogue_layout=*/nullptr)
                     .getResult();

    // Shared experts: dense projections whose output the combine adds.
    Value shared, sharedGate;
    if (Value sharedGateUp = op.getSharedGateUpWeight()) {
      int64_t sharedSize = cast<RankedTensorType>(op.getSharedDownWeight().getType()).getDimSize(1);
      auto sharedLayout = GateUpLayoutAttr::get(
          getContext(), op.isGated() ? GateUpLayout::Concatenated : GateUpLayout::None);
      Value inner = LinearOp::create(rewriter, loc,
                                     RankedTensorType::get({tokens, sharedSize}, elementType),
                                     hidden, sharedGateUp, Value(), op.getActivationAttr(),
                                     sharedLayout)
                        .getResult();
      shared = LinearOp::create(rewriter, loc, hiddenType, inner, op.getSharedDownWeight(),
                                Value(), nullptr, nullptr)
                   .getResult();
      if (Value gateWeight = op.getSharedGateWeight())
        sharedGate = LinearOp::create(rewriter, loc, RankedTensorType::get({tokens, 1}, f32),
                                      hidden, gateWeight, Value(), nullptr, nullptr)
                         .getResult();
    }

    rewriter.replaceOpWithNewOp<CombineOp>(op, op.getType(), down, sort.getPermutation(),
                                           routingWeights, sort.getNumValid(), shared,
                                           sharedGate, /*ep_size=*/nullptr);
    return success();
  }
};

struct MoELowerLayer : moec::impl::MoELowerLayerBase<MoELowerLayer> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerLayerPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // A layer left behind (dynamic expert count, half a bias pair) is an error:
    // nothing after this phase runs moe.layer.
    WalkResult result = getOperation()->walk([](LayerOp op) {
      op.emitError("could not lower this moe.layer: the number of experts must be static and "
                   "separate gate and up biases must both be given");
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
