//===- RaiseONNXModelAttention.cpp - rotary embedding and attention --------===//
//
// The attention half of moe-raise-onnx-model (RaiseONNXModel.h). The forms,
// as transformers' eager attention exports them:
//
//   rotary      q·C + rotate_half(q)·S, rotate_half(q) = Concat(Neg(q[h:]), q[:h])
//               (Llama, Qwen, Mixtral); Concat(x1·C − x2·S, x2·C + x1·S) with
//               (x1, x2) the halves of a Split (gpt-oss) or q's even and odd
//               columns (DeepSeek's interleaved rope, whose output the export
//               de-interleaves: the step program keeps moe.rotary's order, the
//               same for the query and the key, so q·k is unchanged); C and S
//               are RopeTables, their inverse frequencies and factor read out
//               of the constants. DeepSeek's query is Concat(q_nope, rope(q_pe))
//               of one Split: a rotary with an offset.
//   attention   MatMul(P, V), P = Softmax(Mul(MatMul(Q, Kᵀ), scale) + mask),
//               or with gpt-oss's sinks Slice(Softmax(Sub(C, ReduceMax(C))),
//               last column dropped), C = Concat(scores, Expand(sinks));
//               K and V repeated for grouped-query attention by
//               Reshape(Expand(Unsqueeze(k, 2))); DeepSeek's Kᵀ assembled by
//               two ScatterND into zeros: the nope key per head and the rope
//               key, one head expanded to all (key_shared).
//   mask        Where(cond, 0, very negative), cond an And of: the causal
//               kv <= q, a window kv > q − W, the packed-sequence test (always
//               true for positions 0..T−1), true; kv and q are the positions
//               Range(0, T) on the key and query axes.
//
//===----------------------------------------------------------------------===//

#include "RaiseONNXModel.h"

#include "moec/Dialect/Utils/ConstantData.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace moec;
using namespace moec::raise_model;

namespace {

/// Slice(data, [start], [end], [last axis], [step]).
struct LastAxisSlice {
  Value data;
  int64_t start = 0, end = 0, step = 1;
};

std::optional<LastAxisSlice> lastAxisSlice(Value value) {
  auto slice = def<ox::SliceOp>(value);
  if (!slice)
    return std::nullopt;
  int64_t rank = rankOf(slice.getData());
  std::optional<SmallVector<int64_t>> starts = intList(slice.getStarts());
  std::optional<SmallVector<int64_t>> ends = intList(slice.getEnds());
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1 ||
      isa<NoneType>(slice.getAxes().getType()) || !isAxis(slice.getAxes(), rank - 1, rank))
    return std::nullopt;
  LastAxisSlice result{slice.getData(), starts->front(), ends->front(), 1};
  if (!isa<NoneType>(slice.getSteps().getType())) {
    std::optional<SmallVector<int64_t>> steps = intList(slice.getSteps());
    if (!steps || steps->size() != 1)
      return std::nullopt;
    result.step = steps->front();
  }
  return result;
}

int64_t lastDim(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1))
    return ShapedType::kDynamic;
  return type.getDimSize(type.getRank() - 1);
}

bool isLastAxis(int64_t axis, Value value) {
  int64_t rank = rankOf(value);
  return normalizeAxis(axis, rank) == rank - 1;
}

/// m = Mul(data, table) in either order, the table an Unsqueeze.
bool product(Value m, Value &data, Value &table) {
  auto mul = def<ox::MulOp>(m);
  if (!mul)
    return false;
  for (auto [d, t] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())})
    if (def<ox::UnsqueezeOp>(t) && !def<ox::UnsqueezeOp>(d)) {
      data = d;
      table = t;
      return true;
    }
  return false;
}

/// One part of an attention key along its last axis: a [B, H, T, w] value, a
/// [B, 1, T, w] value that every head shares, or zeros.
struct KeyPiece {
  Value value; // null: zeros
  int64_t width = 0;
  bool shared = false;
};

} // namespace

//===----------------------------------------------------------------------===//
// Rotary embedding
//===----------------------------------------------------------------------===//

std::optional<RopeTable> ModelRaiser::matchTable(Value table, bool cosine, std::string &why) {
  StringRef kind = cosine ? "cos" : "sin";
  auto unsqueeze = def<ox::UnsqueezeOp>(table);
  if (!unsqueeze || rankOf(table) != 4 || !isAxis(unsqueeze.getAxes(), 1, 4)) {
    why = ("the " + kind + " table is not Unsqueeze(t, 1) of a [1, T, R] table").str();
    return std::nullopt;
  }
  Value v = unsqueeze.getData();
  RopeTable result;
  int64_t firstHalf = -1;
  if (std::optional<LastAxisSlice> slice = lastAxisSlice(v)) {
    if (slice->start != 0 || slice->step != 1 || slice->end <= 0) {
      why = ("the " + kind + " table is a slice other than a first part").str();
      return std::nullopt;
    }
    firstHalf = slice->end;
    v = slice->data;
  }
  if (auto mul = def<ox::MulOp>(v)) {
    bool found = false;
    for (auto [t, s] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())})
      if (std::optional<double> factor = scalarConstant(s); factor && !found) {
        result.scale = *factor;
        v = t;
        found = true;
      }
    if (!found) {
      why = ("the " + kind + " table is multiplied by something other than a constant").str();
      return std::nullopt;
    }
  }
  Value angles;
  if (cosine) {
    if (auto cos = def<ox::CosOp>(v))
      angles = cos.getInput();
  } else if (auto sin = def<ox::SinOp>(v)) {
    angles = sin.getInput();
  }
  if (!angles) {
    why = ("the " + kind + " table is not " + (cosine ? "Cos" : "Sin") + " of angles").str();
    return std::nullopt;
  }
  bool doubled = false;
  if (auto cat = def<ox::ConcatOp>(angles);
      cat && cat.getInputs().size() == 2 && cat.getInputs()[0] == cat.getInputs()[1] &&
      isLastAxis(static_cast<int64_t>(cat.getAxis()), angles)) {
    doubled = true;
    angles = cat.getInputs()[0];
  }
  auto transpose = def<ox::TransposeOp>(angles);
  auto matmul = transpose ? def<ox::MatMulOp>(transpose.getData()) : ox::MatMulOp();
  if (!matmul || !transpose.getPerm() || *transpose.getPerm() != ArrayRef<int64_t>{0, 2, 1}) {
    why = "the angles are not Transpose(MatMul(inv_freq, positions), [0, 2, 1])";
    return std::nullopt;
  }
  Value inv = matmul.getA();
  int64_t half = staticDim(inv, 1);
  if (rankOf(inv) != 3 || staticDim(inv, 0) != 1 || staticDim(inv, 2) != 1 ||
      half == ShapedType::kDynamic || !cast<ShapedType>(inv.getType()).getElementType().isF32() ||
      !(getConstantBytes(inv) || constantValues(inv))) {
    why = "the inverse frequencies are not a [1, R/2, 1] f32 constant";
    return std::nullopt;
  }
  if (rankOf(matmul.getB()) != 3 || staticDim(matmul.getB(), 0) != 1 ||
      staticDim(matmul.getB(), 1) != 1 || !isPositions(matmul.getB())) {
    why = "the angles are not of the positions 0..T-1";
    return std::nullopt;
  }
  if (firstHalf >= 0 && (!doubled || firstHalf != half)) {
    why = ("the " + kind + " table is a slice other than the first half of Concat(f, f)").str();
    return std::nullopt;
  }
  result.freqs = transpose.getResult();
  result.invFreq = inv;
  result.width = doubled && firstHalf < 0 ? 2 * half : half;
  return result;
}

std::optional<RopeMatch> ModelRaiser::matchRotary(Value value, std::string &why) {
  auto sameTables = [&](Value c, Value s, std::optional<RopeTable> &table) {
    std::optional<RopeTable> cos = matchTable(c, true, why);
    if (!cos)
      return false;
    std::optional<RopeTable> sin = matchTable(s, false, why);
    if (!sin)
      return false;
    if (cos->freqs != sin->freqs || cos->scale != sin->scale || cos->width != sin->width) {
      why = "the cos and sin tables are of different angles or factors";
      return false;
    }
    table = cos;
    return true;
  };

  // x·C + Concat(Neg(x[h:]), x[:h])·S
  if (auto add = def<ox::AddOp>(value)) {
    why = "not x·cos + rotate_half(x)·sin";
    for (auto [first, second] :
         {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())}) {
      Value x, c, rotated, s;
      if (!product(first, x, c) || !product(second, rotated, s))
        continue;
      auto cat = def<ox::ConcatOp>(rotated);
      if (!cat || cat.getInputs().size() != 2 ||
          !isLastAxis(static_cast<int64_t>(cat.getAxis()), rotated))
        continue;
      auto neg = def<ox::NegOp>(cat.getInputs()[0]);
      std::optional<LastAxisSlice> high = neg ? lastAxisSlice(neg.getX()) : std::nullopt;
      std::optional<LastAxisSlice> low = lastAxisSlice(cat.getInputs()[1]);
      int64_t d = lastDim(x);
      if (!high || !low || high->data != x || low->data != x || d == ShapedType::kDynamic ||
          d % 2 != 0 || high->start != d / 2 || high->end < d || high->step != 1 ||
          low->start != 0 || low->end != d / 2 || low->step != 1) {
        why = "rotate_half is not Concat(Neg(x[D/2:]), x[:D/2]) of the rotated value";
        return std::nullopt;
      }
      std::optional<RopeTable> table;
      if (!sameTables(c, s, table))
        return std::nullopt;
      if (table->width != d) {
        why = "the cos and sin tables are not as wide as the rotated heads";
        return std::nullopt;
      }
      return RopeMatch{x, *table, /*interleaved=*/false, d};
    }
    return std::nullopt;
  }

  // Concat(x1·C − x2·S, x2·C + x1·S)
  auto cat = def<ox::ConcatOp>(value);
  if (!cat || cat.getInputs().size() != 2 ||
      !isLastAxis(static_cast<int64_t>(cat.getAxis()), value)) {
    why = "not a Concat of two halves";
    return std::nullopt;
  }
  auto sub = def<ox::SubOp>(cat.getInputs()[0]);
  auto sum = def<ox::AddOp>(cat.getInputs()[1]);
  Value x1, c1, x2, s1;
  if (!sub || !sum || !product(sub.getA(), x1, c1) || !product(sub.getB(), x2, s1)) {
    why = "not Concat(x1·cos - x2·sin, x2·cos + x1·sin)";
    return std::nullopt;
  }
  bool matched = false;
  for (auto [first, second] :
       {std::pair(sum.getA(), sum.getB()), std::pair(sum.getB(), sum.getA())}) {
    Value y2, c2, y1, s2;
    if (product(first, y2, c2) && product(second, y1, s2) && y1 == x1 && y2 == x2 && c1 == c2 &&
        s1 == s2)
      matched = true;
  }
  if (!matched) {
    why = "not Concat(x1·cos - x2·sin, x2·cos + x1·sin)";
    return std::nullopt;
  }
  Value source;
  bool interleaved = false;
  auto r1 = dyn_cast<OpResult>(x1), r2 = dyn_cast<OpResult>(x2);
  auto splitOp = r1 ? dyn_cast<ox::SplitOp>(r1.getOwner()) : ox::SplitOp();
  if (splitOp && r2 && r2.getOwner() == splitOp && r1.getResultNumber() == 0 &&
      r2.getResultNumber() == 1 && splitOp->getNumResults() == 2 &&
      isLastAxis(static_cast<int64_t>(splitOp.getAxis().value_or(0)), splitOp.getInput()) &&
      lastDim(x1) == lastDim(x2)) {
    source = splitOp.getInput(); // halves
  } else {
    std::optional<LastAxisSlice> even = lastAxisSlice(x1), odd = lastAxisSlice(x2);
    int64_t d = even ? lastDim(even->data) : ShapedType::kDynamic;
    if (!even || !odd || even->data != odd->data || d == ShapedType::kDynamic || even->start != 0 ||
        odd->start != 1 || even->step != 2 || odd->step != 2 || even->end < d || odd->end < d) {
      why = "the rotated pairs are neither a Split's halves nor the even and odd columns";
      return std::nullopt;
    }
    source = even->data;
    interleaved = true;
  }
  int64_t d = lastDim(source);
  std::optional<RopeTable> table;
  if (!sameTables(c1, s1, table))
    return std::nullopt;
  if (d == ShapedType::kDynamic || d % 2 != 0 || table->width != d / 2) {
    why = "the cos and sin tables are not half as wide as the rotated heads";
    return std::nullopt;
  }
  return RopeMatch{source, *table, interleaved, d};
}

FailureOr<Act> ModelRaiser::rotary(Operation *at, Value source, const RopeMatch &rope,
                                   int64_t offset, std::string &why) {
  FailureOr<Act> x = operand(source);
  if (failed(x))
    return failure();
  if (x->layout != Layout::HeadTokens || offset + rope.rotated != x->dim) {
    why = "a rotary embedding of a value that is not [B, H, T, D] heads";
    return failure();
  }
  Value inv = invFreqs.lookup(rope.table.invFreq);
  if (!inv) {
    inv = reshaped(rope.table.invFreq, {rope.rotated / 2}, "rotary.inv_freq");
    if (!inv) {
      why = "the inverse frequencies cannot be read";
      return failure();
    }
    invFreqs[rope.table.invFreq] = inv;
  }
  Value step = moe::RotaryOp::create(
      builder, at->getLoc(), x->step.getType(), x->step, positions, inv,
      builder.getI64IntegerAttr(x->dim), builder.getI64IntegerAttr(offset),
      builder.getBoolAttr(rope.interleaved), builder.getF64FloatAttr(rope.table.scale));
  Act result = *x;
  result.step = step;
  result.permuted = rope.interleaved;
  return result;
}

FailureOr<Act> ModelRaiser::concat(ox::ConcatOp op, std::string &why) {
  std::string ropeWhy;
  if (std::optional<RopeMatch> rope = matchRotary(op.getResult(), ropeWhy))
    return rotary(op, rope->source, *rope, 0, why);
  // DeepSeek's query: Concat(Split(q)#0, rotary(Split(q)#1)).
  if (op.getInputs().size() == 2 &&
      isLastAxis(static_cast<int64_t>(op.getAxis()), op.getResult())) {
    auto head = dyn_cast<OpResult>(op.getInputs()[0]);
    auto splitOp = head ? dyn_cast<ox::SplitOp>(head.getOwner()) : ox::SplitOp();
    std::string tailWhy;
    std::optional<RopeMatch> rope = matchRotary(op.getInputs()[1], tailWhy);
    if (splitOp && head.getResultNumber() == 0 && splitOp->getNumResults() == 2 && rope &&
        rope->source == splitOp->getResult(1) &&
        isLastAxis(static_cast<int64_t>(splitOp.getAxis().value_or(0)), splitOp.getInput()))
      return rotary(op, splitOp.getInput(), *rope, lastDim(head), why);
    if (splitOp && !rope)
      ropeWhy = tailWhy;
  }
  why = "a Concat that is not a rotary embedding: " + ropeWhy;
  return failure();
}

//===----------------------------------------------------------------------===//
// Masks
//===----------------------------------------------------------------------===//

namespace {

struct MaskMatcher {
  ModelRaiser &raiser;
  bool causal = false;
  int64_t window = 0;
  std::string why;

  static Value skipExpand(Value value) {
    while (auto expand = def<ox::ExpandOp>(value))
      value = expand.getInput();
    return value;
  }

  /// The positions along the key axis [1, 1, 1, T] or the query axis [1, 1, T, 1].
  bool isIndex(Value value, int64_t axis) {
    if (rankOf(value) != 4)
      return false;
    for (int64_t i = 0; i < 4; ++i)
      if (i != axis && staticDim(value, i) != 1)
        return false;
    return raiser.isPositions(value);
  }

  LogicalResult match(Value mask) {
    auto where = def<ox::WhereOp>(skipExpand(mask));
    std::optional<double> keep = where ? scalarConstant(where.getX()) : std::nullopt;
    std::optional<double> drop = where ? scalarConstant(where.getY()) : std::nullopt;
    if (!where || !keep || *keep != 0.0 || !drop || *drop > -1e30) {
      why = "the mask is not Where(condition, 0, a very negative number)";
      return failure();
    }
    if (failed(condition(where.getCondition())))
      return failure();
    if (!causal) {
      why = "the mask has no causal term (key position <= query position)";
      return failure();
    }
    return success();
  }

  LogicalResult condition(Value value) {
    value = skipExpand(value);
    if (auto both = def<ox::AndOp>(value))
      return success(succeeded(condition(both.getA())) && succeeded(condition(both.getB())));
    if (std::optional<double> constant = scalarConstant(value); constant && *constant != 0.0)
      return success();
    if (auto le = def<ox::LessOrEqualOp>(value);
        le && isIndex(le.getA(), 3) && isIndex(le.getB(), 2)) {
      causal = true;
      return success();
    }
    if (auto gt = def<ox::GreaterOp>(value)) {
      auto sub = def<ox::SubOp>(gt.getB());
      std::optional<double> w = sub ? scalarConstant(sub.getB()) : std::nullopt;
      if (sub && isIndex(gt.getA(), 3) && isIndex(sub.getA(), 2) && w && *w >= 1 &&
          *w == std::floor(*w) && window == 0) {
        window = static_cast<int64_t>(*w);
        return success();
      }
    }
    // transformers' packed-sequence test: the same cumulative count of
    // position restarts at the query and the key, true for positions 0..T-1.
    if (auto eq = def<ox::EqualOp>(value)) {
      auto a = def<ox::GatherNDOp>(eq.getA()), b = def<ox::GatherNDOp>(eq.getB());
      auto count = a ? def<ox::CumSumOp>(a.getData()) : ox::CumSumOp();
      Value restarts = count ? count.getX() : Value();
      if (auto cast = def<ox::CastOp>(restarts))
        restarts = cast.getInput();
      auto notOp = def<ox::NotOp>(restarts);
      auto step = notOp ? def<ox::EqualOp>(notOp.getX()) : ox::EqualOp();
      if (b && count && a.getData() == b.getData() && step && isScalar(step.getB(), 1) &&
          def<ox::SubOp>(step.getA()))
        return success();
    }
    why = "a mask term other than causal (kv <= q), a sliding window (kv > q - W), the "
          "packed-sequence test or true";
    return failure();
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// Reshape(Expand(Unsqueeze(k, 2), [B, Hkv, n, T, D]), [B, Hkv·n, T, D]): k
/// repeated for grouped-query attention; `repeat` = n. Anything else is itself.
Value unrepeated(ModelRaiser &raiser, Value value, int64_t &repeat) {
  repeat = 1;
  auto reshape = def<ox::ReshapeOp>(value);
  auto expand = reshape ? def<ox::ExpandOp>(reshape.getData()) : ox::ExpandOp();
  auto unsqueeze = expand ? def<ox::UnsqueezeOp>(expand.getInput()) : ox::UnsqueezeOp();
  if (!unsqueeze || rankOf(unsqueeze.getData()) != 4 || !isAxis(unsqueeze.getAxes(), 2, 5))
    return value;
  std::optional<SmallVector<Dim>> wide = raiser.shapeSpec(expand.getShape());
  std::optional<SmallVector<Dim>> flat = raiser.shapeSpec(reshape.getShape());
  Value k = unsqueeze.getData();
  int64_t heads = staticDim(k, 1), d = staticDim(k, 3);
  if (!wide || !flat || wide->size() != 5 || flat->size() != 4 || heads == ShapedType::kDynamic)
    return value;
  const SmallVector<Dim> &w = *wide, &f = *flat;
  if (w[0].kind != Dim::Batch || !w[1].is(heads) || w[2].kind != Dim::Const || w[2].value < 1 ||
      w[3].kind != Dim::Tokens || !w[4].is(d) || f[0].kind != Dim::Batch ||
      !f[1].is(heads * w[2].value) || f[2].kind != Dim::Tokens || !f[3].is(d))
    return value;
  repeat = w[2].value;
  return k;
}

} // namespace

FailureOr<Act> ModelRaiser::attention(ox::MatMulOp op, std::string &why) {
  Value probs = op.getA(), valueSide = op.getB();
  if (rankOf(probs) != 4 || rankOf(valueSide) != 4) {
    why = "a MatMul that is neither a projection by an [in, out] weight nor attention "
          "probabilities times values";
    return failure();
  }
  // The probabilities, with gpt-oss's sink column dropped.
  Value scores, sinks;
  if (auto softmax = def<ox::SoftmaxOp>(probs)) {
    if (!isAttrAxis(softmax.getAxis(), -1, 3, 4)) {
      why = "a Softmax over another axis than the keys";
      return failure();
    }
    scores = softmax.getInput();
  } else if (std::optional<LastAxisSlice> kept = lastAxisSlice(probs)) {
    auto softmax = def<ox::SoftmaxOp>(kept->data);
    Value columns = softmax ? softmax.getInput() : Value();
    if (auto shifted = def<ox::SubOp>(columns)) {
      auto max = def<ox::ReduceMaxOp>(shifted.getB());
      if (!max || max.getData() != shifted.getA() || max.getKeepdims().value_or(1) != 1 ||
          !isAxis(max.getAxes(), 3, 4)) {
        why = "the sink column's max is not ReduceMax over the keys";
        return failure();
      }
      columns = shifted.getA();
    }
    auto cat = def<ox::ConcatOp>(columns);
    auto expand =
        cat && cat.getInputs().size() == 2 ? def<ox::ExpandOp>(cat.getInputs()[1]) : ox::ExpandOp();
    if (!softmax || !isAttrAxis(softmax.getAxis(), -1, 3, 4) || kept->start != 0 ||
        kept->end != -1 || kept->step != 1 || !cat ||
        !isLastAxis(static_cast<int64_t>(cat.getAxis()), columns) || !expand) {
      why = "attention probabilities that are neither Softmax(scores) nor that with a sink "
            "column appended and dropped";
      return failure();
    }
    sinks = expand.getInput();
    if (rankOf(sinks) != 4 || !isConstant(sinks) || staticDim(sinks, 0) != 1 ||
        staticDim(sinks, 2) != 1 || staticDim(sinks, 3) != 1) {
      why = "the sinks are not a [1, H, 1, 1] constant";
      return failure();
    }
    scores = cat.getInputs()[0];
  } else {
    why = "attention probabilities that are not a Softmax";
    return failure();
  }

  // scores = scale · Q·Kᵀ + mask
  auto add = def<ox::AddOp>(scores);
  if (!add) {
    why = "attention scores without a mask (moe.attention is causal)";
    return failure();
  }
  MaskMatcher mask{*this};
  Value scaled;
  for (auto [s, m] : {std::pair(add.getA(), add.getB()), std::pair(add.getB(), add.getA())}) {
    if (scaled || rankOf(m) != 4 || !def<ox::WhereOp>(MaskMatcher::skipExpand(m)))
      continue;
    if (failed(mask.match(m))) {
      why = mask.why;
      return failure();
    }
    scaled = s;
  }
  if (!scaled) {
    why = "attention scores without a mask (moe.attention is causal)";
    return failure();
  }
  double scale = 1.0;
  Value qk = scaled;
  if (auto mul = def<ox::MulOp>(scaled)) {
    for (auto [v, s] : {std::pair(mul.getA(), mul.getB()), std::pair(mul.getB(), mul.getA())})
      if (std::optional<double> factor = scalarConstant(s); factor && qk == scaled) {
        scale = *factor;
        qk = v;
      }
  } else if (auto div = def<ox::DivOp>(scaled)) {
    if (std::optional<double> divisor = scalarConstant(div.getB())) {
      scale = 1.0 / *divisor;
      qk = div.getA();
    }
  }
  auto qkOp = def<ox::MatMulOp>(qk);
  if (!qkOp || !std::isfinite(scale) || scale <= 0) {
    why = "attention scores that are not a positive constant times MatMul(Q, Kᵀ)";
    return failure();
  }

  // The key: Kᵀ of one value, of a Concat, or of DeepSeek's scatters.
  SmallVector<KeyPiece> pieces;
  std::function<LogicalResult(Value)> keyPieces, scatterPieces;
  keyPieces = [&](Value k) -> LogicalResult { // k [B, H, T, D]
    if (auto cat = def<ox::ConcatOp>(k);
        cat && isLastAxis(static_cast<int64_t>(cat.getAxis()), k)) {
      for (Value part : cat.getInputs())
        if (failed(keyPieces(part)))
          return failure();
      return success();
    }
    if (auto t = def<ox::TransposeOp>(k);
        t && t.getPerm() && *t.getPerm() == ArrayRef<int64_t>{3, 1, 2, 0})
      return scatterPieces(t.getData());
    if (auto zeros = def<ox::ConstantOfShapeOp>(k)) {
      std::optional<double> fill = 0.0;
      if (zeros.getValue())
        fill = cast<DenseElementsAttr>(*zeros.getValue()).getNumElements() == 1
                   ? std::optional(cast<DenseElementsAttr>(*zeros.getValue())
                                       .getSplatValue<APFloat>()
                                       .convertToDouble())
                   : std::nullopt;
      if (!fill || *fill != 0.0 || lastDim(k) == ShapedType::kDynamic)
        return failure();
      pieces.push_back({Value(), lastDim(k), false});
      return success();
    }
    if (auto expand = def<ox::ExpandOp>(k); expand && rankOf(expand.getInput()) == 4 &&
                                            staticDim(expand.getInput(), 1) == 1 &&
                                            staticDim(k, 1) != 1) {
      pieces.push_back({expand.getInput(), lastDim(k), true});
      return success();
    }
    pieces.push_back({k, lastDim(k), false});
    return success();
  };
  scatterPieces = [&](Value s) -> LogicalResult { // s [D, H, T, B]
    if (auto t = def<ox::TransposeOp>(s);
        t && t.getPerm() && *t.getPerm() == ArrayRef<int64_t>{3, 1, 2, 0})
      return keyPieces(t.getData());
    auto scatter = def<ox::ScatterNDOp>(s);
    if (!scatter || scatter.getReduction().value_or("none") != "none" ||
        failed(scatterPieces(scatter.getData())))
      return failure();
    // indices: Unsqueeze(Slice(Range(0, n, 1), [a], [b]), -1): rows a..b-1.
    auto unsqueeze = def<ox::UnsqueezeOp>(scatter.getIndices());
    std::optional<LastAxisSlice> rows =
        unsqueeze ? lastAxisSlice(unsqueeze.getData()) : std::nullopt;
    auto range = rows ? def<ox::RangeOp>(rows->data) : ox::RangeOp();
    if (!range || !isAxis(unsqueeze.getAxes(), 1, 2) || rows->step != 1 ||
        !scalarDim(range.getStart()).is(0) || !scalarDim(range.getDelta()).is(1))
      return failure();
    Dim limit = scalarDim(range.getLimit());
    if (limit.kind != Dim::Const)
      return failure();
    int64_t begin = rows->start, end = std::min(rows->end, limit.value);
    auto updates = def<ox::TransposeOp>(scatter.getUpdates());
    if (!updates || !updates.getPerm() || *updates.getPerm() != ArrayRef<int64_t>{3, 1, 2, 0} ||
        lastDim(updates.getData()) != end - begin)
      return failure();
    // The rows must fall on zeros: split the zero piece they lie in.
    int64_t at = 0;
    for (size_t i = 0; i < pieces.size(); at += pieces[i].width, ++i) {
      if (pieces[i].value || begin < at || end > at + pieces[i].width)
        continue;
      KeyPiece zero = pieces[i];
      SmallVector<KeyPiece> before(pieces.begin(), pieces.begin() + i);
      SmallVector<KeyPiece> after(pieces.begin() + i + 1, pieces.end());
      pieces = before;
      if (begin > at)
        pieces.push_back({Value(), begin - at, false});
      if (failed(keyPieces(updates.getData())))
        return failure();
      if (at + zero.width > end)
        pieces.push_back({Value(), at + zero.width - end, false});
      pieces.append(after);
      return success();
    }
    return failure();
  };
  LogicalResult keyFound = failure();
  if (auto t = def<ox::TransposeOp>(qkOp.getB()); t && t.getPerm()) {
    if (*t.getPerm() == ArrayRef<int64_t>{0, 1, 3, 2})
      keyFound = keyPieces(t.getData());
    else if (*t.getPerm() == ArrayRef<int64_t>{3, 1, 0, 2})
      keyFound = scatterPieces(t.getData());
  }
  if (failed(keyFound) || pieces.empty() || pieces.size() > 2 || !pieces[0].value ||
      pieces[0].shared || (pieces.size() == 2 && (!pieces[1].value || !pieces[1].shared))) {
    why = "a key that is neither Transpose(K, [0, 1, 3, 2]) of heads nor per-head keys followed "
          "by one key every head shares";
    return failure();
  }

  // Grouped-query repeats, then the step values.
  int64_t keyRepeat, valueRepeat;
  Value key = unrepeated(*this, pieces[0].value, keyRepeat);
  Value value = unrepeated(*this, valueSide, valueRepeat);
  FailureOr<Act> q = activation(qkOp.getA());
  if (failed(q))
    return failure();
  FailureOr<Act> k = activation(key);
  if (failed(k))
    return failure();
  FailureOr<Act> v = operand(value);
  if (failed(v))
    return failure();
  FailureOr<Act> shared = Act();
  if (pieces.size() == 2 && failed(shared = activation(pieces[1].value)))
    return failure();
  if (q->layout != Layout::HeadTokens || k->layout != Layout::HeadTokens ||
      v->layout != Layout::HeadTokens ||
      (pieces.size() == 2 && (shared->layout != Layout::HeadTokens || shared->heads != 1))) {
    why = "attention of values that are not [B, H, T, D] heads";
    return failure();
  }
  int64_t sharedWidth = pieces.size() == 2 ? shared->dim : 0;
  if (k->heads != v->heads || keyRepeat != valueRepeat || k->heads * keyRepeat != q->heads ||
      k->dim + sharedWidth != q->dim) {
    why = "attention of " + std::to_string(q->heads) + " query heads of " + std::to_string(q->dim) +
          " columns and keys or values that do not fit them";
    return failure();
  }
  bool keyPermuted = pieces.size() == 2 ? shared->permuted : k->permuted;
  if (q->permuted != keyPermuted || (pieces.size() == 2 && k->permuted)) {
    why = "a query and key whose rotary columns are in different orders";
    return failure();
  }
  Value sinkValues;
  if (sinks) {
    if (staticDim(sinks, 1) != q->heads) {
      why = "sinks of another head count than the query's";
      return failure();
    }
    sinkValues = reshaped(sinks, {q->heads}, constantName(sinks, "sinks"));
  }
  Value step = moe::AttentionOp::create(
      builder, op.getLoc(),
      RankedTensorType::get({ShapedType::kDynamic, q->heads * v->dim},
                            cast<ShapedType>(q->step.getType()).getElementType()),
      q->step, k->step, v->step, positions, sequences, pieces.size() == 2 ? shared->step : Value(),
      sinkValues, builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(q->heads),
      builder.getI64IntegerAttr(k->heads), builder.getF64FloatAttr(scale),
      builder.getI64IntegerAttr(mask.window));
  return Act{step, Layout::HeadTokens, q->heads, v->dim};
}
