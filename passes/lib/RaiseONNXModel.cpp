//===- RaiseONNXModel.cpp - a whole-model ONNX export as a step program ----===//
//
// moe-raise-onnx-model: a function whose only argument is integer token ids
// [B, T] that an embedding Gather reads and whose only result is [B, T, V]
// logits (torch.onnx.export of a decoder's cache-free forward, after
// moe-raise-onnx made each MoE block a moe.layer) becomes the step program
// that the checkpoint importer builds:
//
//   @forward(input_ids, positions, sequences: [N]) -> logits [N, V]
//
// The forms each activation is matched in (RaiseONNXModel.h says how the
// walk goes; the attention side is RaiseONNXModelAttention.cpp):
//
//   embedding   Gather(table, input_ids, axis 0)             -> moe.embedding
//   RMSNorm     Mul(w, Mul(x, Reciprocal(Sqrt(Add(ReduceMean(Pow(x, 2), [-1],
//               keepdims 1), eps)))))  (hidden state, or per head)
//                                                             -> moe.rms_norm
//   projection  MatMul(x, W [in, out]) [+ b]                 -> moe.linear, W
//               transposed at compile time; a Split of one along its last
//               axis (per head on head views)                -> the rows' moe.linear
//   gated MLP   Mul(Mul(g, Sigmoid(g)), MatMul(x, Wu)), g = MatMul(x, Wg)
//                                                             -> moe.linear, silu epilogue
//   MoE block   Reshape(moe.layer(Reshape(x, [-1, H])), [B, T, H])
//   residual    Add(a, b) of two activations                 -> arith.addf
//   views       Reshape among [B·T, C], [B, T, C], [B, T, H, D], [B, 1, T, D],
//               Transpose [0, 2, 1, 3]                       -> the same value
//   otherwise   elementwise chains, last-axis reductions     -> moe.elementwise,
//               moe.reduce_rows (RaiseONNXModelGeneric.cpp)
//
// Every other value on the way from the logits back to input_ids (an op that
// mixes tokens, a view the step program has not) is an error at its node. What no longer reads anything is erased: the mask and
// position arithmetic, the routers moe-raise-onnx replaced, the shapes.
//
//===----------------------------------------------------------------------===//

#include "RaiseONNXModel.h"

#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>
#include <cstdio>

namespace moec {
#define GEN_PASS_DEF_MOERAISEONNXMODEL
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::raise_model;

namespace moec::raise_model {

namespace {

/// A constant of rank `rank` and static shape whose bytes are at hand, or a
/// splat.
bool isWeight(Value value, int64_t rank) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  DenseElementsAttr dense = denseElements(value);
  return type && type.getRank() == rank && type.hasStaticShape() &&
         (getConstantBytes(value) || (dense && dense.isSplat()));
}

RankedTensorType rowsOf(Value like, int64_t columns) {
  return RankedTensorType::get({ShapedType::kDynamic, columns},
                               cast<ShapedType>(like.getType()).getElementType());
}

/// The row-major bytes of a constant, a splat's repeated.
std::vector<char> allBytes(Value value) {
  if (std::optional<ArrayRef<char>> bytes = getConstantBytes(value))
    return std::vector<char>(bytes->begin(), bytes->end());
  DenseElementsAttr dense = denseElements(value);
  ArrayRef<char> one = dense.getRawData();
  std::vector<char> out;
  for (int64_t i = 0, n = dense.getNumElements(); i < n; ++i)
    out.insert(out.end(), one.begin(), one.end());
  return out;
}

/// Rows of a [R, C] constant: for each block b of `blockRows` rows, rows
/// [b·blockRows + begin, b·blockRows + begin + count) (a slice of every head).
Value selectRows(OpBuilder &builder, Location loc, Value weight, int64_t blockRows, int64_t begin,
                 int64_t count, StringRef name) {
  auto type = cast<RankedTensorType>(weight.getType());
  std::vector<char> bytes = allBytes(weight);
  int64_t rowBytes =
      elementBytes(type.getElementType()) * (type.getRank() == 2 ? type.getDimSize(1) : int64_t{1});
  int64_t blocks = type.getDimSize(0) / blockRows;
  std::vector<char> out;
  for (int64_t b = 0; b < blocks; ++b) {
    const char *first = bytes.data() + (b * blockRows + begin) * rowBytes;
    out.insert(out.end(), first, first + count * rowBytes);
  }
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = blocks * count;
  return makeConstant(builder, loc, RankedTensorType::get(shape, type.getElementType()), out, name);
}

} // namespace

//===----------------------------------------------------------------------===//
// The walk
//===----------------------------------------------------------------------===//

ModelRaiser::ModelRaiser(Value tokenIds, Value ids, Value positions, Value sequences,
                         Operation *insertBefore)
    : builder(insertBefore), tokenIds(tokenIds), ids(ids), positions(positions),
      sequences(sequences) {}

FailureOr<Act> ModelRaiser::activation(Value value) {
  if (hardFailure)
    return failure();
  if (auto it = acts.find(value); it != acts.end())
    return it->second;
  Operation *op = value.getDefiningOp();
  if (!op) {
    emitError(value.getLoc()) << "the logits read a function argument other than as token ids";
    hardFailure = true;
    return failure();
  }
  std::string why;
  FailureOr<Act> act = raise(value, why);
  // What no form matches is lowered generically, if it is elementwise or a
  // row reduction (not a rotary embedding's near miss: its reason says more).
  bool looksRotary = isa<ox::AddOp>(op) && def<ox::MulOp>(op->getOperand(0)) &&
                     def<ox::MulOp>(op->getOperand(1)) && rankOf(value) == 4;
  if (failed(act) && !hardFailure && !looksRotary &&
      (isGenericElementwise(op) || isRowReduction(op))) {
    std::string genericWhy;
    act = generic(value, genericWhy);
    if (failed(act))
      why += "; nor lowered generically: " + genericWhy;
  }
  if (failed(act)) {
    if (!hardFailure)
      emitError(op->getLoc()) << describeNode(op)
                              << " cannot be raised to the step program: " << why;
    hardFailure = true;
    return failure();
  }
  acts[value] = *act;
  return act;
}

FailureOr<Act> ModelRaiser::operand(Value value) {
  FailureOr<Act> act = activation(value);
  if (succeeded(act) && act->permuted) {
    emitError(value.getLoc()) << describeNode(value.getDefiningOp())
                              << " cannot be raised to the step program: its rotary columns are "
                                 "in interleaved order, which only attention scores may read";
    hardFailure = true;
    return failure();
  }
  return act;
}

FailureOr<Act> ModelRaiser::raise(Value value, std::string &why) {
  Operation *op = value.getDefiningOp();
  if (auto gather = dyn_cast<ox::GatherOp>(op))
    return embedding(gather, why);
  if (auto reshapeOp = dyn_cast<ox::ReshapeOp>(op))
    return reshape(reshapeOp, why);
  if (auto transposeOp = dyn_cast<ox::TransposeOp>(op))
    return transpose(transposeOp, why);
  if (auto matmul = dyn_cast<ox::MatMulOp>(op)) {
    if (rankOf(matmul.getB()) == 2)
      return projection(op, matmul, Value(), why);
    return attention(matmul, why);
  }
  if (auto addOp = dyn_cast<ox::AddOp>(op))
    return add(addOp, why);
  if (auto mulOp = dyn_cast<ox::MulOp>(op))
    return mul(mulOp, why);
  if (auto concatOp = dyn_cast<ox::ConcatOp>(op))
    return concat(concatOp, why);
  if (isa<ox::SplitOp>(op))
    return split(cast<OpResult>(value), why);
  if (auto layerOp = dyn_cast<moe::LayerOp>(op))
    return layer(layerOp, why);
  why = "no form of the step program computes it (embeddings, RMSNorms, projections, gated "
        "MLPs, MoE blocks, rotary embeddings, attention, residual sums and their views)";
  return failure();
}

//===----------------------------------------------------------------------===//
// Embedding, views, projections
//===----------------------------------------------------------------------===//

FailureOr<Act> ModelRaiser::embedding(ox::GatherOp op, std::string &why) {
  Value table = op.getData();
  if (op.getIndices() != tokenIds || normalizeAxis(op.getAxis().value_or(0), 2) != 0) {
    why = "a Gather that is not rows of a table by input_ids";
    return failure();
  }
  if (!isConstant(table) || rankOf(table) != 2 || staticDim(table, 1) == ShapedType::kDynamic) {
    why = "an embedding whose table is not a [V, H] constant";
    return failure();
  }
  int64_t hidden = staticDim(table, 1);
  Value step = moe::EmbeddingOp::create(builder, op.getLoc(), rowsOf(table, hidden), ids, table);
  return Act{step, Layout::Tokens, 1, hidden};
}

FailureOr<Act> ModelRaiser::reshape(ox::ReshapeOp op, std::string &why) {
  int64_t rank = rankOf(op.getResult());
  std::optional<SmallVector<Dim>> spec = shapeSpec(op.getShape());
  if (!spec || static_cast<int64_t>(spec->size()) != rank) {
    why = "a Reshape to a shape that is not made of B, T and numbers";
    return failure();
  }
  auto number = [](const Dim &d) { return d.kind == Dim::Const && (d.value > 0 || d.value == -1); };
  const SmallVector<Dim> &s = *spec;
  Layout layout;
  int64_t heads = 1, dim = -1;
  if (rank == 2 && s[0].is(-1) && number(s[1]) && s[1].value > 0) {
    layout = Layout::Flat;
    dim = s[1].value;
  } else if (rank == 3 && s[0].kind == Dim::Batch && s[1].kind == Dim::Tokens && number(s[2])) {
    layout = Layout::Tokens;
    dim = s[2].value;
  } else if (rank == 4 && s[0].kind == Dim::Batch && s[1].kind == Dim::Tokens && number(s[2]) &&
             number(s[3]) && !(s[2].is(-1) && s[3].is(-1))) {
    layout = Layout::TokenHeads;
    heads = s[2].value;
    dim = s[3].value;
  } else if (rank == 4 && s[0].kind == Dim::Batch && s[1].is(1) && s[2].kind == Dim::Tokens &&
             number(s[3])) {
    layout = Layout::HeadTokens;
    dim = s[3].value;
  } else {
    why = "a Reshape to a shape other than [-1, C], [B, T, C], [B, T, H, D] or [B, 1, T, D]";
    return failure();
  }
  FailureOr<Act> x = operand(op.getData());
  if (failed(x))
    return failure();
  if (!x->sameBytes()) {
    why = "a Reshape of a heads-major [B, H, T, D] value, which is no view of the token rows";
    return failure();
  }
  int64_t width = x->width();
  if (heads == -1)
    heads = dim > 0 && width % dim == 0 ? width / dim : -1;
  if (dim == -1)
    dim = heads > 0 && width % heads == 0 ? width / heads : -1;
  if (heads <= 0 || dim <= 0 || heads * dim != width) {
    why = "a Reshape of " + std::to_string(width) + " columns per token to another width";
    return failure();
  }
  return Act{x->step, layout, heads, dim};
}

FailureOr<Act> ModelRaiser::transpose(ox::TransposeOp op, std::string &why) {
  std::optional<ArrayRef<int64_t>> perm = op.getPerm();
  if (!perm || *perm != ArrayRef<int64_t>{0, 2, 1, 3}) {
    why = "a Transpose other than [0, 2, 1, 3] between [B, T, H, D] and [B, H, T, D]";
    return failure();
  }
  FailureOr<Act> x = operand(op.getData());
  if (failed(x))
    return failure();
  if (x->layout != Layout::TokenHeads && x->layout != Layout::HeadTokens) {
    why = "a Transpose of a value without heads";
    return failure();
  }
  Act result = *x;
  result.layout = x->layout == Layout::TokenHeads ? Layout::HeadTokens : Layout::TokenHeads;
  return result;
}

FailureOr<Act> ModelRaiser::projection(Operation *at, ox::MatMulOp matmul, Value bias,
                                       std::string &why) {
  // W [in, out], or Transpose(W' [out, in]) (a tied LM head reads the embedding so).
  Value weight = matmul.getB(), outMajor;
  if (auto t = def<ox::TransposeOp>(weight);
      t && t.getPerm() && *t.getPerm() == ArrayRef<int64_t>{1, 0} && isWeight(t.getData(), 2))
    outMajor = t.getData();
  if (!outMajor && !isWeight(weight, 2)) {
    why = "a MatMul by a [in, out] weight that is not a constant";
    return failure();
  }
  int64_t in = staticDim(weight, 0), out = staticDim(weight, 1);
  if (bias && (!isConstant(bias) || rankOf(bias) != 1 || staticDim(bias, 0) != out)) {
    why = "a projection's bias that is not a [" + std::to_string(out) + "] constant";
    return failure();
  }
  FailureOr<Act> x = operand(matmul.getA());
  if (failed(x))
    return failure();
  if (x->heads != 1 || x->width() != in) {
    why = "a projection of [" + std::to_string(in) + ", " + std::to_string(out) +
          "] applied to a value of " + std::to_string(x->heads) + " heads of " +
          std::to_string(x->dim) + " columns";
    return failure();
  }
  Value w = outMajor;
  if (!w) {
    std::string name = constantName(weight, "weight");
    name = StringRef(name).ends_with(".T") ? name.substr(0, name.size() - 2) : name + ".T";
    w = transposed(weight, name);
  }
  Value step = moe::LinearOp::create(builder, at->getLoc(), rowsOf(x->step, out), x->step, w, bias,
                                     /*epilogue=*/nullptr, /*epilogue_layout=*/nullptr);
  return Act{step, x->layout, 1, out};
}

FailureOr<Act> ModelRaiser::split(OpResult result, std::string &why) {
  auto op = cast<ox::SplitOp>(result.getOwner());
  int64_t rank = rankOf(op.getInput());
  int64_t last = staticDim(op.getInput(), rank - 1);
  if (rank < 2 || last == ShapedType::kDynamic ||
      normalizeAxis(op.getAxis().value_or(0), rank) != rank - 1) {
    why = "a Split along another axis than the last";
    return failure();
  }
  SmallVector<int64_t> sizes;
  if (!isa<NoneType>(op.getSplit().getType())) {
    std::optional<SmallVector<int64_t>> list = intList(op.getSplit());
    if (!list) {
      why = "a Split whose sizes are not constants";
      return failure();
    }
    sizes = *list;
  } else {
    int64_t parts = static_cast<int64_t>(op->getNumResults());
    sizes.assign(parts, last % parts == 0 ? last / parts : -1);
  }
  int64_t offset = 0;
  for (unsigned i = 0; i < result.getResultNumber(); ++i)
    offset += sizes[i];
  int64_t size = sizes[result.getResultNumber()];
  if (size <= 0 || llvm::any_of(sizes, [](int64_t s) { return s <= 0; })) {
    why = "a Split into parts of unknown sizes";
    return failure();
  }
  FailureOr<Act> x = operand(op.getInput());
  if (failed(x))
    return failure();
  auto linear = x->step.getDefiningOp<moe::LinearOp>();
  if (!linear || linear.getEpilogue() || !isWeight(linear.getWeight(), 2) ||
      (linear.getBias() && !isWeight(linear.getBias(), 1)) || x->dim != last) {
    why = "a Split of a value that is not a projection by a constant (only a projection's "
          "output columns can be split, by splitting its weight)";
    return failure();
  }
  std::string name = constantName(linear.getWeight(), "weight") + ".split" +
                     std::to_string(result.getResultNumber());
  Value weight = selectRows(builder, op.getLoc(), linear.getWeight(), x->dim, offset, size, name);
  Value bias = linear.getBias()
                   ? selectRows(builder, op.getLoc(), linear.getBias(), x->dim, offset, size,
                                constantName(linear.getBias(), "bias") + ".split" +
                                    std::to_string(result.getResultNumber()))
                   : Value();
  Value step = moe::LinearOp::create(builder, op.getLoc(), rowsOf(x->step, x->heads * size),
                                     linear.getInput(), weight, bias, nullptr, nullptr);
  return Act{step, x->layout, x->heads, size};
}

//===----------------------------------------------------------------------===//
// Sums and products: residuals, biases, RMSNorm, gated MLPs
//===----------------------------------------------------------------------===//

FailureOr<Act> ModelRaiser::add(ox::AddOp op, std::string &why) {
  // q·cos + rotate_half(q)·sin
  std::string ropeWhy;
  if (std::optional<RopeMatch> rope = matchRotary(op.getResult(), ropeWhy))
    return rotary(op, rope->source, *rope, 0, why);
  bool looksRotary = def<ox::MulOp>(op.getA()) && def<ox::MulOp>(op.getB()) && rankOf(op) == 4;
  for (auto [main, extra] : {std::pair(op.getA(), op.getB()), std::pair(op.getB(), op.getA())})
    if (auto matmul = def<ox::MatMulOp>(main);
        matmul && isConstant(extra) && rankOf(extra) == 1 && rankOf(matmul.getB()) == 2)
      return projection(op, matmul, extra, why);
  if (isConstant(op.getA()) || isConstant(op.getB())) {
    why = "an Add of a constant that is not a projection's bias";
    return failure();
  }
  if (looksRotary) {
    why = "not a rotary embedding: " + ropeWhy;
    return failure();
  }
  FailureOr<Act> a = operand(op.getA());
  if (failed(a))
    return failure();
  FailureOr<Act> b = operand(op.getB());
  if (failed(b))
    return failure();
  if (rankOf(op.getA()) != rankOf(op.getB()) || a->layout != b->layout || a->heads != b->heads ||
      a->dim != b->dim) {
    why = "an Add of activations of different shapes";
    return failure();
  }
  Value step = arith::AddFOp::create(builder, op.getLoc(), a->step, b->step);
  return Act{step, a->layout, a->heads, a->dim};
}

FailureOr<Act> ModelRaiser::mul(ox::MulOp op, std::string &why) {
  std::string normWhy, mlpWhy;
  FailureOr<Act> act = rmsNorm(op, normWhy);
  if (succeeded(act) || hardFailure)
    return act;
  act = gatedMLP(op, mlpWhy);
  if (succeeded(act) || hardFailure)
    return act;
  why = "not an RMSNorm (" + normWhy + ") nor a gated MLP (" + mlpWhy + ")";
  return failure();
}

FailureOr<Act> ModelRaiser::rmsNorm(ox::MulOp op, std::string &why) {
  // Mul(w, Mul(x, r)) in either order.
  Value weight;
  ox::MulOp normed;
  for (auto [w, n] : {std::pair(op.getA(), op.getB()), std::pair(op.getB(), op.getA())})
    if (isConstant(w) && rankOf(w) == 1 && def<ox::MulOp>(n)) {
      weight = w;
      normed = def<ox::MulOp>(n);
    }
  if (!weight) {
    why = "no rank-1 constant weight times a product";
    return failure();
  }
  why = "the product is not x · Reciprocal(Sqrt(...))";
  for (auto [x, r] :
       {std::pair(normed.getA(), normed.getB()), std::pair(normed.getB(), normed.getA())}) {
    auto reciprocal = def<ox::ReciprocalOp>(r);
    auto sqrt = reciprocal ? def<ox::SqrtOp>(reciprocal.getX()) : ox::SqrtOp();
    if (!sqrt)
      continue;
    auto sum = def<ox::AddOp>(sqrt.getX());
    ox::ReduceMeanOp mean;
    std::optional<double> eps;
    for (auto [m, e] : {std::pair(sum ? sum.getA() : Value(), sum ? sum.getB() : Value()),
                        std::pair(sum ? sum.getB() : Value(), sum ? sum.getA() : Value())})
      if (def<ox::ReduceMeanOp>(m)) {
        mean = def<ox::ReduceMeanOp>(m);
        eps = scalarConstant(e);
      }
    if (!mean) {
      why = "the square root is not of mean + epsilon";
      return failure();
    }
    if (!eps || !std::isfinite(*eps) || *eps < 0) {
      why = "epsilon is not a constant scalar >= 0";
      return failure();
    }
    int64_t rank = rankOf(x);
    if (mean.getKeepdims().value_or(1) != 1 || !isAxis(mean.getAxes(), rank - 1, rank)) {
      why = "the mean is not over the last axis with keepdims = 1";
      return failure();
    }
    auto pow = def<ox::PowOp>(mean.getData());
    if (!pow || pow.getX() != x) {
      why = "the mean is not of the normalised value's squares";
      return failure();
    }
    std::optional<double> exponent = scalarConstant(pow.getY());
    if (!exponent || *exponent != 2.0) {
      char text[32] = "not a constant";
      if (exponent)
        std::snprintf(text, sizeof(text), "%g", *exponent);
      why = std::string("Pow's exponent is ") + text + ", not 2";
      return failure();
    }
    int64_t size = staticDim(weight, 0);
    if (size != staticDim(x, rank - 1)) {
      why = "the weight's size differs from the normalised axis";
      return failure();
    }
    FailureOr<Act> input = operand(x);
    if (failed(input))
      return failure();
    if (input->dim != size) {
      why = "an RMSNorm of groups of " + std::to_string(size) + " columns in rows of " +
            std::to_string(input->dim);
      return failure();
    }
    Value step =
        moe::RMSNormOp::create(builder, op.getLoc(), input->step.getType(), input->step, weight,
                               builder.getF64FloatAttr(*eps), builder.getF64FloatAttr(0.0));
    return Act{step, input->layout, input->heads, input->dim};
  }
  return failure();
}

FailureOr<Act> ModelRaiser::gatedMLP(ox::MulOp op, std::string &why) {
  why = "not Mul(Mul(g, Sigmoid(g)), MatMul(x, Wu)) with g = MatMul(x, Wg)";
  for (auto [siluSide, upSide] :
       {std::pair(op.getA(), op.getB()), std::pair(op.getB(), op.getA())}) {
    auto silu = def<ox::MulOp>(siluSide);
    auto up = def<ox::MatMulOp>(upSide);
    if (!silu || !up)
      continue;
    Value g;
    for (auto [v, s] : {std::pair(silu.getA(), silu.getB()), std::pair(silu.getB(), silu.getA())})
      if (auto sigmoid = def<ox::SigmoidOp>(s); sigmoid && sigmoid.getX() == v)
        g = v;
    auto gate = def<ox::MatMulOp>(g);
    if (!gate)
      continue;
    if (gate.getA() != up.getA()) {
      why = "the gate and up projections read different values";
      return failure();
    }
    Value wg = gate.getB(), wu = up.getB();
    if (!isWeight(wg, 2) || !isWeight(wu, 2) || wg.getType() != wu.getType()) {
      why = "the gate and up weights are not constants of one [in, out] shape";
      return failure();
    }
    int64_t in = staticDim(wg, 0), inter = staticDim(wg, 1);
    FailureOr<Act> x = operand(gate.getA());
    if (failed(x))
      return failure();
    if (x->heads != 1 || x->width() != in) {
      why = "a gated MLP of a value of another width";
      return failure();
    }
    std::string gateName = constantName(wg, "gate_proj.weight.T");
    StringRef prefix = StringRef(gateName);
    std::string name = prefix.consume_back("gate_proj.weight.T") ? (prefix + "gate_up_proj").str()
                                                                 : "gate_up_weight";
    Value gateT = transposed(wg, constantName(wg, "gate") + ".rows");
    Value upT = transposed(wu, constantName(wu, "up") + ".rows");
    std::vector<char> bytes = allBytes(gateT), upBytes = allBytes(upT);
    bytes.insert(bytes.end(), upBytes.begin(), upBytes.end());
    auto stackedType =
        RankedTensorType::get({2 * inter, in}, cast<ShapedType>(wg.getType()).getElementType());
    Value stacked = makeConstant(builder, op.getLoc(), stackedType, bytes, name);
    MLIRContext *context = builder.getContext();
    Value step =
        moe::LinearOp::create(builder, op.getLoc(), rowsOf(x->step, inter), x->step, stacked,
                              Value(), moe::ActivationAttr::get(context, moe::ActivationKind::SiLU),
                              moe::GateUpLayoutAttr::get(context, moe::GateUpLayout::Concatenated));
    return Act{step, x->layout, 1, inter};
  }
  return failure();
}

//===----------------------------------------------------------------------===//
// MoE blocks
//===----------------------------------------------------------------------===//

FailureOr<Act> ModelRaiser::layer(moe::LayerOp op, std::string &why) {
  if (op.getRouterLogits() || op.getExpertIds() || op.getExpertWeights()) {
    why = "a moe.layer whose routing is computed outside it";
    return failure();
  }
  for (Value v : op->getOperands())
    if (v != op.getHidden() && !isConstant(v)) {
      why = "a moe.layer whose weights are not constants";
      return failure();
    }
  FailureOr<Act> x = operand(op.getHidden());
  if (failed(x))
    return failure();
  int64_t hidden = staticDim(op.getHidden(), 1);
  if (x->heads != 1 || x->width() != hidden) {
    why = "a moe.layer of a value of another width";
    return failure();
  }
  IRMapping mapping;
  mapping.map(op.getHidden(), x->step);
  Operation *clone = builder.clone(*op, mapping);
  return Act{clone->getResult(0), Layout::Flat, 1, hidden};
}

} // namespace moec::raise_model

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

/// A function of one [B, T] integer argument that an embedding Gather reads,
/// and one rank-3 float result.
bool isWholeModelExport(func::FuncOp function) {
  if (function.isExternal() || !function.getBody().hasOneBlock() ||
      function.getNumArguments() != 1 || function.getNumResults() != 1)
    return false;
  auto input = dyn_cast<RankedTensorType>(function.getArgumentTypes()[0]);
  auto output = dyn_cast<RankedTensorType>(function.getResultTypes()[0]);
  if (!input || input.getRank() != 2 || !input.getElementType().isInteger() || !output ||
      output.getRank() != 3 || !isa<FloatType>(output.getElementType()))
    return false;
  Value ids = function.getArgument(0);
  return llvm::any_of(ids.getUsers(), [&](Operation *user) {
    auto gather = dyn_cast<ox::GatherOp>(user);
    return gather && gather.getIndices() == ids;
  });
}

LogicalResult raiseFunction(func::FuncOp function) {
  MLIRContext *context = function.getContext();
  Block &body = function.front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto idsType = RankedTensorType::get({ShapedType::kDynamic}, IntegerType::get(context, 64));
  const char *names[] = {"input_ids", "positions", "sequences"};
  for (unsigned i = 0; i < 3; ++i) {
    NamedAttribute name(StringAttr::get(context, "onnx.name"), StringAttr::get(context, names[i]));
    if (failed(function.insertArgument(1 + i, idsType, DictionaryAttr::get(context, {name}),
                                       function.getLoc())))
      return failure();
  }
  ModelRaiser raiser(body.getArgument(0), body.getArgument(1), body.getArgument(2),
                     body.getArgument(3), ret);
  FailureOr<Act> logits = raiser.activation(ret.getOperand(0));
  if (failed(logits))
    return failure();
  if (logits->layout != Layout::Tokens)
    return ret.emitError() << "the result is not a [B, T, V] activation of the tokens";
  ret->setOperand(0, logits->step);
  // The [B, T] graph no longer reaches the result: erase it, users first.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (&op != ret && op.use_empty() && (isa<ox::ONNXDialect>(op.getDialect()) || isPure(&op)))
      op.erase();
  if (!body.getArgument(0).use_empty())
    return function.emitError() << "the token ids [B, T] are still read after the raise";
  if (failed(function.eraseArgument(0)))
    return failure();
  function.setFunctionType(
      FunctionType::get(context, function.getArgumentTypes(), {logits->step.getType()}));
  if (!function.getResultAttr(0, "onnx.name"))
    function.setResultAttr(0, "onnx.name", StringAttr::get(context, "logits"));
  // One KV-cache slot per attention, in program order.
  int64_t slot = 0;
  function.walk([&](moe::AttentionOp attention) {
    attention.setLayerAttr(IntegerAttr::get(IntegerType::get(context, 64), slot++));
  });
  auto module = function->getParentOfType<ModuleOp>();
  if (module && !SymbolTable::lookupSymbolIn(module, "forward"))
    (void)SymbolTable::setSymbolName(function, "forward");
  return success();
}

struct MoERaiseONNXModel : moec::impl::MoERaiseONNXModelBase<MoERaiseONNXModel> {
  void runOnOperation() override {
    for (func::FuncOp function : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>()))
      if (isWholeModelExport(function) && failed(raiseFunction(function)))
        return signalPassFailure();
  }
};

} // namespace
