//===- RaiseONNXModelGeneric.cpp - what no form matches, lowered generically ===//
//
// Where an activation's node is no known form (an RMSNorm written another
// way, a Gemma-style (1 + w) scale, a GELU spelled out, ...), it is lowered
// generically rather than rejected:
//
//   elementwise  Add, Sub, Mul, Div, Neg, Sqrt, Reciprocal, Pow, Exp, Log,
//                Tanh, Sigmoid, Erf, Abs, Relu, Max, Min, Cast to its own
//                type                                         -> moe.elementwise
//   reduction    ReduceMean | ReduceSum | ReduceMax over the last axis,
//                keepdims 1                                   -> moe.reduce_rows
//
// A chain of elementwise nodes is fused into one moe.elementwise: a node
// joins the chain when every user of its value is in the chain and it is no
// known form of its own (an RMSNorm, a gated MLP, a projection's bias, which
// stay what they are). The chain's inputs are activations of one view
// (token-major [N, C], or per-row columns [N, 1] that a reduction made),
// row-vector constants of the last axis (tiled over the heads), and scalar
// constants, which become arith.constant in the body. What mixes tokens (a
// reduction over another axis, a broadcast across views) stays an error at
// its node.
//
//===----------------------------------------------------------------------===//

#include "RaiseONNXModel.h"

#include "moec/Dialect/Utils/ConstantData.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace moec::raise_model {

namespace {

/// [?, columns] of `like`'s element type.
RankedTensorType rowsOf(Value like, int64_t columns) {
  return RankedTensorType::get({ShapedType::kDynamic, columns},
                               cast<ShapedType>(like.getType()).getElementType());
}

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// Keepdims and axes of a ReduceMean, ReduceSum or ReduceMax, and its kind.
template <typename OpTy>
std::optional<moe::ReduceKind> reduceOf(Operation *op, moe::ReduceKind kind, Value &data,
                                        Value &axes, int64_t &keepdims) {
  auto reduce = dyn_cast<OpTy>(op);
  if (!reduce)
    return std::nullopt;
  data = reduce.getData();
  axes = reduce.getAxes();
  keepdims = reduce.getKeepdims().value_or(1);
  return kind;
}

/// The ops of a constant row: a splat resized, or the bytes repeated `times`.
Value tiledRow(OpBuilder &builder, Value constant, int64_t width, int64_t times, StringRef name) {
  auto element = cast<ShapedType>(constant.getType()).getElementType();
  auto type = RankedTensorType::get({width * times}, element);
  if (std::optional<ArrayRef<char>> bytes = getConstantBytes(constant)) {
    std::vector<char> out;
    for (int64_t i = 0; i < times; ++i)
      out.insert(out.end(), bytes->begin(), bytes->end());
    return makeConstant(builder, constant.getLoc(), type, out, name);
  }
  DenseElementsAttr dense = denseElements(constant);
  if (!dense || !dense.isSplat())
    return Value();
  return arith::ConstantOp::create(builder, constant.getLoc(), type, dense.resizeSplat(type));
}

} // namespace

bool isGenericElementwise(Operation *op) {
  if (!op || op->getNumResults() != 1 || !isFloatTensor(op->getResult(0)))
    return false;
  if (auto cast = dyn_cast<ox::CastOp>(op))
    return cast.getInput().getType() == cast.getResult().getType() ||
           (isFloatTensor(cast.getInput()) &&
            getElementTypeOrSelf(cast.getInput().getType()) ==
                getElementTypeOrSelf(cast.getResult().getType()));
  if (isa<ox::MaxOp, ox::MinOp>(op))
    return op->getNumOperands() >= 1 && llvm::all_of(op->getOperands(), isFloatTensor);
  return isa<ox::AddOp, ox::SubOp, ox::MulOp, ox::DivOp, ox::NegOp, ox::SqrtOp, ox::ReciprocalOp,
             ox::PowOp, ox::ExpOp, ox::LogOp, ox::TanhOp, ox::SigmoidOp, ox::ErfOp, ox::AbsOp,
             ox::ReluOp>(op) &&
         llvm::all_of(op->getOperands(), isFloatTensor);
}

bool isRowReduction(Operation *op) {
  return op && isa<ox::ReduceMeanOp, ox::ReduceSumOp, ox::ReduceMaxOp>(op);
}

FailureOr<Act> ModelRaiser::generic(Value value, std::string &why) {
  Operation *op = value.getDefiningOp();
  if (isRowReduction(op))
    return reduction(op, why);
  if (isGenericElementwise(op))
    return elementwise(op, why);
  why = "no generic lowering either (elementwise ops and last-axis reductions)";
  return failure();
}

FailureOr<Act> ModelRaiser::reduction(Operation *op, std::string &why) {
  Value data, axes;
  int64_t keepdims = 1;
  std::optional<moe::ReduceKind> kind =
      reduceOf<ox::ReduceMeanOp>(op, moe::ReduceKind::Mean, data, axes, keepdims);
  if (!kind)
    kind = reduceOf<ox::ReduceSumOp>(op, moe::ReduceKind::Sum, data, axes, keepdims);
  if (!kind)
    kind = reduceOf<ox::ReduceMaxOp>(op, moe::ReduceKind::Max, data, axes, keepdims);
  int64_t rank = rankOf(data);
  if (!kind || keepdims != 1 || rank < 2 || !isAxis(axes, rank - 1, rank)) {
    why = "a reduction over another axis than the last with keepdims = 1 (only each token's "
          "row reduces on its own)";
    return failure();
  }
  FailureOr<Act> x = operand(data);
  if (failed(x))
    return failure();
  if (x->heads != 1) {
    why = "a reduction of each of " + std::to_string(x->heads) +
          " heads' columns (only whole token rows reduce)";
    return failure();
  }
  Value step = moe::ReduceRowsOp::create(builder, op->getLoc(), rowsOf(x->step, 1), x->step,
                                         moe::ReduceKindAttr::get(builder.getContext(), *kind));
  return Act{step, x->layout, 1, 1};
}

/// The chain's inputs, in order of first use, and each one's block argument.
struct ChainInput {
  Value onnx;   // the ONNX value
  Value step;   // the operand of moe.elementwise
  std::optional<double> scalar; // a scalar constant, inlined in the body
};

FailureOr<Act> ModelRaiser::elementwise(Operation *root, std::string &why) {
  // The chain: the root and every elementwise node all of whose users are in it.
  llvm::SetVector<Operation *> chain;
  chain.insert(root);
  llvm::DenseSet<Operation *> tried;
  for (bool grown = true; grown;) {
    grown = false;
    for (size_t i = 0; i < chain.size(); ++i)
      for (Value v : chain[i]->getOperands()) {
        Operation *node = v.getDefiningOp();
        if (!node || chain.contains(node) || tried.contains(node) || isConstant(v) ||
            acts.count(v) || !isGenericElementwise(node) ||
            !llvm::all_of(v.getUsers(), [&](Operation *user) { return chain.contains(user); }))
          continue;
        tried.insert(node);
        // A known form (an RMSNorm, a gated MLP, a bias, a residual) stays one.
        if (isa<ox::MulOp, ox::AddOp>(node)) {
          std::string formWhy;
          FailureOr<Act> known = raise(v, formWhy);
          if (hardFailure)
            return failure();
          if (succeeded(known)) {
            acts[v] = *known;
            continue;
          }
        }
        chain.insert(node);
        grown = true;
      }
  }
  SmallVector<Operation *> nodes(chain.begin(), chain.end());
  llvm::sort(nodes, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });

  // The inputs: activations of one view, constant rows and scalars.
  SmallVector<ChainInput> inputs;
  llvm::DenseMap<Value, unsigned> inputOf;
  std::optional<Act> main;
  SmallVector<std::pair<Value, Act>> activations;
  int64_t rank = rankOf(root->getResult(0));
  for (Operation *node : nodes)
    for (Value v : node->getOperands()) {
      if (inputOf.count(v) || (v.getDefiningOp() && chain.contains(v.getDefiningOp())))
        continue;
      inputOf[v] = inputs.size();
      ChainInput &input = inputs.emplace_back();
      input.onnx = v;
      if (isConstant(v)) {
        input.scalar = scalarConstant(v);
        continue;
      }
      FailureOr<Act> act = operand(v);
      if (failed(act))
        return failure();
      if (rankOf(v) != rank) {
        why = "an elementwise op that broadcasts a rank-" + std::to_string(rankOf(v)) +
              " activation to rank " + std::to_string(rank);
        return failure();
      }
      activations.emplace_back(v, *act);
      if (!main || act->width() > main->width())
        main = *act;
    }
  if (!main) {
    why = "an elementwise op of constants only";
    return failure();
  }
  for (auto &[v, act] : activations) {
    bool column = act.heads == 1 && act.dim == 1 && main->heads == 1;
    if (act.layout != main->layout || (!column && (act.heads != main->heads || act.dim != main->dim))) {
      why = "an elementwise op of activations of different shapes (" + std::to_string(act.heads) +
            "×" + std::to_string(act.dim) + " and " + std::to_string(main->heads) + "×" +
            std::to_string(main->dim) + " columns per token)";
      return failure();
    }
  }
  // The result's columns per head: the activations', or a constant row's when
  // only per-row columns are activations.
  int64_t dim = main->dim;
  if (int64_t last = staticDim(root->getResult(0), rank - 1); last != ShapedType::kDynamic)
    dim = last;
  if (dim != main->dim && main->dim != 1) {
    why = "an elementwise op whose result has " + std::to_string(dim) + " columns per head, not " +
          std::to_string(main->dim);
    return failure();
  }
  Act result{Value(), main->layout, main->heads, dim};

  // Constant rows become [heads·dim] operands.
  for (ChainInput &input : inputs) {
    if (input.step || input.scalar)
      continue;
    if (!isConstant(input.onnx)) {
      for (auto &[v, act] : activations)
        if (v == input.onnx)
          input.step = act.step;
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(input.onnx.getType());
    bool row = type && type.hasStaticShape() && type.getRank() >= 1 && type.getRank() <= rank &&
               type.getShape().back() == dim &&
               llvm::all_of(type.getShape().drop_back(), [](int64_t d) { return d == 1; });
    Value tiled = row ? tiledRow(builder, input.onnx, dim, result.heads,
                                 constantName(input.onnx, "elementwise.row"))
                      : Value();
    if (!tiled) {
      why = "an elementwise op of a constant that is neither a scalar nor a row of the last "
            "axis";
      return failure();
    }
    input.step = tiled;
  }

  // The op and its body.
  SmallVector<Value> operands;
  for (ChainInput &input : inputs)
    if (!input.scalar)
      operands.push_back(input.step);
  auto op = moe::ElementwiseOp::create(builder, root->getLoc(),
                                       rowsOf(root->getResult(0), result.width()), operands);
  Block *body = new Block();
  op.getBody().push_back(body);
  OpBuilder b = OpBuilder::atBlockBegin(body);
  IRMapping scalars;
  for (ChainInput &input : inputs) {
    Type type = getElementTypeOrSelf(input.onnx.getType());
    if (input.scalar)
      scalars.map(input.onnx, arith::ConstantOp::create(b, input.onnx.getLoc(),
                                                        b.getFloatAttr(type, *input.scalar)));
    else
      scalars.map(input.onnx, body->addArgument(type, input.onnx.getLoc()));
  }
  for (Operation *node : nodes) {
    Location loc = node->getLoc();
    SmallVector<Value> a;
    for (Value v : node->getOperands())
      a.push_back(scalars.lookup(v));
    Type type = getElementTypeOrSelf(node->getResult(0).getType());
    auto constant = [&](double v) -> Value {
      return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
    };
    Value out;
    if (isa<ox::AddOp>(node))
      out = arith::AddFOp::create(b, loc, a[0], a[1]);
    else if (isa<ox::SubOp>(node))
      out = arith::SubFOp::create(b, loc, a[0], a[1]);
    else if (isa<ox::MulOp>(node))
      out = arith::MulFOp::create(b, loc, a[0], a[1]);
    else if (isa<ox::DivOp>(node))
      out = arith::DivFOp::create(b, loc, a[0], a[1]);
    else if (isa<ox::NegOp>(node))
      out = arith::NegFOp::create(b, loc, a[0]);
    else if (isa<ox::SqrtOp>(node))
      out = math::SqrtOp::create(b, loc, a[0]);
    else if (isa<ox::ReciprocalOp>(node))
      out = arith::DivFOp::create(b, loc, constant(1.0), a[0]);
    else if (auto pow = dyn_cast<ox::PowOp>(node)) {
      std::optional<double> exponent = scalarConstant(pow.getY());
      if (exponent && *exponent == 2.0)
        out = arith::MulFOp::create(b, loc, a[0], a[0]);
      else if (exponent && *exponent == 1.0)
        out = a[0];
      else if (exponent && *exponent == 0.5)
        out = math::SqrtOp::create(b, loc, a[0]);
      else
        out = math::PowFOp::create(b, loc, a[0], a[1]);
    } else if (isa<ox::ExpOp>(node))
      out = math::ExpOp::create(b, loc, a[0]);
    else if (isa<ox::LogOp>(node))
      out = math::LogOp::create(b, loc, a[0]);
    else if (isa<ox::TanhOp>(node))
      out = math::TanhOp::create(b, loc, a[0]);
    else if (isa<ox::ErfOp>(node))
      out = math::ErfOp::create(b, loc, a[0]);
    else if (isa<ox::AbsOp>(node))
      out = math::AbsFOp::create(b, loc, a[0]);
    else if (isa<ox::SigmoidOp>(node)) {
      // 1 / (1 + exp(-x))
      Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, a[0]));
      out = arith::DivFOp::create(b, loc, constant(1.0),
                                  arith::AddFOp::create(b, loc, constant(1.0), e));
    } else if (isa<ox::ReluOp>(node))
      out = arith::MaximumFOp::create(b, loc, a[0], constant(0.0));
    else if (isa<ox::MaxOp, ox::MinOp>(node)) {
      out = a[0];
      for (Value next : ArrayRef<Value>(a).drop_front())
        out = isa<ox::MaxOp>(node) ? Value(arith::MaximumFOp::create(b, loc, out, next))
                                   : Value(arith::MinimumFOp::create(b, loc, out, next));
    } else if (isa<ox::CastOp>(node))
      out = a[0];
    scalars.map(node->getResult(0), out);
  }
  moe::YieldOp::create(b, root->getLoc(), scalars.lookup(root->getResult(0)));
  result.step = op.getResult();
  return result;
}

} // namespace moec::raise_model
