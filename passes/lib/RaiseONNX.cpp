//===- RaiseONNX.cpp - transformers' batched_mm exports to moe.layer -------===//
//
// (Past 800 lines on purpose: one pattern, whose router, slot, expert and
// combine matchers are read together and share their helpers; split, each part
// would only make sense beside the others.)
//
// torch.onnx.export writes a transformers MoE block (batched_mm experts) as:
//
//   router   logits = Gemm(x, Wr[, br]); ids, w from TopK over Softmax(logits)
//            (Mixtral, Qwen), over logits then Softmax (gpt-oss), or over the
//            group-masked biased Sigmoid (DeepSeek-V3)
//   slots    xs = repeat_interleave(x, K); idx = Unsqueeze(Clip(ids, 0, E-1))
//   experts  gu = MatMul(GatherND(Wgu, idx), xs) [+ GatherND(bgu, idx)]
//            h  = act(gate(gu)) * up(gu)          (Split, or Slice with step 2)
//            y  = MatMul(GatherND(Wd, idx), h) [+ GatherND(bd, idx)]
//   combine  out = ReduceSum(Reshape(y * w, [-1, K, H]), axis 1)
//            [+ a shared SiLU-GLU MLP of the block input]
//
// The matcher walks back from the final ReduceSum and checks every piece: the
// constants (axes, K, clip bounds, slice steps), that all gathers use the same
// ids, that the slots repeat the router's input, that the weights are stacked
// constants [E, ...]. Anything else (another reduction, a routing moe.layer
// cannot express, weights that differ per token) is left alone. docs/pipeline.md
// describes the forms recognised.
//
// A stacked weight may also be DequantizeLinear(x, scale) of constants: an FP8
// checkpoint (DeepSeek-V3's e4m3 `weight` with `weight_scale_inv` per 128x128
// block) written as standard ONNX. It stays e4m3 with its block scales when the
// scale is one number on each 128x128 block and there is no zero point, and is
// dequantised at compile time otherwise.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/ONNX/DequantizeLayout.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Transforms/Passes.h"

#include "ONNXMatchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace moec {
#define GEN_PASS_DEF_MOERAISEONNX
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
namespace ox = moec::onnx;
using namespace moec::onnx_match;

namespace {

//===----------------------------------------------------------------------===//
// The matched block
//===----------------------------------------------------------------------===//

/// A stacked expert weight as found, and how it must be turned to [E, out, in].
struct StackedWeight {
  Value value;
  bool inputMajor = false; // stored [E, in, out] (gpt-oss): transpose at compile time
};

struct MatchedBlock {
  Value hidden;       // [T, H], the router's and the slots' input
  Value routerWeight; // [E, H] constant (already out-major)
  bool routerTransposed = false;
  Value routerBias, correctionBias;
  moe::RoutingKind routing = moe::RoutingKind::SoftmaxTopK;
  int64_t topK = 0, numGroups = 1, topkGroups = 1, experts = 0;
  bool normalize = false;
  double scalingFactor = 1.0;
  Value ids; // the TopK indices feeding the gathers
  StackedWeight gateUp, down;
  Value gateUpBias, downBias;
  moe::GateUpLayout layout = moe::GateUpLayout::Concatenated;
  double alpha = 1.0, beta = 0.0, limit = INFINITY;
  // Shared SiLU-GLU expert, weights stored [in, out] (pre-transposed by the exporter).
  Value sharedGate, sharedUp, sharedDown;
  Operation *sharedAdd = nullptr; // the Add that joins it, replaced by the layer's output
  Value sharedAddRouted;          // that Add's routed operand
};

class BlockMatcher {
public:
  explicit BlockMatcher(MatchedBlock &block) : m(block) {}

  /// The [T, K] routing weights the block multiplies its slots by (match()).
  Value getRoutingWeights() const { return routingWeights; }

  /// Matches the whole block ending in `sum` = ReduceSum(Reshape(y·w, [-1,K,H]), 1).
  LogicalResult match(ox::ReduceSumOp sum) {
    if (sum.getKeepdims().value_or(1) != 0 || rankOf(sum.getData()) != 3 ||
        !isAxis(sum.getAxes(), 1, 3))
      return failure();
    auto reshape = def<ox::ReshapeOp>(sum.getData());
    auto weighted = reshape ? def<ox::MulOp>(reshape.getData()) : ox::MulOp();
    if (!weighted)
      return failure();
    std::optional<SmallVector<int64_t>> shape = intList(reshape.getShape());
    if (!shape || shape->size() != 3 || (*shape)[0] != -1)
      return failure();
    m.topK = (*shape)[1];
    // One operand is the expert output [S, H], the other the slot weights [S, 1].
    for (auto [out, weight] : {std::pair(weighted.getA(), weighted.getB()),
                               std::pair(weighted.getB(), weighted.getA())}) {
      if (rankOf(weight) == 2 && succeeded(matchSlotWeights(weight)) &&
          succeeded(matchDown(skipNoOps(out))))
        return matchRouter();
    }
    return failure();
  }

  /// A shared SiLU-GLU expert added to the routed output: Add(Reshape(sum), shared).
  void matchSharedExpert(ox::ReduceSumOp sum) {
    if (!sum->hasOneUse())
      return;
    auto reshape = dyn_cast<ox::ReshapeOp>(*sum->user_begin());
    if (!reshape || !reshape->hasOneUse())
      return;
    auto add = dyn_cast<ox::AddOp>(*reshape->user_begin());
    if (!add)
      return;
    Value shared = add.getA() == reshape.getResult() ? add.getB() : add.getA();
    // shared = MatMul(Mul(silu(MatMul(x, Wg)), MatMul(x, Wu)), Wd), weights [in, out]
    auto downMatmul = def<ox::MatMulOp>(shared);
    auto product = downMatmul ? def<ox::MulOp>(downMatmul.getA()) : ox::MulOp();
    if (!product || !isStackedConstant(downMatmul.getB(), 2))
      return;
    for (auto [gateSide, upSide] : {std::pair(product.getA(), product.getB()),
                                    std::pair(product.getB(), product.getA())}) {
      auto upMatmul = def<ox::MatMulOp>(upSide);
      auto siluMul = def<ox::MulOp>(gateSide);
      if (!upMatmul || !siluMul)
        continue;
      Value gate = siluGate(siluMul);
      auto gateMatmul = def<ox::MatMulOp>(gate);
      if (!gateMatmul || gateMatmul.getA() != upMatmul.getA() ||
          !isStackedConstant(gateMatmul.getB(), 2) || !isStackedConstant(upMatmul.getB(), 2))
        continue;
      // The shared expert must read the block's input: the one the router flattens.
      Value input = gateMatmul.getA();
      auto flatten = def<ox::ReshapeOp>(m.hidden);
      if (!flatten || flatten.getData() != input)
        continue;
      m.sharedGate = gateMatmul.getB();
      m.sharedUp = upMatmul.getB();
      m.sharedDown = downMatmul.getB();
      m.sharedAdd = add;
      m.sharedAddRouted = reshape.getResult();
      return;
    }
  }

private:
  /// A constant whose value is known at compile time, of rank `rank`.
  static bool isStackedConstant(Value value, int64_t rank) {
    return rankOf(value) == rank && getConstantBytes(value).has_value();
  }

  /// The slot weights: Unsqueeze(Reshape(w [T, K], [-1]), [-1]).
  LogicalResult matchSlotWeights(Value value) {
    auto unsqueeze = def<ox::UnsqueezeOp>(value);
    if (!unsqueeze || !isAxis(unsqueeze.getAxes(), 1, 2))
      return failure();
    auto flat = def<ox::ReshapeOp>(unsqueeze.getData());
    std::optional<SmallVector<int64_t>> shape = flat ? intList(flat.getShape()) : std::nullopt;
    if (!shape || *shape != SmallVector<int64_t>{-1} || rankOf(flat.getData()) != 2)
      return failure();
    routingWeights = flat.getData();
    return success();
  }

  /// idx = Unsqueeze(Clip(Reshape(ids, [-1]), 0, E-1), [-1]) for weights [E, ...].
  LogicalResult matchGatherIndices(Value idx, int64_t experts) {
    auto unsqueeze = def<ox::UnsqueezeOp>(idx);
    if (!unsqueeze || !isAxis(unsqueeze.getAxes(), 1, 2))
      return failure();
    auto clip = def<ox::ClipOp>(unsqueeze.getData());
    if (!clip || !isScalar(clip.getMin(), 0) || !isScalar(clip.getMax(), experts - 1))
      return failure();
    auto flat = def<ox::ReshapeOp>(clip.getInput());
    std::optional<SmallVector<int64_t>> shape = flat ? intList(flat.getShape()) : std::nullopt;
    if (!shape || *shape != SmallVector<int64_t>{-1})
      return failure();
    Value ids = flat.getData();
    if (m.ids && m.ids != ids)
      return failure(); // every gather must use the same routing
    m.ids = ids;
    m.experts = experts;
    return success();
  }

  /// GatherND(W, idx) of a stacked [E, ...] weight of rank `rank`.
  FailureOr<Value> matchGather(Value value, int64_t rank) {
    auto gather = def<ox::GatherNDOp>(value);
    if (!gather || gather.getBatchDims().value_or(0) != 0)
      return failure();
    Value stacked = gather.getData();
    auto type = dyn_cast<RankedTensorType>(stacked.getType());
    if (!type || type.getRank() != rank || type.isDynamicDim(0))
      return failure();
    if (failed(matchGatherIndices(gather.getIndices(), type.getDimSize(0))))
      return failure();
    return stacked;
  }

  /// A per-slot projection: Squeeze(MatMul(...)) with a gathered weight, either
  /// [S, out, in] · Unsqueeze(x, -1) or Unsqueeze(x, 1) · [S, in, out], plus an
  /// optional gathered bias. Returns the projected input.
  FailureOr<Value> matchProjection(Value value, StackedWeight &weight, Value &bias) {
    value = skipNoOps(value);
    if (auto add = def<ox::AddOp>(value)) {
      for (auto [main, extra] : {std::pair(add.getA(), add.getB()),
                                 std::pair(add.getB(), add.getA())}) {
        FailureOr<Value> stackedBias = matchGather(extra, 2);
        if (succeeded(stackedBias)) {
          bias = *stackedBias;
          value = skipNoOps(main);
          break;
        }
      }
      if (!bias)
        return failure();
    }
    auto squeeze = def<ox::SqueezeOp>(value);
    auto matmul = squeeze ? def<ox::MatMulOp>(squeeze.getData()) : ox::MatMulOp();
    if (!matmul || rankOf(matmul.getResult()) != 3)
      return failure();
    if (isAxis(squeeze.getAxes(), 2, 3)) { // [S, out, in] · [S, in, 1]
      FailureOr<Value> stacked = matchGather(matmul.getA(), 3);
      auto column = def<ox::UnsqueezeOp>(matmul.getB());
      if (failed(stacked) || !column || !isAxis(column.getAxes(), 2, 3))
        return failure();
      weight = {*stacked, /*inputMajor=*/false};
      return column.getData();
    }
    if (isAxis(squeeze.getAxes(), 1, 3)) { // [S, 1, in] · [S, in, out]
      FailureOr<Value> stacked = matchGather(matmul.getB(), 3);
      auto row = def<ox::UnsqueezeOp>(matmul.getA());
      if (failed(stacked) || !row || !isAxis(row.getAxes(), 1, 3))
        return failure();
      weight = {*stacked, /*inputMajor=*/true};
      return row.getData();
    }
    return failure();
  }

  /// silu(g) = Mul(g, Sigmoid(g)) or, with alpha, Mul(g, Sigmoid(Mul(g, alpha))).
  /// Returns g and sets alpha.
  Value siluGate(ox::MulOp mul, double *alpha = nullptr) {
    for (auto [g, s] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())}) {
      auto sigmoid = def<ox::SigmoidOp>(s);
      if (!sigmoid)
        continue;
      if (sigmoid.getX() == g) {
        if (alpha)
          *alpha = 1.0;
        return g;
      }
      auto scaled = def<ox::MulOp>(sigmoid.getX());
      Value factor = otherMulOperand(scaled, skipNoOps(g));
      if (alpha && factor && scalarConstant(factor)) {
        *alpha = *scalarConstant(factor);
        return g;
      }
    }
    return Value();
  }

  /// The activation of the gate/up projection `gu`, ending in `h`.
  FailureOr<Value> matchActivation(Value h) {
    auto product = def<ox::MulOp>(h);
    if (!product)
      return failure();
    for (auto [gateSide, upSide] : {std::pair(product.getA(), product.getB()),
                                    std::pair(product.getB(), product.getA())}) {
      auto siluMul = def<ox::MulOp>(gateSide);
      if (!siluMul)
        continue;
      double alpha = 1.0;
      Value gate = siluGate(siluMul, &alpha);
      if (!gate)
        continue;
      // Concatenated: Split(gu) into gate and up halves.
      if (auto split = def<ox::SplitOp>(gate)) {
        if (split->getNumResults() != 2 || upSide != split->getResult(1) ||
            gate != split->getResult(0) || !isAttrAxis(split.getAxis(), 0, 1, 2) ||
            !isa<ox::NoValueOp>(split.getSplit().getDefiningOp()))
          continue;
        m.layout = moe::GateUpLayout::Concatenated;
        m.alpha = alpha;
        return split.getInput();
      }
      // Interleaved with clamps (gpt-oss): gate = Clip(Slice(gu, 0, step 2), max = l),
      // up + beta = Add(Clip(Slice(gu, 1, step 2), -l, l), beta).
      auto gateClip = def<ox::ClipOp>(gate);
      auto upAdd = def<ox::AddOp>(upSide);
      if (!gateClip || !upAdd)
        continue;
      auto upClip = def<ox::ClipOp>(upAdd.getA());
      Value betaValue = upAdd.getB();
      if (!upClip) {
        upClip = def<ox::ClipOp>(upAdd.getB());
        betaValue = upAdd.getA();
      }
      std::optional<double> limit = scalarConstant(gateClip.getMax());
      std::optional<double> beta = scalarConstant(betaValue);
      if (!upClip || !limit || !beta || !isa<ox::NoValueOp>(gateClip.getMin().getDefiningOp()) ||
          !isScalar(upClip.getMin(), -*limit) || !isScalar(upClip.getMax(), *limit))
        continue;
      Value gateSource = interleavedHalf(gateClip.getInput(), 0);
      Value upSource = interleavedHalf(upClip.getInput(), 1);
      if (!gateSource || gateSource != upSource)
        continue;
      m.layout = moe::GateUpLayout::Interleaved;
      m.alpha = alpha;
      m.beta = *beta;
      m.limit = *limit;
      return gateSource;
    }
    return failure();
  }

  /// Slice(gu, start, ∞, axis -1, step 2): the even (start 0) or odd half.
  Value interleavedHalf(Value value, int64_t start) {
    auto slice = def<ox::SliceOp>(value);
    if (!slice)
      return Value();
    std::optional<SmallVector<int64_t>> starts = intList(slice.getStarts());
    std::optional<SmallVector<int64_t>> ends = intList(slice.getEnds());
    std::optional<SmallVector<int64_t>> steps = intList(slice.getSteps());
    if (!starts || !ends || !steps || *starts != SmallVector<int64_t>{start} ||
        ends->size() != 1 || (*ends)[0] < rankOfLast(slice.getData()) ||
        *steps != SmallVector<int64_t>{2} || !isAxis(slice.getAxes(), 1, 2))
      return Value();
    return skipNoOps(slice.getData());
  }

  static int64_t rankOfLast(Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type && !type.isDynamicDim(type.getRank() - 1) ? type.getDimSize(type.getRank() - 1)
                                                          : std::numeric_limits<int64_t>::max();
  }

  /// y = down(act(gate_up(xs))), with xs the repeated router input.
  LogicalResult matchDown(Value y) {
    FailureOr<Value> activated = matchProjection(y, m.down, m.downBias);
    if (failed(activated))
      return failure();
    FailureOr<Value> gateUpOut = matchActivation(skipNoOps(*activated));
    if (failed(gateUpOut))
      return failure();
    FailureOr<Value> slots = matchProjection(*gateUpOut, m.gateUp, m.gateUpBias);
    if (failed(slots))
      return failure();
    // xs = Reshape(Expand(Unsqueeze(x, 1), [1, K, 1]), [-1, H]): each token K times.
    auto flat = def<ox::ReshapeOp>(skipNoOps(*slots));
    auto expand = flat ? def<ox::ExpandOp>(flat.getData()) : ox::ExpandOp();
    auto unsqueeze = expand ? def<ox::UnsqueezeOp>(expand.getInput()) : ox::UnsqueezeOp();
    std::optional<SmallVector<int64_t>> expandShape =
        expand ? intList(expand.getShape()) : std::nullopt;
    if (!unsqueeze || !isAxis(unsqueeze.getAxes(), 1, 3) || !expandShape ||
        *expandShape != SmallVector<int64_t>{1, m.topK, 1})
      return failure();
    m.hidden = skipNoOps(unsqueeze.getData());
    return success();
  }

  /// The router: logits of the hidden states, top-k and the weights' formula.
  LogicalResult matchRouter() {
    auto topk = m.ids.getDefiningOp<ox::TopKOp>();
    if (!topk || m.ids != topk.getIndices() || topk.getLargest().value_or(1) != 1 ||
        !isAttrAxis(topk.getAxis(), -1, 1, 2) || !isScalar(topk.getK(), m.topK))
      return failure();
    Value scores = topk.getX();
    Value weights = skipNoOps(routingWeights);
    if (auto cast = def<ox::CastOp>(weights))
      weights = cast.getInput();

    // Mixtral / Qwen: TopK over Softmax(logits); weights the values, renormalised or not.
    if (auto softmax = def<ox::SoftmaxOp>(scores)) {
      if (!isAttrAxis(softmax.getAxis(), -1, 1, 2))
        return failure();
      m.routing = moe::RoutingKind::SoftmaxTopK;
      if (weights == topk.getValues())
        m.normalize = false;
      else if (isRenormalisation(weights, topk.getValues()))
        m.normalize = true;
      else
        return failure();
      return matchLogits(softmax.getInput());
    }
    // gpt-oss: TopK over logits, Softmax over the K values.
    if (auto softmax = def<ox::SoftmaxOp>(weights)) {
      if (softmax.getInput() != topk.getValues() || !isAttrAxis(softmax.getAxis(), -1, 1, 2))
        return failure();
      m.routing = moe::RoutingKind::TopKSoftmax;
      return matchLogits(scores);
    }
    // DeepSeek-V3: TopK over the group-masked biased sigmoid, weights gathered
    // from the unbiased sigmoid.
    if (auto where = def<ox::WhereOp>(scores))
      return matchGroupLimited(where, topk, weights);
    return failure();
  }

  /// Div(v, ReduceSum(v, axes = [-1], keepdims = 1)).
  static bool isRenormalisation(Value value, Value values) {
    auto div = def<ox::DivOp>(value);
    auto sum = div ? def<ox::ReduceSumOp>(div.getB()) : ox::ReduceSumOp();
    return sum && div.getA() == values && sum.getData() == values &&
           sum.getKeepdims().value_or(1) == 1 && isAxis(sum.getAxes(), 1, 2);
  }

  LogicalResult matchGroupLimited(ox::WhereOp where, ox::TopKOp topk, Value weights) {
    // masked = Where(Not(groupMask), -inf, biased); biased = Sigmoid(logits) + bias
    std::optional<double> fill = scalarConstant(where.getX());
    auto biasedAdd = def<ox::AddOp>(where.getY());
    auto notOp = def<ox::NotOp>(where.getCondition());
    if (!fill || !std::isinf(*fill) || *fill > 0 || !biasedAdd || !notOp)
      return failure();
    Value scoreSide = biasedAdd.getA(), biasSide = biasedAdd.getB();
    if (!def<ox::SigmoidOp>(scoreSide))
      std::swap(scoreSide, biasSide);
    auto sigmoid = def<ox::SigmoidOp>(scoreSide);
    if (!sigmoid || rankOf(biasSide) != 1 || !getConstantBytes(biasSide))
      return failure();
    // Group scores: TopK(Reshape(biased, [-1, G, E/G]), 2) summed, TopK of those.
    ox::TopKOp groupTop, pairTop;
    for (Operation *user : biasedAdd->getUsers()) {
      auto reshape = dyn_cast<ox::ReshapeOp>(user);
      if (!reshape || !reshape->hasOneUse())
        continue;
      pairTop = dyn_cast<ox::TopKOp>(*reshape->user_begin());
      std::optional<SmallVector<int64_t>> shape = intList(reshape.getShape());
      if (!pairTop || !shape || shape->size() != 3 || !isScalar(pairTop.getK(), 2))
        continue;
      m.numGroups = (*shape)[1];
      for (Operation *sumUser : pairTop.getValues().getUsers()) {
        auto sum = dyn_cast<ox::ReduceSumOp>(sumUser);
        if (!sum)
          continue;
        for (Operation *topUser : sum->getUsers())
          if (auto t = dyn_cast<ox::TopKOp>(topUser))
            groupTop = t;
      }
    }
    std::optional<double> keptGroups = groupTop ? scalarConstant(groupTop.getK()) : std::nullopt;
    if (!groupTop || !keptGroups)
      return failure();
    m.topkGroups = static_cast<int64_t>(*keptGroups);
    // The mask must come from the kept groups' indices (ScatterElements of them).
    bool maskFromGroups = false;
    for (Operation *user : groupTop.getIndices().getUsers())
      maskFromGroups |= isa<ox::ScatterElementsOp>(user);
    if (!maskFromGroups)
      return failure();
    m.routing = moe::RoutingKind::SigmoidGroupTopK;
    m.correctionBias = biasSide;

    // weights = [Mul(]Div(g, ReduceSum(g))[, scale)], g = GatherElements(sigmoid, ids)
    if (auto scaled = def<ox::MulOp>(weights)) {
      for (auto [inner, factor] : {std::pair(scaled.getA(), scaled.getB()),
                                   std::pair(scaled.getB(), scaled.getA())})
        if (std::optional<double> s = scalarConstant(factor)) {
          m.scalingFactor = *s;
          weights = inner;
          break;
        }
    }
    Value gathered = weights;
    if (auto div = def<ox::DivOp>(weights)) {
      if (!isRenormalisation(weights, div.getA()))
        return failure();
      m.normalize = true;
      gathered = div.getA();
    }
    auto gather = def<ox::GatherElementsOp>(gathered);
    if (!gather || gather.getData() != sigmoid.getResult() || gather.getIndices() != topk.getIndices() ||
        !isAttrAxis(gather.getAxis(), 0, 1, 2))
      return failure();
    return matchLogits(sigmoid.getX());
  }

  /// logits = Gemm(hidden, Wr[, br]) with transB = 1 (or 0: transposed at compile time).
  LogicalResult matchLogits(Value logits) {
    auto gemm = def<ox::GemmOp>(skipNoOps(logits));
    if (!gemm || skipNoOps(gemm.getA()) != m.hidden || gemm.getTransA().value_or(0) != 0 ||
        gemm.getAlpha().value_or(APFloat(1.0f)).convertToDouble() != 1.0 ||
        !isStackedConstant(gemm.getB(), 2))
      return failure();
    m.routerWeight = gemm.getB();
    m.routerTransposed = gemm.getTransB().value_or(0) == 0;
    if (!isa<ox::NoValueOp>(gemm.getC().getDefiningOp())) {
      if (gemm.getBeta().value_or(APFloat(1.0f)).convertToDouble() != 1.0 || rankOf(gemm.getC()) != 1)
        return failure();
      m.routerBias = gemm.getC();
    }
    return success();
  }

  MatchedBlock &m;
  Value routingWeights;
};

//===----------------------------------------------------------------------===//
// Building moe.layer
//===----------------------------------------------------------------------===//

/// A [.., A, B] constant transposed to [.., B, A], at compile time.
Value transposeLastTwo(PatternRewriter &rewriter, Location loc, Value value, StringRef name) {
  auto type = cast<RankedTensorType>(value.getType());
  ArrayRef<char> bytes = *getConstantBytes(value);
  int64_t rank = type.getRank(), rows = type.getDimSize(rank - 2), cols = type.getDimSize(rank - 1);
  int64_t batch = type.getNumElements() / (rows * cols), size = elementBytes(type.getElementType());
  std::vector<char> out(bytes.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(&out[((b * cols + c) * rows + r) * size], &bytes[((b * rows + r) * cols + c) * size],
                    size);
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 2], shape[rank - 1]);
  return makeConstant(rewriter, loc, RankedTensorType::get(shape, type.getElementType()), out, name);
}

/// [A, N] and [B, N] constants stacked into [A + B, N].
Value stackRows(PatternRewriter &rewriter, Location loc, Value first, Value second, StringRef name) {
  auto a = cast<RankedTensorType>(first.getType()), b = cast<RankedTensorType>(second.getType());
  std::vector<char> bytes(getConstantBytes(first)->begin(), getConstantBytes(first)->end());
  bytes.insert(bytes.end(), getConstantBytes(second)->begin(), getConstantBytes(second)->end());
  return makeConstant(rewriter, loc,
                      RankedTensorType::get({a.getDimSize(0) + b.getDimSize(0), a.getDimSize(1)},
                                            a.getElementType()),
                      bytes, name);
}

//===----------------------------------------------------------------------===//
// Expert weights read through DequantizeLinear
//===----------------------------------------------------------------------===//

/// The elements of a constant of f32, f16, bf16, f8E4M3FN or 8-bit integers as
/// floats, splats included; nullopt for anything else.
std::optional<std::vector<float>> constantFloats(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  Type element = type.getElementType();
  int64_t count = type.getNumElements(), size = elementBytes(element);
  std::vector<float> values(count);
  if (std::optional<ArrayRef<char>> bytes = getConstantBytes(value)) {
    if (static_cast<int64_t>(bytes->size()) != count * size)
      return std::nullopt;
    for (int64_t i = 0; i < count; ++i) {
      std::optional<float> v = decodeAsFloat(element, *bytes, i);
      if (!v)
        return std::nullopt;
      values[i] = *v;
    }
    return values;
  }
  // A splat (a one-element initializer is one).
  DenseElementsAttr dense = denseElements(value);
  if (!dense || !dense.isSplat())
    return std::nullopt;
  std::optional<float> v = decodeAsFloat(element, dense.getRawData(), 0);
  if (!v)
    return std::nullopt;
  values.assign(count, *v);
  return values;
}

/// An expert weight as moe.layer takes it, [E, out, in]: of the model's type, or
/// e4m3 with one f32 scale per 128x128 block (`scales`).
struct LayerWeight {
  Value weight, scales;
};

/// A DequantizeLinear whose operands are all constants, and the scale each
/// element of x uses.
struct ConstantDequantize {
  Value x;
  std::vector<float> scale, zeroPoint;
  ox::DequantizeLayout layout;
  int64_t experts, rows, cols; // x is [E, rows, cols], stored

  static FailureOr<ConstantDequantize> match(ox::DequantizeLinearOp dq, std::string &why) {
    auto type = dyn_cast<RankedTensorType>(dq.getX().getType());
    auto scaleType = dyn_cast<RankedTensorType>(dq.getXScale().getType());
    if (!type || !scaleType || type.getRank() != 3 || !type.hasStaticShape() ||
        !scaleType.hasStaticShape()) {
      why = "DequantizeLinear of a weight that is not a static [E, N, K] tensor";
      return failure();
    }
    std::optional<ox::DequantizeLayout> layout = ox::DequantizeLayout::get(
        type.getShape(), scaleType.getShape(), dq.getAxis(), dq.getBlockSize(), why);
    if (!layout)
      return failure();
    std::optional<std::vector<float>> scale = constantFloats(dq.getXScale());
    if (!scale || !getConstantBytes(dq.getX())) {
      why = "DequantizeLinear of a weight or scale that is not a constant";
      return failure();
    }
    ConstantDequantize c{dq.getX(), std::move(*scale), {}, *layout, type.getDimSize(0),
                         type.getDimSize(1), type.getDimSize(2)};
    if (Value zp = dq.getXZeroPoint(); zp && !isa<NoneType>(zp.getType())) {
      std::optional<std::vector<float>> values = constantFloats(zp);
      if (!values) {
        why = "DequantizeLinear with a zero point that is not a constant";
        return failure();
      }
      if (llvm::any_of(*values, [](float v) { return v != 0.0f; }))
        c.zeroPoint = std::move(*values);
    }
    return c;
  }

  /// The scale element (e, r, c) uses.
  int64_t scaleIndex(int64_t e, int64_t r, int64_t c) const {
    return layout.scaleIndex((e * rows + r) * cols + c);
  }

  /// One scale per 128x128 block of the stored [E, rows, cols] x, or nullopt
  /// when some block holds two.
  std::optional<std::vector<float>> blockScales() const {
    // Every DequantizeLinear layout's scale index is a sum of one term per
    // dimension of x (0 at coordinate 0): per tensor none, per axis one, blocked
    // one per dimension. So the terms are computed per row and per column apart,
    // and a block costs its distinct scales, not its 128 x 128 elements.
    std::vector<int64_t> byRow(rows), byCol(cols);
    for (int64_t r = 0; r < rows; ++r)
      byRow[r] = scaleIndex(0, r, 0);
    for (int64_t c = 0; c < cols; ++c)
      byCol[c] = scaleIndex(0, 0, c);
    int64_t rowBlocks = (rows + 127) / 128, colBlocks = (cols + 127) / 128;
    std::vector<float> out(experts * rowBlocks * colBlocks);
    for (int64_t e = 0; e < experts; ++e) {
      int64_t base = scaleIndex(e, 0, 0); // every term is 0 at coordinate 0
      for (int64_t rb = 0; rb < rowBlocks; ++rb) {
        SmallVector<int64_t> rowTerms(byRow.begin() + rb * 128,
                                      byRow.begin() + std::min(rows, rb * 128 + 128));
        llvm::sort(rowTerms);
        rowTerms.erase(std::unique(rowTerms.begin(), rowTerms.end()), rowTerms.end());
        for (int64_t cb = 0; cb < colBlocks; ++cb) {
          SmallVector<int64_t> colTerms(byCol.begin() + cb * 128,
                                        byCol.begin() + std::min(cols, cb * 128 + 128));
          llvm::sort(colTerms);
          colTerms.erase(std::unique(colTerms.begin(), colTerms.end()), colTerms.end());
          float first = scale[base + rowTerms[0] + colTerms[0]];
          for (int64_t rt : rowTerms)
            for (int64_t ct : colTerms)
              if (scale[base + rt + ct] != first)
                return std::nullopt;
          out[(e * rowBlocks + rb) * colBlocks + cb] = first;
        }
      }
    }
    return out;
  }

  /// y = (x - zero_point) * scale in f32, as ONNX computes it.
  std::optional<std::vector<float>> dequantized() const {
    std::optional<std::vector<float>> values = constantFloats(x);
    if (!values)
      return std::nullopt;
    for (int64_t i = 0, n = static_cast<int64_t>(values->size()); i < n; ++i) {
      int64_t s = layout.scaleIndex(i);
      (*values)[i] = ((*values)[i] - (zeroPoint.empty() ? 0.0f : zeroPoint[s])) * scale[s];
    }
    return values;
  }
};

/// `values` ([.., rows, cols] row-major) transposed in its last two dimensions.
std::vector<float> transposedLastTwo(ArrayRef<float> values, int64_t rows, int64_t cols) {
  std::vector<float> out(values.size());
  for (int64_t b = 0, batch = values.size() / (rows * cols); b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out[(b * cols + c) * rows + r] = values[(b * rows + r) * cols + c];
  return out;
}

Value floatConstant(PatternRewriter &rewriter, Location loc, ArrayRef<int64_t> shape,
                    ArrayRef<float> values, StringRef name) {
  return makeConstant(rewriter, loc, RankedTensorType::get(shape, rewriter.getF32Type()),
                      ArrayRef<char>(reinterpret_cast<const char *>(values.data()),
                                     values.size() * sizeof(float)),
                      name);
}

/// Whether layerWeight can build the weight moe.layer gets for `w`; it checks
/// before anything is built because a pattern that fails must leave the IR as
/// it found it. A weight read through DequantizeLinear leaves its match in
/// `dequantize`, so that its scales are decoded once.
LogicalResult checkLayerWeight(const StackedWeight &w,
                               std::optional<ConstantDequantize> &dequantize, std::string &why) {
  auto dq = def<ox::DequantizeLinearOp>(w.value);
  if (!dq) {
    if (getConstantBytes(w.value))
      return success();
    why = "expert weights must be constants";
    return failure();
  }
  FailureOr<ConstantDequantize> matched = ConstantDequantize::match(dq, why);
  if (failed(matched))
    return failure();
  Type element = cast<RankedTensorType>(dq.getX().getType()).getElementType();
  if (!(isa<Float8E4M3FNType>(element) || element.isInteger(8) || element.isF16() ||
        element.isBF16() || element.isF32())) {
    why = "DequantizeLinear of a weight whose type moec does not read";
    return failure();
  }
  dequantize = std::move(*matched);
  return success();
}

/// The weight moe.layer gets for a stacked weight found by the matcher, with
/// what checkLayerWeight matched.
LayerWeight layerWeight(PatternRewriter &rewriter, Location loc, const StackedWeight &w,
                        const std::optional<ConstantDequantize> &dequantize, StringRef name) {
  if (!dequantize)
    return {w.inputMajor ? transposeLastTwo(rewriter, loc, w.value, name) : w.value, Value()};
  const ConstantDequantize &c = *dequantize;
  // e4m3 without a zero point whose scale is one number per 128x128 block of
  // the [E, out, in] weight: kept as it is (the blocks of a transposed weight
  // are the transposed blocks).
  bool e4m3 = isa<Float8E4M3FNType>(cast<RankedTensorType>(c.x.getType()).getElementType());
  std::string scalesName = (name + "_scales").str();
  if (e4m3 && c.zeroPoint.empty()) {
    if (std::optional<std::vector<float>> scales = c.blockScales()) {
      int64_t rowBlocks = (c.rows + 127) / 128, colBlocks = (c.cols + 127) / 128;
      if (!w.inputMajor)
        return {c.x, floatConstant(rewriter, loc, {c.experts, rowBlocks, colBlocks}, *scales,
                                   scalesName)};
      return {transposeLastTwo(rewriter, loc, c.x, name),
              floatConstant(rewriter, loc, {c.experts, colBlocks, rowBlocks},
                            transposedLastTwo(*scales, rowBlocks, colBlocks), scalesName)};
    }
  }
  // Anything else is dequantised here, in f32 as ONNX computes it.
  std::vector<float> values = *c.dequantized();
  if (w.inputMajor)
    return {floatConstant(rewriter, loc, {c.experts, c.cols, c.rows},
                          transposedLastTwo(values, c.rows, c.cols), name),
            Value()};
  return {floatConstant(rewriter, loc, {c.experts, c.rows, c.cols}, values, name), Value()};
}

struct RaiseBatchedMoE : OpRewritePattern<ox::ReduceSumOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ox::ReduceSumOp sum, PatternRewriter &rewriter) const override {
    MatchedBlock block;
    BlockMatcher matcher(block);
    if (failed(matcher.match(sum)))
      return rewriter.notifyMatchFailure(sum, "not a batched_mm MoE block");
    auto resultType = dyn_cast<RankedTensorType>(sum.getType());
    if (!resultType || resultType != block.hidden.getType())
      return rewriter.notifyMatchFailure(sum, "the block's output type differs from its input's");
    // Transposes need the weights' values: stacked weights must be constants,
    // or DequantizeLinear of constants.
    Location loc = sum.getLoc();
    std::string why;
    std::optional<ConstantDequantize> gateUpDequantize, downDequantize;
    if (failed(checkLayerWeight(block.gateUp, gateUpDequantize, why)) ||
        failed(checkLayerWeight(block.down, downDequantize, why)))
      return rewriter.notifyMatchFailure(sum, why);
    matcher.matchSharedExpert(sum);
    LayerWeight gateUp =
        layerWeight(rewriter, loc, block.gateUp, gateUpDequantize, "gate_up_weight");
    LayerWeight down = layerWeight(rewriter, loc, block.down, downDequantize, "down_weight");
    Value router = block.routerTransposed
                       ? transposeLastTwo(rewriter, loc, block.routerWeight, "router_weight")
                       : block.routerWeight;
    Value sharedGateUp, sharedDown;
    if (block.sharedAdd) {
      sharedGateUp = stackRows(rewriter, loc,
                               transposeLastTwo(rewriter, loc, block.sharedGate, "shared_gate"),
                               transposeLastTwo(rewriter, loc, block.sharedUp, "shared_up"),
                               "shared_gate_up_weight");
      sharedDown = transposeLastTwo(rewriter, loc, block.sharedDown, "shared_down_weight");
    }
    auto activation = moe::ActivationAttr::get(getContext(), moe::ActivationKind::SiLU,
                                               block.alpha, block.beta, block.limit);
    auto layer = moe::LayerOp::create(
        rewriter, loc, resultType, block.hidden, router, /*router_logits=*/Value(),
        /*expert_ids=*/Value(), /*expert_weights=*/Value(), block.routerBias,
        block.correctionBias, gateUp.weight, /*up_weight=*/Value(), down.weight,
        block.gateUpBias, /*up_bias=*/Value(), block.downBias, gateUp.scales, down.scales,
        sharedGateUp, sharedDown,
        /*shared_gate_weight=*/Value(), block.routing, static_cast<uint64_t>(block.topK),
        block.normalize, block.numGroups, block.topkGroups, APFloat(block.scalingFactor),
        activation, block.layout);
    if (failed(mlir::verify(layer))) {
      rewriter.eraseOp(layer);
      return rewriter.notifyMatchFailure(sum, "the matched block does not make a valid moe.layer");
    }
    rewriter.replaceOp(sum, layer.getResult());
    if (block.sharedAdd)
      rewriter.replaceOp(block.sharedAdd, block.sharedAddRouted);
    exposeRoutingWeights(rewriter, layer, matcher.getRoutingWeights());
    return success();
  }

  /// A block that also returns its routing weights (transformers' gpt-oss MLP
  /// returns its router scores): the uses after the layer read moe.route's
  /// weights of the same router instead of the exported chain, so nothing of
  /// that chain outlives the raise. The lowering's own router is the same
  /// moe.linear and moe.route, which CSE merges with these.
  static void exposeRoutingWeights(PatternRewriter &rewriter, moe::LayerOp layer,
                                   Value weights) {
    // The chain's value, and the same through a cast to its own type.
    SmallVector<Value, 2> exported{weights};
    if (auto cast = def<ox::CastOp>(weights))
      exported.push_back(cast.getInput());
    auto after = [&](OpOperand &use) {
      return use.getOwner()->getBlock() == layer->getBlock() &&
             layer->isBeforeInBlock(use.getOwner());
    };
    for (Value value : exported) {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type || !type.getElementType().isF32() || type.getRank() != 2 ||
          llvm::none_of(value.getUses(), after))
        continue;
      Location loc = layer.getLoc();
      rewriter.setInsertionPoint(layer);
      Value hidden = layer.getHidden();
      auto hiddenType = cast<RankedTensorType>(hidden.getType());
      int64_t experts = layer.getNumExperts(), topK = static_cast<int64_t>(layer.getTopK());
      auto f32 = rewriter.getF32Type();
      Value logits = moe::LinearOp::create(
          rewriter, loc, RankedTensorType::get({hiddenType.getDimSize(0), experts}, f32), hidden,
          layer.getRouterWeight(), layer.getRouterBias(), /*epilogue=*/nullptr,
          /*epilogue_layout=*/nullptr);
      auto route = moe::RouteOp::create(
          rewriter, loc,
          RankedTensorType::get({hiddenType.getDimSize(0), topK}, rewriter.getI32Type()),
          RankedTensorType::get({hiddenType.getDimSize(0), topK}, f32), logits,
          layer.getCorrectionBias(), layer.getRoutingAttr(), layer.getTopKAttr(),
          layer.getNormalizeAttr(), layer.getNumGroupsAttr(), layer.getTopkGroupsAttr(),
          layer.getRoutedScalingFactorAttr());
      Value routed = route.getWeights();
      if (routed.getType() != value.getType()) { // e.g. a static token count
        rewriter.eraseOp(route);
        rewriter.eraseOp(logits.getDefiningOp());
        continue;
      }
      rewriter.replaceUsesWithIf(value, routed, after);
    }
  }
};

struct MoERaiseONNX : moec::impl::MoERaiseONNXBase<MoERaiseONNX> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseBatchedMoE>(&getContext());
    // The per-token weight gathers, router and activation become dead once the
    // layer replaces the sum; the greedy driver erases them (they are pure).
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
