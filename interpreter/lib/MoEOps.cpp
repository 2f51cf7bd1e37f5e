//===- MoEOps.cpp - the moe dialect's kernels -----------------------------===//
//
// docs/dialect.md is the specification these kernels follow, rule by rule:
// routing (scores, selection with the correction bias, group-limited top-k
// with -inf masking, ties to the lower id, normalisation with +1e-20, the
// scaling factor), the stable sort with the sentinel, inclusive end offsets,
// rows past num_valid that are never computed nor read, and the FP8 block
// scales. moe.layer is evaluated directly from its definition, independently
// of the lowered ops, so that a lowering can be checked against it.
//
// Rows the lowered ops leave unspecified are NaN here, so a later op that
// reads them by mistake produces NaN instead of a plausible number.
//
//===----------------------------------------------------------------------===//

#include "Indexing.h"
#include "Kernels.h"

#include "moec/Dialect/MoE/MoEOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

using namespace mlir;
using namespace moec::moe;

namespace moec::interp::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

//===----------------------------------------------------------------------===//
// Activation
//===----------------------------------------------------------------------===//

/// `#moe.activation`: f and SwiGLU's alpha, beta and limit.
struct Activation {
  ActivationKind kind;
  double alpha, beta, limit;

  explicit Activation(ActivationAttr attr)
      : kind(attr.getKind()), alpha(attr.getAlphaValue()), beta(attr.getBetaValue()),
        limit(attr.getLimitValue()) {}

  double f(double g) const {
    switch (kind) {
    case ActivationKind::SiLU:
      return g * sigmoid(alpha * g);
    case ActivationKind::GELU:
      return 0.5 * g * (1.0 + std::erf(g / std::numbers::sqrt2));
    case ActivationKind::ReLU:
      return std::isnan(g) ? g : std::max(g, 0.0);
    case ActivationKind::Identity:
      return g;
    }
    llvm_unreachable("unknown activation");
  }

  /// Gated: f(g) · (u + beta), the inputs clamped first when limit is finite.
  double gated(double g, double u) const {
    if (std::isfinite(limit)) {
      g = std::min(g, limit);
      u = std::clamp(u, -limit, limit);
    }
    return f(g) * (u + beta);
  }

  /// A projected row of `in.size()` values to `out`: halves for the fused gated
  /// layouts, f per element for `none`.
  void apply(GateUpLayout layout, ArrayRef<double> in, MutableArrayRef<double> out) const {
    size_t half = in.size() / 2;
    switch (layout) {
    case GateUpLayout::None:
      for (size_t i = 0; i < in.size(); ++i)
        out[i] = f(in[i]);
      return;
    case GateUpLayout::Concatenated:
      for (size_t i = 0; i < half; ++i)
        out[i] = gated(in[i], in[half + i]);
      return;
    case GateUpLayout::Interleaved:
      for (size_t i = 0; i < half; ++i)
        out[i] = gated(in[2 * i], in[2 * i + 1]);
      return;
    case GateUpLayout::Separate:
      llvm_unreachable("separate gate and up are applied by moe.layer itself");
    }
  }
};

/// `y = W · x (+ b)` for W [rows, cols] at `w` and x [cols]: an f64 dot per row.
void matvec(const double *w, const double *x, const double *bias, int64_t rows, int64_t cols,
            MutableArrayRef<double> y) {
  for (int64_t n = 0; n < rows; ++n) {
    double sum = 0.0;
    for (int64_t k = 0; k < cols; ++k)
      sum += w[n * cols + k] * x[k];
    y[n] = bias ? sum + bias[n] : sum;
  }
}

/// A gated (fused) layout splits N columns into gate and up halves: N must be
/// even, which the verifier checks only when N is static.
LogicalResult checkGatedWidth(Operation *op, GateUpLayout layout, int64_t n) {
  if (layout == GateUpLayout::None || n % 2 == 0)
    return success();
  return op->emitOpError() << "has " << n << " columns at run time; the gated layout '"
                           << stringifyGateUpLayout(layout) << "' needs an even number";
}

/// The columns a matmul writes: n, or n / 2 when its activation epilogue
/// pairs gate and up columns (a gated layout; n must then be even).
FailureOr<int64_t> epilogueWidth(Operation *op, bool hasEpilogue, GateUpLayout layout,
                                 int64_t n) {
  if (!hasEpilogue || layout == GateUpLayout::None)
    return n;
  if (failed(checkGatedWidth(op, layout, n)))
    return failure();
  return n / 2;
}

/// The optional activation epilogue of a matmul (moe.grouped_matmul,
/// moe.linear) and the columns it writes.
struct MatmulEpilogue {
  std::optional<ActivationAttr> activation;
  GateUpLayout layout;
  int64_t width;

  template <typename MatmulOp>
  static FailureOr<MatmulEpilogue> of(MatmulOp op, int64_t n) {
    std::optional<ActivationAttr> activation = op.getEpilogue();
    GateUpLayout layout = op.getEpilogueLayout().value_or(GateUpLayout::None);
    FailureOr<int64_t> width = epilogueWidth(op, activation.has_value(), layout, n);
    if (failed(width))
      return failure();
    return MatmulEpilogue{activation, layout, *width};
  }

  /// Writes one row's n accumulators to its `width` result columns.
  void write(ArrayRef<double> acc, MutableArrayRef<double> dest) const {
    if (activation)
      Activation(*activation).apply(layout, acc, dest);
    else
      std::copy(acc.begin(), acc.end(), dest.begin());
  }
};

//===----------------------------------------------------------------------===//
// Routing
//===----------------------------------------------------------------------===//

struct Routing {
  RoutingKind kind;
  int64_t topK, numGroups, topkGroups;
  bool normalize;
  double scale;
};

/// The indices of the `k` best of `scores`: descending, ties to the lower
/// index, NaN as the largest value (as torch.topk).
SmallVector<int64_t> topK(ArrayRef<double> scores, int64_t k) {
  SmallVector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    double x = scores[a], y = scores[b];
    if (std::isnan(x) || std::isnan(y))
      return std::isnan(x) && !std::isnan(y);
    return x > y;
  });
  order.resize(k);
  return order;
}

/// values := softmax(values), with the maximum subtracted first.
template <typename Range> void softmaxInPlace(Range &values) {
  double max = *std::max_element(values.begin(), values.end());
  double sum = 0.0;
  for (double &v : values)
    sum += v = std::exp(v - max);
  for (double &v : values)
    v /= sum;
}

/// Routes one token: its logits [E] and the optional correction bias [E] to
/// ids [K] and weights [K] (docs/dialect.md, "Routing").
void routeToken(const Routing &routing, ArrayRef<double> logits, const double *bias,
                SmallVectorImpl<int64_t> &ids, SmallVectorImpl<double> &weights) {
  int64_t e = static_cast<int64_t>(logits.size());
  std::vector<double> scores(logits.begin(), logits.end());
  if (routing.kind == RoutingKind::SoftmaxTopK) {
    softmaxInPlace(scores);
  } else if (routing.kind == RoutingKind::SigmoidGroupTopK) {
    for (double &s : scores)
      s = sigmoid(s);
  }
  // The correction bias steers the selection only; weights use the scores.
  std::vector<double> selection = scores;
  if (bias)
    for (int64_t i = 0; i < e; ++i)
      selection[i] += bias[i];
  if (routing.kind == RoutingKind::SigmoidGroupTopK && routing.numGroups > 1) {
    int64_t groupSize = e / routing.numGroups;
    std::vector<double> groupScores(routing.numGroups);
    for (int64_t g = 0; g < routing.numGroups; ++g) {
      ArrayRef<double> group(selection.data() + g * groupSize, groupSize);
      SmallVector<int64_t> best = topK(group, std::min<int64_t>(2, groupSize));
      groupScores[g] = 0.0;
      for (int64_t i : best)
        groupScores[g] += group[i];
    }
    SmallVector<int64_t> kept = topK(groupScores, routing.topkGroups);
    // Experts of the other groups drop to -inf, not 0 (transformers PR #45441).
    for (int64_t g = 0; g < routing.numGroups; ++g)
      if (!llvm::is_contained(kept, g))
        std::fill_n(selection.begin() + g * groupSize, groupSize, -kInf);
  }
  SmallVector<int64_t> best = topK(selection, routing.topK);
  ids.assign(best.begin(), best.end());
  weights.clear();
  for (int64_t id : ids)
    weights.push_back(routing.kind == RoutingKind::TopKSoftmax ? logits[id] : scores[id]);
  if (routing.kind == RoutingKind::TopKSoftmax)
    softmaxInPlace(weights);
  if (routing.normalize) {
    double sum = std::accumulate(weights.begin(), weights.end(), 0.0) + 1e-20;
    for (double &w : weights)
      w /= sum;
  }
  for (double &w : weights)
    w *= routing.scale;
}

template <typename OpTy> Routing routingOf(OpTy op) {
  return Routing{op.getRouting(),
                 static_cast<int64_t>(op.getTopK()),
                 static_cast<int64_t>(op.getNumGroups()),
                 static_cast<int64_t>(op.getTopkGroups()),
                 op.getNormalize(),
                 op.getRoutedScalingFactor().convertToDouble()};
}

/// Checks the run-time E against the routing's group attributes (the verifier
/// checks them when E is static).
LogicalResult checkRouting(Operation *op, const Routing &routing, int64_t experts) {
  if (routing.topK > experts)
    return op->emitOpError() << "top_k = " << routing.topK << " exceeds the " << experts
                             << " experts";
  if (routing.kind == RoutingKind::SigmoidGroupTopK &&
      (experts % routing.numGroups != 0 ||
       routing.topK > routing.topkGroups * (experts / routing.numGroups)))
    return op->emitOpError() << "num_groups = " << routing.numGroups
                             << " and topk_groups = " << routing.topkGroups << " do not fit "
                             << experts << " experts";
  return success();
}

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

/// FP8 weights [E, N, K] times their 128x128 block scales: the values they stand for.
Tensor dequantizedBlocks(const Tensor &weights, const Tensor &scales) {
  Tensor result = weights;
  int64_t e = weights.dim(0), n = weights.dim(1), k = weights.dim(2);
  int64_t nBlocks = (n + moe::kScaleBlock - 1) / moe::kScaleBlock;
  int64_t kBlocks = (k + moe::kScaleBlock - 1) / moe::kScaleBlock;
  for (int64_t x = 0; x < e; ++x)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c)
        result.values[(x * n + r) * k + c] *=
            scales.values[(x * nBlocks + r / moe::kScaleBlock) * kBlocks + c / moe::kScaleBlock];
  return result;
}

/// MXFP4 weights [E, N, K] (their e2m1 values) times their e8m0 scales
/// [E, N, ceil(K/32)]: the values they stand for, exactly (docs/dialect.md,
/// "MXFP4 layout").
FailureOr<Tensor> dequantizedMXFP4(Operation *op, const Tensor &weights, const Tensor &scales) {
  int64_t e = weights.dim(0), n = weights.dim(1), k = weights.dim(2);
  int64_t kBlocks = (k + moe::kMXBlock - 1) / moe::kMXBlock;
  if (failed(expectShape(op, &scales, "weight_scales", {e, n, kBlocks})))
    return failure();
  Tensor values(ElementType::F64, weights.shape);
  for (int64_t row = 0; row < e * n; ++row)
    for (int64_t i = 0; i < k; ++i)
      values.values[row * k + i] =
          weights.values[row * k + i] * scales.values[row * kBlocks + i / moe::kMXBlock];
  return values;
}

LogicalResult evalLayer(LayerOp op, Operands in, Results &out) {
  auto get = [&](Value value) { return operandTensor(op, in, value); };
  const Tensor &hidden = *get(op.getHidden());
  // Weights that are already FP8 or MXFP4 stand for their values times their scales.
  std::optional<Tensor> gateUpValues, downValues;
  auto dequantize = [&](Value weight, Value scalesValue, std::optional<Tensor> &values) {
    const Tensor *scales = get(scalesValue);
    if (!scales)
      return success();
    const Tensor &codes = *get(weight);
    if (codes.elementType != ElementType::F4E2M1FN) {
      values = dequantizedBlocks(codes, *scales);
      return success();
    }
    FailureOr<Tensor> mxfp4 = dequantizedMXFP4(op, codes, *scales);
    if (failed(mxfp4))
      return failure();
    values = std::move(*mxfp4);
    return success();
  };
  if (failed(dequantize(op.getGateUpWeight(), op.getGateUpScales(), gateUpValues)) ||
      failed(dequantize(op.getDownWeight(), op.getDownScales(), downValues)))
    return failure();
  const Tensor &gateUp = gateUpValues ? *gateUpValues : *get(op.getGateUpWeight());
  const Tensor &down = downValues ? *downValues : *get(op.getDownWeight());
  const Tensor *routerWeight = get(op.getRouterWeight()), *routerLogits = get(op.getRouterLogits());
  const Tensor *expertIds = get(op.getExpertIds()), *expertWeights = get(op.getExpertWeights());
  const Tensor *routerBias = get(op.getRouterBias()), *correction = get(op.getCorrectionBias());
  const Tensor *up = get(op.getUpWeight()), *gateUpBias = get(op.getGateUpBias());
  const Tensor *upBias = get(op.getUpBias()), *downBias = get(op.getDownBias());
  const Tensor *sharedGateUp = get(op.getSharedGateUpWeight());
  const Tensor *sharedDown = get(op.getSharedDownWeight());
  const Tensor *sharedGate = get(op.getSharedGateWeight());

  GateUpLayout layout = op.getGateUpLayout();
  bool fused = layout == GateUpLayout::Concatenated || layout == GateUpLayout::Interleaved;
  int64_t t = hidden.dim(0), h = hidden.dim(1), e = gateUp.dim(0), rows = gateUp.dim(1);
  int64_t inter = down.dim(2);
  int64_t sharedRows = sharedGateUp ? sharedGateUp->dim(0) : 0;
  int64_t sharedInter = sharedDown ? sharedDown->dim(1) : 0;
  if (failed(expectShape(op, &gateUp, "gate_up_weight", {e, fused ? 2 * inter : inter, h})) ||
      failed(expectShape(op, &down, "down_weight", {e, h, inter})) ||
      failed(expectShape(op, up, "up_weight", {e, inter, h})) ||
      failed(expectShape(op, routerWeight, "router_weight", {e, h})) ||
      failed(expectShape(op, routerLogits, "router_logits", {t, e})) ||
      failed(expectShape(op, expertIds, "expert_ids", {t, int64_t(op.getTopK())})) ||
      failed(expectShape(op, expertWeights, "expert_weights", {t, int64_t(op.getTopK())})) ||
      failed(expectShape(op, routerBias, "router_bias", {e})) ||
      failed(expectShape(op, correction, "correction_bias", {e})) ||
      failed(expectShape(op, gateUpBias, "gate_up_bias", {e, rows})) ||
      failed(expectShape(op, upBias, "up_bias", {e, inter})) ||
      failed(expectShape(op, downBias, "down_bias", {e, h})) ||
      failed(expectShape(op, sharedGateUp, "shared_gate_up_weight",
                         {op.isGated() ? 2 * sharedInter : sharedInter, h})) ||
      failed(expectShape(op, sharedDown, "shared_down_weight", {h, sharedInter})) ||
      failed(expectShape(op, sharedGate, "shared_gate_weight", {1, h})))
    return failure();
  Routing routing = routingOf(op);
  if (failed(checkRouting(op, routing, e)))
    return failure();
  Activation activation(op.getActivation());
  // The shared expert is gated (and then concatenated) exactly when the routed ones are.
  GateUpLayout sharedLayout = op.isGated() ? GateUpLayout::Concatenated : GateUpLayout::None;

  Tensor &result = out.emplace_back(resultElementType(op), hidden.shape, 0.0);
  std::vector<double> logits(e), projected(std::max(rows, sharedRows)), upRow(inter);
  std::vector<double> act(std::max(inter, sharedInter)), y(h);
  SmallVector<int64_t> ids;
  SmallVector<double> weights;
  auto at = [](const Tensor *tensor, int64_t offset) {
    return tensor ? tensor->values.data() + offset : nullptr;
  };
  for (int64_t token = 0; token < t; ++token) {
    const double *x = hidden.values.data() + token * h;
    if (expertIds) {
      // Precomputed routing: the token's ids and weights as given.
      int64_t k = expertIds->dim(1);
      ids.clear();
      weights.assign(expertWeights->values.begin() + token * k,
                     expertWeights->values.begin() + (token + 1) * k);
      for (int64_t slot = 0; slot < k; ++slot)
        ids.push_back(toInt64(expertIds->values[token * k + slot]));
    } else {
      if (routerWeight)
        matvec(routerWeight->values.data(), x, at(routerBias, 0), e, h, logits);
      else
        std::copy_n(routerLogits->values.begin() + token * e, e, logits.begin());
      routeToken(routing, logits, at(correction, 0), ids, weights);
    }

    double *row = result.values.data() + token * h;
    for (auto [id, weight] : llvm::zip(ids, weights)) {
      if (id < 0 || id >= e)
        continue; // the sentinel: never computed, adds nothing (NaN weights included)
      matvec(gateUp.values.data() + id * rows * h, x, at(gateUpBias, id * rows), rows, h,
             MutableArrayRef<double>(projected).take_front(rows));
      if (layout == GateUpLayout::Separate) {
        matvec(up->values.data() + id * inter * h, x, at(upBias, id * inter), inter, h, upRow);
        for (int64_t i = 0; i < inter; ++i)
          act[i] = activation.gated(projected[i], upRow[i]);
      } else {
        activation.apply(layout, ArrayRef<double>(projected).take_front(rows), act);
      }
      matvec(down.values.data() + id * h * inter, act.data(), at(downBias, id * h), h, inter, y);
      for (int64_t i = 0; i < h; ++i)
        row[i] += weight * y[i];
    }

    if (sharedGateUp) {
      matvec(sharedGateUp->values.data(), x, nullptr, sharedRows, h,
             MutableArrayRef<double>(projected).take_front(sharedRows));
      activation.apply(sharedLayout, ArrayRef<double>(projected).take_front(sharedRows), act);
      matvec(sharedDown->values.data(), act.data(), nullptr, h, sharedInter, y);
      double scale = 1.0;
      if (sharedGate) {
        double g = 0.0;
        matvec(sharedGate->values.data(), x, nullptr, 1, h, MutableArrayRef<double>(g));
        scale = sigmoid(g);
      }
      for (int64_t i = 0; i < h; ++i)
        row[i] += scale * y[i];
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The lowered ops
//===----------------------------------------------------------------------===//

LogicalResult evalRoute(RouteOp op, Operands in, Results &out) {
  const Tensor &logits = *in[0];
  const Tensor *correction = operandTensor(op, in, op.getCorrectionBias());
  int64_t t = logits.dim(0), e = logits.dim(1);
  Routing routing = routingOf(op);
  if (failed(expectShape(op, correction, "correction_bias", {e})) ||
      failed(checkRouting(op, routing, e)))
    return failure();
  out.emplace_back(resultElementType(op, 0), ArrayRef<int64_t>{t, routing.topK});
  out.emplace_back(resultElementType(op, 1), ArrayRef<int64_t>{t, routing.topK});
  Tensor &ids = out[out.size() - 2], &weights = out.back();
  SmallVector<int64_t> tokenIds;
  SmallVector<double> tokenWeights;
  for (int64_t token = 0; token < t; ++token) {
    routeToken(routing, ArrayRef<double>(logits.values).slice(token * e, e),
               correction ? correction->values.data() : nullptr, tokenIds, tokenWeights);
    for (int64_t k = 0; k < routing.topK; ++k) {
      ids.values[token * routing.topK + k] = static_cast<double>(tokenIds[k]);
      weights.values[token * routing.topK + k] = tokenWeights[k];
    }
  }
  return success();
}

/// Stable counting sort of the slots by local id; every non-local id is the
/// sentinel E and sorts last.
/// The rank an op partitioned for every rank runs as: `epRank`, checked
/// against the op's ep_size.
FailureOr<int64_t> runningRank(Operation *op, int64_t epSize, int64_t epRank) {
  if (epRank < 0)
    return op->emitOpError() << "is partitioned over " << epSize
                             << " expert-parallel ranks and reads its rank at run time; "
                                "give the rank to run as (moec-interp --ep-rank)";
  if (epRank >= epSize)
    return op->emitOpError() << "is partitioned over " << epSize << " ranks; rank " << epRank
                             << " is not one of them";
  return epRank;
}

LogicalResult evalSort(SortOp op, Operands in, Results &out, int64_t epRank) {
  const Tensor &ids = *in[0];
  int64_t e = op.getNumExperts(), first = static_cast<int64_t>(op.getFirstExpert());
  if (std::optional<int64_t> epSize = op.getEpSize()) {
    FailureOr<int64_t> rank = runningRank(op, *epSize, epRank);
    if (failed(rank))
      return failure();
    first = *rank * e;
  }
  int64_t slots = ids.numElements();
  std::vector<int64_t> local(slots), counts(e + 1, 0);
  for (int64_t s = 0; s < slots; ++s) {
    double id = ids.values[s];
    local[s] = id >= static_cast<double>(first) && id < static_cast<double>(first + e)
                   ? static_cast<int64_t>(id) - first
                   : e;
    ++counts[local[s]];
  }
  out.emplace_back(resultElementType(op, 0), ArrayRef<int64_t>{slots});
  out.emplace_back(resultElementType(op, 1), ArrayRef<int64_t>{e});
  out.emplace_back(resultElementType(op, 2), ArrayRef<int64_t>{});
  Tensor &permutation = out[out.size() - 3], &offsets = out[out.size() - 2], &numValid = out.back();
  std::vector<int64_t> next(e + 1, 0); // the first sorted row of each bucket
  for (int64_t i = 1; i <= e; ++i)
    next[i] = next[i - 1] + counts[i - 1];
  for (int64_t i = 0; i < e; ++i)
    offsets.values[i] = static_cast<double>(next[i] + counts[i]); // inclusive end
  numValid.values[0] = static_cast<double>(next[e]);
  for (int64_t s = 0; s < slots; ++s)
    permutation.values[next[local[s]]++] = static_cast<double>(s);
  return success();
}

/// num_valid as a row count in [0, slots], or an error.
FailureOr<int64_t> numValidOf(Operation *op, const Tensor &numValid, int64_t slots) {
  int64_t count = toInt64(numValid.values[0]);
  if (count < 0 || count > slots)
    return op->emitOpError() << "num_valid = " << count << " is outside [0, " << slots << "]";
  return count;
}

/// permutation[r] for r < num_valid, checked to be slots.
LogicalResult checkPermutation(Operation *op, const Tensor &permutation, int64_t numValid,
                               int64_t slots, bool unique) {
  std::vector<bool> seen(slots, false);
  for (int64_t r = 0; r < numValid; ++r) {
    int64_t slot = toInt64(permutation.values[r]);
    if (slot < 0 || slot >= slots)
      return op->emitOpError() << "permutation[" << r << "] = " << slot << " is not a slot in [0, "
                               << slots << ")";
    if (unique && seen[slot])
      return op->emitOpError() << "permutation lists slot " << slot << " twice (again at row " << r
                               << ")";
    seen[slot] = true;
  }
  return success();
}

LogicalResult evalPermute(PermuteOp op, Operands in, Results &out) {
  const Tensor &hidden = *in[0], &permutation = *in[1];
  int64_t t = hidden.dim(0), h = hidden.dim(1), slots = permutation.dim(0);
  int64_t topK = static_cast<int64_t>(op.getTopK());
  if (slots != t * topK)
    return op.emitOpError() << "permutation has " << slots << " rows, but " << t
                            << " tokens times top_k = " << topK << " make " << t * topK;
  FailureOr<int64_t> numValid = numValidOf(op, *in[2], slots);
  if (failed(numValid) || failed(checkPermutation(op, permutation, *numValid, slots, false)))
    return failure();
  // Rows at or past num_valid are not written: NaN stands for "unspecified".
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{slots, h}, kNaN);
  for (int64_t r = 0; r < *numValid; ++r) {
    int64_t token = toInt64(permutation.values[r]) / topK;
    std::copy_n(hidden.values.begin() + token * h, h, result.values.begin() + r * h);
  }
  return success();
}

/// Checks that offsets are non-decreasing inclusive ends within [0, rows].
LogicalResult checkOffsets(Operation *op, const Tensor &offsets, int64_t rows) {
  int64_t previous = 0;
  for (int64_t e = 0; e < offsets.numElements(); ++e) {
    int64_t end = toInt64(offsets.values[e]);
    if (end < previous || end > rows)
      return op->emitOpError() << "offsets[" << e << "] = " << end
                               << " is not an inclusive end in [" << previous << ", " << rows
                               << "]";
    previous = end;
  }
  return success();
}

/// A matmul with bf16 weights rounds f32 (or f64) rows to bf16 before it
/// multiplies, as the bf16-weight kernels do; moe-cast-experts-bf16 relies on
/// it (storing such rows as bf16 changes no bit). Returns `rows` or, rounded,
/// `storage`.
const Tensor &rowsForWeights(const Tensor &rows, const Tensor &weights, Tensor &storage) {
  if (weights.elementType != ElementType::BF16 ||
      (rows.elementType != ElementType::F32 && rows.elementType != ElementType::F64))
    return rows;
  storage = rows;
  storage.elementType = ElementType::BF16;
  storage.round();
  return storage;
}

/// Rows of lhs times their expert's weights, per the offsets; FP8 operands are
/// their decoded e4m3 values times the block scales of each 128-wide K block,
/// MXFP4 weights their e2m1 values times their e8m0 scales.
LogicalResult evalGroupedMatmul(GroupedMatmulOp op, Operands in, Results &out) {
  auto get = [&](Value value) { return operandTensor(op, in, value); };
  const Tensor *weightScales = get(op.getWeightScales());
  FailureOr<Tensor> mxfp4Values = Tensor();
  if (get(op.getWeights())->elementType == ElementType::F4E2M1FN) {
    if (get(op.getWeights())->rank() != 3 || !weightScales)
      return op.emitOpError("MXFP4 weights must be [E, N, K] with their scales");
    mxfp4Values = dequantizedMXFP4(op, *get(op.getWeights()), *weightScales);
    if (failed(mxfp4Values))
      return failure();
    weightScales = nullptr; // applied
  }
  const Tensor &weights = mxfp4Values->rank() ? *mxfp4Values : *get(op.getWeights());
  Tensor roundedLhs;
  const Tensor &lhs = rowsForWeights(*get(op.getLhs()), weights, roundedLhs);
  const Tensor &offsets = *get(op.getOffsets());
  const Tensor *bias = get(op.getBias()), *lhsScales = get(op.getLhsScales());
  int64_t rows = lhs.dim(0), k = lhs.dim(1), e = weights.dim(0), n = weights.dim(1);
  int64_t kBlocks = (k + moe::kScaleBlock - 1) / moe::kScaleBlock;
  int64_t nBlocks = (n + moe::kScaleBlock - 1) / moe::kScaleBlock;
  if (failed(expectShape(op, &weights, "weights", {e, n, k})) ||
      failed(expectShape(op, &offsets, "offsets", {e})) ||
      failed(expectShape(op, bias, "bias", {e, n})) ||
      failed(expectShape(op, lhsScales, "lhs_scales", {rows, kBlocks})) ||
      failed(expectShape(op, weightScales, "weight_scales", {e, nBlocks, kBlocks})) ||
      failed(checkOffsets(op, offsets, rows)))
    return failure();
  FailureOr<MatmulEpilogue> epilogue = MatmulEpilogue::of(op, n);
  if (failed(epilogue))
    return failure();
  int64_t width = epilogue->width;
  // Rows past offsets[E-1] are never computed.
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{rows, width}, kNaN);
  std::vector<double> acc(n);
  int64_t begin = 0;
  for (int64_t expert = 0; expert < e; ++expert) {
    int64_t end = toInt64(offsets.values[expert]);
    const double *w = weights.values.data() + expert * n * k;
    for (int64_t r = begin; r < end; ++r) {
      const double *x = lhs.values.data() + r * k;
      for (int64_t col = 0; col < n; ++col) {
        double sum = 0.0;
        for (int64_t kb = 0; kb < kBlocks; ++kb) {
          double partial = 0.0;
          for (int64_t i = kb * moe::kScaleBlock; i < std::min(k, (kb + 1) * moe::kScaleBlock); ++i)
            partial += x[i] * w[col * k + i];
          if (lhsScales)
            partial *= lhsScales->values[r * kBlocks + kb];
          if (weightScales)
            partial *=
                weightScales->values[(expert * nBlocks + col / moe::kScaleBlock) * kBlocks + kb];
          sum += partial;
        }
        acc[col] = bias ? sum + bias->values[expert * n + col] : sum;
      }
      epilogue->write(acc, MutableArrayRef<double>(result.values.data() + r * width, width));
    }
    begin = end;
  }
  return success();
}

LogicalResult evalActivation(ActivationOp op, Operands in, Results &out) {
  const Tensor &input = *in[0];
  int64_t m = input.dim(0), n = input.dim(1);
  GateUpLayout layout = op.getLayout();
  FailureOr<int64_t> columns = epilogueWidth(op, /*hasEpilogue=*/true, layout, n);
  if (failed(columns))
    return failure();
  int64_t width = *columns;
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{m, width});
  Activation activation(op.getActivation());
  for (int64_t r = 0; r < m; ++r)
    activation.apply(layout, ArrayRef<double>(input.values).slice(r * n, n),
                     MutableArrayRef<double>(result.values.data() + r * width, width));
  return success();
}

/// Weighted sum of each token's valid slots, ascending k; rows past num_valid
/// are never read, and a token without a valid slot gets an exact 0 (plus the
/// addend, where the op carries one).
LogicalResult evalCombine(CombineOp op, Operands in, Results &out, int64_t epRank) {
  const Tensor &rows = *in[0], &permutation = *in[1], &weights = *in[2];
  const Tensor *addend = operandTensor(op, in, op.getAddend());
  const Tensor *addendGate = operandTensor(op, in, op.getAddendGate());
  if (std::optional<int64_t> epSize = op.getEpSize()) {
    FailureOr<int64_t> rank = runningRank(op, *epSize, epRank);
    if (failed(rank))
      return failure();
    if (*rank != 0) // the addend counts once in the ranks' sum
      addend = addendGate = nullptr;
  }
  int64_t slots = rows.dim(0), h = rows.dim(1), t = weights.dim(0), topK = weights.dim(1);
  if (slots != t * topK || permutation.dim(0) != slots)
    return op.emitOpError() << "rows " << formatShape(rows.shape) << ", permutation "
                            << formatShape(permutation.shape) << " and weights "
                            << formatShape(weights.shape) << " disagree on T * K";
  if (failed(expectShape(op, addend, "addend", {t, h})) ||
      failed(expectShape(op, addendGate, "addend_gate", {t, 1})))
    return failure();
  FailureOr<int64_t> numValid = numValidOf(op, *in[3], slots);
  if (failed(numValid) || failed(checkPermutation(op, permutation, *numValid, slots, true)))
    return failure();
  std::vector<int64_t> rowOfSlot(slots, -1);
  for (int64_t r = 0; r < *numValid; ++r)
    rowOfSlot[toInt64(permutation.values[r])] = r;
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{t, h}, 0.0);
  for (int64_t token = 0; token < t; ++token) {
    double *dest = result.values.data() + token * h;
    for (int64_t k = 0; k < topK; ++k) {
      int64_t r = rowOfSlot[token * topK + k];
      if (r < 0)
        continue; // a sentinel slot: nothing is read
      double w = weights.values[token * topK + k];
      for (int64_t i = 0; i < h; ++i)
        dest[i] += w * rows.values[r * h + i];
    }
    if (addend) {
      double scale = addendGate ? sigmoid(addendGate->values[token]) : 1.0;
      for (int64_t i = 0; i < h; ++i)
        dest[i] += scale * addend->values[token * h + i];
    }
  }
  return success();
}

/// input · weightᵀ + bias with an optional activation epilogue (moe.linear).
LogicalResult evalLinear(LinearOp op, Operands in, Results &out) {
  const Tensor &weight = *in[1];
  Tensor roundedInput;
  const Tensor &input = rowsForWeights(*in[0], weight, roundedInput);
  const Tensor *bias = operandTensor(op, in, op.getBias());
  int64_t m = input.dim(0), k = input.dim(1), n = weight.dim(0);
  if (failed(expectShape(op, &weight, "weight", {n, k})) ||
      failed(expectShape(op, bias, "bias", {n})))
    return failure();
  FailureOr<MatmulEpilogue> epilogue = MatmulEpilogue::of(op, n);
  if (failed(epilogue))
    return failure();
  int64_t width = epilogue->width;
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{m, width});
  std::vector<double> acc(n);
  for (int64_t r = 0; r < m; ++r) {
    matvec(weight.values.data(), input.values.data() + r * k, bias ? bias->values.data() : nullptr,
           n, k, acc);
    epilogue->write(acc, MutableArrayRef<double>(result.values.data() + r * width, width));
  }
  return success();
}

/// Each weight's projection of the same rows, as moe.linear without an
/// epilogue (moe.multi_linear).
LogicalResult evalMultiLinear(MultiLinearOp op, Operands in, Results &out) {
  size_t count = op.getWeights().size();
  bool biased = !op.getBiases().empty();
  for (size_t i = 0; i < count; ++i) {
    const Tensor &weight = *in[1 + i];
    Tensor roundedInput;
    const Tensor &input = rowsForWeights(*in[0], weight, roundedInput);
    const Tensor *bias = biased ? in[1 + count + i] : nullptr;
    int64_t m = input.dim(0), k = input.dim(1), n = weight.dim(0);
    std::string name = "weight " + std::to_string(i), biasName = "bias " + std::to_string(i);
    if (failed(expectShape(op, &weight, name, {n, k})) ||
        failed(expectShape(op, bias, biasName, {n})))
      return failure();
    Tensor &result = out.emplace_back(resultElementType(op, i), ArrayRef<int64_t>{m, n});
    std::vector<double> acc(n);
    for (int64_t r = 0; r < m; ++r) {
      matvec(weight.values.data(), input.values.data() + r * k,
             bias ? bias->values.data() : nullptr, n, k, acc);
      std::copy(acc.begin(), acc.end(), result.values.begin() + r * n);
    }
  }
  return success();
}

/// Per row and 128-column group: scale = max(amax / 448, 1e-12) (as f32, the
/// type it is stored in), q = e4m3(x / scale), nearest even, saturating.
LogicalResult evalQuantize(QuantizeOp op, Operands in, Results &out) {
  const Tensor &input = *in[0];
  int64_t m = input.dim(0), k = input.dim(1);
  int64_t groups = (k + moe::kScaleBlock - 1) / moe::kScaleBlock;
  out.emplace_back(resultElementType(op, 0), ArrayRef<int64_t>{m, k});
  out.emplace_back(resultElementType(op, 1), ArrayRef<int64_t>{m, groups});
  Tensor &q = out[out.size() - 2], &scales = out.back();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t begin = g * moe::kScaleBlock, end = std::min(k, begin + moe::kScaleBlock);
      double amax = 0.0;
      for (int64_t i = begin; i < end; ++i) {
        double x = std::fabs(input.values[r * k + i]);
        amax = std::isnan(x) || std::isnan(amax) ? kNaN : std::max(amax, x);
      }
      double scale = roundTo(scales.elementType, std::max(amax / moe::kE4M3Max, 1e-12));
      if (std::isnan(amax))
        scale = kNaN;
      scales.values[r * groups + g] = scale;
      for (int64_t i = begin; i < end; ++i)
        q.values[r * k + i] = roundTo(ElementType::F8E4M3FN, input.values[r * k + i] / scale);
    }
  return success();
}

/// The running rank's experts [r·L, (r+1)·L) of a tensor stacked along dim 0.
LogicalResult evalEPShard(EPShardOp op, Operands in, Results &out, int64_t epRank) {
  const Tensor &input = *in[0];
  int64_t epSize = static_cast<int64_t>(op.getEpSize());
  FailureOr<int64_t> rank = runningRank(op, epSize, epRank);
  if (failed(rank))
    return failure();
  int64_t local = input.dim(0) / epSize;
  SmallVector<int64_t> shape(input.shape.begin(), input.shape.end());
  shape[0] = local;
  int64_t perExpert = input.dim(0) ? input.numElements() / input.dim(0) : 0;
  out.emplace_back(input.elementType, ArrayRef<int64_t>(shape));
  std::copy_n(input.values.begin() + *rank * local * perExpert, local * perExpert,
              out.back().values.begin());
  return success();
}

} // namespace

LogicalResult evalMoEOp(Operation *op, Operands in, Results &out, int64_t epRank) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<LayerOp>([&](LayerOp o) { return evalLayer(o, in, out); })
      .Case<LinearOp>([&](LinearOp o) { return evalLinear(o, in, out); })
      .Case<MultiLinearOp>([&](MultiLinearOp o) { return evalMultiLinear(o, in, out); })
      .Case<RouteOp>([&](RouteOp o) { return evalRoute(o, in, out); })
      .Case<SortOp>([&](SortOp o) { return evalSort(o, in, out, epRank); })
      .Case<PermuteOp>([&](PermuteOp o) { return evalPermute(o, in, out); })
      .Case<GroupedMatmulOp>([&](GroupedMatmulOp o) { return evalGroupedMatmul(o, in, out); })
      .Case<ActivationOp>([&](ActivationOp o) { return evalActivation(o, in, out); })
      .Case<CombineOp>([&](CombineOp o) { return evalCombine(o, in, out, epRank); })
      .Case<EPShardOp>([&](EPShardOp o) { return evalEPShard(o, in, out, epRank); })
      .Case<QuantizeOp>([&](QuantizeOp o) { return evalQuantize(o, in, out); })
      .Case<AllReduceOp>([&](AllReduceOp o) -> LogicalResult {
        // One process runs one rank: the rank's partial sum, which the caller
        // adds up over the ranks (InterpretOptions::epRank).
        if (epRank < 0)
          return o.emitOpError() << "sums the partial outputs of " << o.getEpSize()
                                 << " expert-parallel ranks; the interpreter runs one rank at "
                                    "a time (moec-interp --ep-rank R gives rank R's partial sum)";
        out.push_back(*in[0]);
        return success();
      })
      .Default([](Operation *other) {
        return other->emitOpError("is not supported by the interpreter");
      });
}

} // namespace moec::interp::detail
