//===- RaiseExpertLoops.cpp - hand-written expert loops to moe.layer -------===//
//
// A MoE experts module written by hand in upstream dialects receives the
// routing as data (ids [T, K], weights [T, K]) and runs every expert densely
// over all tokens, masking by the routing weight (XLA's ragged-to-dense,
// transformers' static expert loop):
//
//   acc = 0
//   for e in [0, E):                       scf.for, or unrolled over constants
//     g = x · Wg[e]ᵀ,  u = x · Wu[e]ᵀ      linalg.matmul (transposed-B maps)
//     h = silu(g) · u                      linalg.generic
//     y = h · Wd[e]ᵀ                       linalg.matmul
//     r[t] = Σ_k w[t,k] · (ids[t,k] == e)  linalg.generic, reduction over k
//     acc[t, :] += r[t] · y[t, :]          linalg.generic, into the iter_arg
//
// That is exactly moe.layer with precomputed routing: an id outside [0, E)
// equals no e and adds nothing (the sentinel). The matcher checks every piece
// (loop bounds against the stacked weights' E, slices at the induction
// variable, the comparison with it, each body and indexing map, zero inits)
// and leaves anything else alone. docs/pipeline.md states the forms.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace moec {
#define GEN_PASS_DEF_MOERAISEEXPERTLOOPS
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;

namespace {

//===----------------------------------------------------------------------===//
// Small matchers
//===----------------------------------------------------------------------===//

template <typename OpTy> OpTy defOf(Value value) {
  return value ? value.getDefiningOp<OpTy>() : OpTy();
}

/// For a commutative binary op `op` with `x` as one operand, the other one.
template <typename OpTy> Value otherOperand(OpTy op, Value x) {
  if (!op)
    return Value();
  if (op.getLhs() == x)
    return op.getRhs();
  if (op.getRhs() == x)
    return op.getLhs();
  return Value();
}

bool isFloatConstant(Value value, double expected) {
  APFloat constant(0.0);
  if (!matchPattern(value, m_ConstantFloat(&constant)))
    return false;
  return constant.convertToDouble() == expected; // also true for -0.0 == 0.0
}

/// The value a single-result linalg body yields.
Value yielded(Block *body) {
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  return yield && yield.getNumOperands() == 1 ? yield.getOperand(0) : Value();
}

/// `linalg.fill ins(0.0) outs(...)`: a zero accumulator of the value's type.
bool isZeroFill(Value value) {
  auto fill = defOf<linalg::FillOp>(value);
  return fill && fill.getInputs().size() == 1 && isFloatConstant(fill.getInputs()[0], 0.0);
}

/// All element types of `op`'s operands and results are the same float type:
/// no implicit casts hide in the named ops, and the bodies need none.
bool hasOneFloatType(Operation *op, Type type) {
  for (Type t : llvm::concat<Type>(llvm::to_vector(op->getOperandTypes()),
                                    llvm::to_vector(op->getResultTypes())))
    if (getElementTypeOrSelf(t) != type)
      return false;
  return isa<FloatType>(type);
}

struct Maps {
  MLIRContext *ctx;
  AffineExpr d0, d1, d2;
  explicit Maps(MLIRContext *ctx)
      : ctx(ctx), d0(getAffineDimExpr(0, ctx)), d1(getAffineDimExpr(1, ctx)),
        d2(getAffineDimExpr(2, ctx)) {}
  AffineMap get(unsigned dims, ArrayRef<AffineExpr> results) const {
    return AffineMap::get(dims, 0, results, ctx);
  }
  AffineMap identity2() const { return get(2, {d0, d1}); }
  AffineMap row() const { return get(2, {d0}); } // (t, j) -> (t)
};

bool iteratorsAre(linalg::GenericOp op, ArrayRef<utils::IteratorType> expected) {
  return op.getIteratorTypesArray() == SmallVector<utils::IteratorType>(expected);
}

using utils::IteratorType;

//===----------------------------------------------------------------------===//
// The pieces of one expert
//===----------------------------------------------------------------------===//

/// out = input · weightᵀ, accumulated into zeros.
struct Projection {
  Value input, weight;
};

/// linalg.matmul with indexing maps (m, k), (n, k) -> (m, n), or the same
/// contraction as a linalg.generic (yield out + a * b), into a zero fill.
FailureOr<Projection> matchProjection(Value value) {
  Operation *op = value.getDefiningOp();
  if (!op || op->getNumResults() != 1)
    return failure();
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || linalgOp.getNumDpsInputs() != 2 || linalgOp.getNumDpsInits() != 1 ||
      !hasOneFloatType(op, getElementTypeOrSelf(value.getType())))
    return failure();
  Maps m(op->getContext());
  SmallVector<AffineMap> expected = {m.get(3, {m.d0, m.d2}), m.get(3, {m.d1, m.d2}),
                                     m.get(3, {m.d0, m.d1})};
  if (linalgOp.getIndexingMapsArray() != expected)
    return failure();
  if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    Block *body = generic.getBody();
    if (!iteratorsAre(generic, {IteratorType::parallel, IteratorType::parallel,
                                IteratorType::reduction}))
      return failure();
    Value a = body->getArgument(0), b = body->getArgument(1), out = body->getArgument(2);
    auto product = defOf<arith::MulFOp>(otherOperand(defOf<arith::AddFOp>(yielded(body)), out));
    if (!product || otherOperand(product, a) != b)
      return failure();
  } else if (!isa<linalg::MatmulOp>(op)) {
    return failure();
  }
  if (!isZeroFill(linalgOp.getDpsInitOperand(0)->get()))
    return failure();
  return Projection{linalgOp.getDpsInputOperand(0)->get(), linalgOp.getDpsInputOperand(1)->get()};
}

/// 1 / (1 + exp(-g)), the `1 + exp(-g)` part: returns the denominator's g.
Value sigmoidDenominatorInput(Value denominator) {
  auto add = defOf<arith::AddFOp>(denominator);
  if (!add)
    return Value();
  for (auto [one, rest] : {std::pair(add.getLhs(), add.getRhs()),
                           std::pair(add.getRhs(), add.getLhs())}) {
    auto exp = defOf<math::ExpOp>(rest);
    auto neg = exp ? defOf<arith::NegFOp>(exp.getOperand()) : arith::NegFOp();
    if (isFloatConstant(one, 1.0) && neg)
      return neg.getOperand();
  }
  return Value();
}

/// silu(g) = g / (1 + exp(-g)), or g * (1 / (1 + exp(-g))): true when `value`
/// is silu of `g`.
bool isSiLUOf(Value value, Value g) {
  if (auto div = defOf<arith::DivFOp>(value))
    return div.getLhs() == g && sigmoidDenominatorInput(div.getRhs()) == g;
  auto mul = defOf<arith::MulFOp>(value);
  auto sigmoid = defOf<arith::DivFOp>(otherOperand(mul, g));
  return sigmoid && isFloatConstant(sigmoid.getLhs(), 1.0) &&
         sigmoidDenominatorInput(sigmoid.getRhs()) == g;
}

/// h = silu(g) · u elementwise (a linalg.generic over [T, I] that does not
/// read its init). Returns {g, u}.
FailureOr<std::pair<Value, Value>> matchSiLUGLU(Value value) {
  auto generic = defOf<linalg::GenericOp>(value);
  if (!generic || generic.getNumDpsInputs() != 2 || generic.getNumDpsInits() != 1 ||
      !hasOneFloatType(generic, getElementTypeOrSelf(value.getType())))
    return failure();
  Maps m(generic.getContext());
  if (generic.getIndexingMapsArray() !=
          SmallVector<AffineMap>{m.identity2(), m.identity2(), m.identity2()} ||
      !iteratorsAre(generic, {IteratorType::parallel, IteratorType::parallel}))
    return failure();
  Block *body = generic.getBody();
  if (!body->getArgument(2).use_empty()) // it overwrites its init, never reads it
    return failure();
  auto product = defOf<arith::MulFOp>(yielded(body));
  if (!product)
    return failure();
  for (unsigned gate : {0u, 1u}) {
    Value g = body->getArgument(gate), u = body->getArgument(1 - gate);
    if (isSiLUOf(otherOperand(product, u), g))
      return std::pair(generic.getInputs()[gate], generic.getInputs()[1 - gate]);
  }
  return failure();
}

/// r[t] = Σ_k select(ids[t, k] == e, w[t, k], 0) into a zero fill [T].
struct RoutingWeight {
  Value ids, weights;
  Value expert;             // what the ids are compared with
  bool idsAsIndex = false;  // the ids were index_cast to index first
};

FailureOr<RoutingWeight> matchRoutingWeight(Value value) {
  auto generic = defOf<linalg::GenericOp>(value);
  if (!generic || generic.getNumDpsInputs() != 2 || generic.getNumDpsInits() != 1 ||
      !isZeroFill(generic.getDpsInitOperand(0)->get()))
    return failure();
  Maps m(generic.getContext());
  if (generic.getIndexingMapsArray() !=
          SmallVector<AffineMap>{m.identity2(), m.identity2(), m.row()} ||
      !iteratorsAre(generic, {IteratorType::parallel, IteratorType::reduction}))
    return failure();
  Block *body = generic.getBody();
  // The ids are the integer input, the weights the float one (either order).
  unsigned idsIndex = isa<IntegerType>(body->getArgument(0).getType()) ? 0 : 1;
  Value id = body->getArgument(idsIndex), weight = body->getArgument(1 - idsIndex);
  Value acc = body->getArgument(2);
  if (!isa<IntegerType>(id.getType()) || weight.getType() != acc.getType())
    return failure();
  auto select = defOf<arith::SelectOp>(otherOperand(defOf<arith::AddFOp>(yielded(body)), acc));
  if (!select || select.getTrueValue() != weight || !isFloatConstant(select.getFalseValue(), 0.0))
    return failure();
  auto cmp = defOf<arith::CmpIOp>(select.getCondition());
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
    return failure();
  RoutingWeight routing{generic.getInputs()[idsIndex], generic.getInputs()[1 - idsIndex],
                        Value(), false};
  for (auto [mine, other] : {std::pair(cmp.getLhs(), cmp.getRhs()),
                             std::pair(cmp.getRhs(), cmp.getLhs())}) {
    if (mine == id) {
      routing.expert = other;
      return routing;
    }
    auto cast = defOf<arith::IndexCastOp>(mine);
    if (cast && cast.getIn() == id) {
      routing.expert = other;
      routing.idsAsIndex = true;
      return routing;
    }
  }
  return failure();
}

/// acc'[t, j] = acc[t, j] + y[t, j] · r[t]. Returns {y, r, acc}.
struct Accumulation {
  Value expertOutput, routingWeight, accumulator;
};

FailureOr<Accumulation> matchAccumulation(linalg::GenericOp generic) {
  if (generic.getNumDpsInputs() != 2 || generic.getNumDpsInits() != 1 ||
      generic->getNumResults() != 1 ||
      !hasOneFloatType(generic, getElementTypeOrSelf(generic->getResult(0).getType())))
    return failure();
  Maps m(generic.getContext());
  if (!iteratorsAre(generic, {IteratorType::parallel, IteratorType::parallel}))
    return failure();
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  Block *body = generic.getBody();
  for (unsigned y : {0u, 1u}) {
    if (maps[y] != m.identity2() || maps[1 - y] != m.row() || maps[2] != m.identity2())
      continue;
    auto product = defOf<arith::MulFOp>(
        otherOperand(defOf<arith::AddFOp>(yielded(body)), body->getArgument(2)));
    if (!product || otherOperand(product, body->getArgument(y)) != body->getArgument(1 - y))
      continue;
    return Accumulation{generic.getInputs()[y], generic.getInputs()[1 - y],
                        generic.getDpsInitOperand(0)->get()};
  }
  return failure();
}

/// One expert's contribution, as found, before its weights and index are
/// checked against the loop or the chain.
struct ExpertBlock {
  Value hidden;              // x [T, H], input of both projections
  Value gate, up, down;      // the expert's weights as the body uses them
  RoutingWeight routing;
  Value accumulator;         // what this block adds to
};

FailureOr<ExpertBlock> matchExpertBlock(linalg::GenericOp accumulate) {
  FailureOr<Accumulation> acc = matchAccumulation(accumulate);
  if (failed(acc))
    return failure();
  FailureOr<Projection> down = matchProjection(acc->expertOutput);
  if (failed(down))
    return failure();
  FailureOr<std::pair<Value, Value>> glu = matchSiLUGLU(down->input);
  if (failed(glu))
    return failure();
  FailureOr<Projection> gate = matchProjection(glu->first);
  FailureOr<Projection> up = matchProjection(glu->second);
  if (failed(gate) || failed(up) || gate->input != up->input)
    return failure();
  FailureOr<RoutingWeight> routing = matchRoutingWeight(acc->routingWeight);
  if (failed(routing))
    return failure();
  // One float type throughout: the hidden states', which the layer returns.
  Type type = getElementTypeOrSelf(gate->input.getType());
  if (getElementTypeOrSelf(routing->weights.getType()) != type ||
      getElementTypeOrSelf(accumulate->getResult(0).getType()) != type)
    return failure();
  return ExpertBlock{gate->input, gate->weight, up->weight, down->weight, *routing,
                     acc->accumulator};
}

//===----------------------------------------------------------------------===//
// Building the layer
//===----------------------------------------------------------------------===//

struct RaisedLayer {
  Value hidden, ids, weights;
  Value gateUp, up, down; // stacked [E, ...]; `up` only for the separate layout
  moe::GateUpLayout layout = moe::GateUpLayout::Separate;
};

/// Replaces `anchor`, whose one result is the block's output, with a moe.layer
/// of `raised`, if that makes a valid one. What fed only `anchor` becomes dead.
LogicalResult replaceWithLayer(PatternRewriter &rewriter, Operation *anchor,
                               const RaisedLayer &raised) {
  Value result = anchor->getResult(0);
  if (result.getType() != raised.hidden.getType())
    return rewriter.notifyMatchFailure(anchor, "the output type differs from the input's");
  auto idsType = cast<RankedTensorType>(raised.ids.getType());
  if (idsType.getRank() != 2 || idsType.isDynamicDim(1))
    return rewriter.notifyMatchFailure(anchor, "the ids must be [T, K] with a static K");
  auto layer = moe::LayerOp::create(
      rewriter, anchor->getLoc(), result.getType(), raised.hidden, /*router_weight=*/Value(),
      /*router_logits=*/Value(), raised.ids, raised.weights, /*router_bias=*/Value(),
      /*correction_bias=*/Value(), raised.gateUp, raised.up, raised.down,
      /*gate_up_bias=*/Value(), /*up_bias=*/Value(), /*down_bias=*/Value(),
      /*gate_up_scales=*/Value(), /*down_scales=*/Value(), /*shared_gate_up_weight=*/Value(), /*shared_down_weight=*/Value(),
      /*shared_gate_weight=*/Value(), moe::RoutingKind::SoftmaxTopK,
      static_cast<uint64_t>(idsType.getDimSize(1)), /*normalize=*/false, /*num_groups=*/1,
      /*topk_groups=*/1, APFloat(1.0),
      moe::ActivationAttr::get(rewriter.getContext(), moe::ActivationKind::SiLU), raised.layout);
  // The verifier checks what the matcher did not: E, I, H and T agree across
  // the stacked weights, ids and hidden states; top_k <= E.
  if (failed(mlir::verify(layer))) {
    rewriter.eraseOp(layer);
    return rewriter.notifyMatchFailure(anchor, "the matched block does not make a valid moe.layer");
  }
  rewriter.replaceOp(anchor, layer.getResult());
  return success();
}

//===----------------------------------------------------------------------===//
// The loop form
//===----------------------------------------------------------------------===//

/// `tensor.extract_slice %stacked[%e, row, 0] [1, rows, cols] [1, 1, 1]`,
/// rank-reduced to [rows, cols], of a [E, *, cols] tensor defined outside `loop`.
struct ExpertSlice {
  Value stacked;
  int64_t row = 0, rows = 0;
};

FailureOr<ExpertSlice> matchExpertSlice(Value value, scf::ForOp loop) {
  auto slice = defOf<tensor::ExtractSliceOp>(value);
  if (!slice || !loop.isDefinedOutsideOfLoop(slice.getSource()))
    return failure();
  RankedTensorType source = slice.getSourceType();
  if (source.getRank() != 3 || slice.getType().getRank() != 2 || !source.hasStaticShape())
    return failure();
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets(), sizes = slice.getMixedSizes();
  std::optional<int64_t> row = getConstantIntValue(offsets[1]);
  std::optional<int64_t> column = getConstantIntValue(offsets[2]);
  std::optional<int64_t> rows = getConstantIntValue(sizes[1]);
  if (dyn_cast<Value>(offsets[0]) != loop.getInductionVar() || !row || column != 0 ||
      getConstantIntValue(sizes[0]) != 1 || !rows ||
      getConstantIntValue(sizes[2]) != source.getDimSize(2) ||
      !llvm::all_of(slice.getMixedStrides(),
                    [](OpFoldResult s) { return getConstantIntValue(s) == 1; }))
    return failure();
  return ExpertSlice{slice.getSource(), *row, *rows};
}

struct RaiseExpertLoop : OpRewritePattern<scf::ForOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(scf::ForOp loop, PatternRewriter &rewriter) const override {
    // for %e = 0 to E step 1 iter_args(%acc = zeros) -> one tensor
    std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound());
    std::optional<int64_t> upper = getConstantIntValue(loop.getUpperBound());
    std::optional<int64_t> step = getConstantIntValue(loop.getStep());
    if (lower != 0 || step != 1 || !upper || loop.getNumResults() != 1 ||
        !isZeroFill(loop.getInitArgs()[0]))
      return rewriter.notifyMatchFailure(loop, "not a loop 0..E step 1 over one zero accumulator");
    Value iterArg = loop.getRegionIterArgs()[0];
    auto accumulate = defOf<linalg::GenericOp>(loop.getBody()->getTerminator()->getOperand(0));
    FailureOr<ExpertBlock> block =
        accumulate ? matchExpertBlock(accumulate) : FailureOr<ExpertBlock>(failure());
    if (failed(block) || block->accumulator != iterArg)
      return rewriter.notifyMatchFailure(loop, "the body is not one expert accumulated");
    // Nothing in the body may do more than compute values.
    WalkResult effects = loop.getBody()->walk([](Operation *op) {
      return isMemoryEffectFree(op) ? WalkResult::advance() : WalkResult::interrupt();
    });
    if (effects.wasInterrupted())
      return rewriter.notifyMatchFailure(loop, "the body has side effects");

    // Expert e is the induction variable: the ids compare with it, the weights
    // are sliced at it, and everything else is loop-invariant.
    Value iv = loop.getInductionVar();
    const RoutingWeight &routing = block->routing;
    auto ivCast = defOf<arith::IndexCastOp>(routing.expert);
    bool comparesWithIv =
        routing.idsAsIndex ? routing.expert == iv : ivCast && ivCast.getIn() == iv;
    if (!comparesWithIv)
      return rewriter.notifyMatchFailure(loop, "the ids are not compared with the loop's expert");
    for (Value invariant : {block->hidden, routing.ids, routing.weights})
      if (!loop.isDefinedOutsideOfLoop(invariant))
        return rewriter.notifyMatchFailure(loop, "hidden states or routing vary in the loop");

    FailureOr<ExpertSlice> gate = matchExpertSlice(block->gate, loop);
    FailureOr<ExpertSlice> up = matchExpertSlice(block->up, loop);
    FailureOr<ExpertSlice> down = matchExpertSlice(block->down, loop);
    if (failed(gate) || failed(up) || failed(down))
      return rewriter.notifyMatchFailure(loop, "the weights are not sliced at the loop's expert");
    auto sourceType = [](const ExpertSlice &s) {
      return cast<RankedTensorType>(s.stacked.getType());
    };
    // Every expert exactly once: the bound is the stacked weights' E.
    for (const ExpertSlice *s : {&*gate, &*up, &*down})
      if (sourceType(*s).getDimSize(0) != *upper)
        return rewriter.notifyMatchFailure(loop, "the loop bound is not the number of experts");
    // Down takes the whole [H, I] matrix.
    if (down->row != 0 || down->rows != sourceType(*down).getDimSize(1))
      return rewriter.notifyMatchFailure(loop, "down weights are sliced partially");

    RaisedLayer raised{block->hidden, routing.ids, routing.weights, Value(), Value(),
                       down->stacked, moe::GateUpLayout::Separate};
    int64_t inter = gate->rows;
    if (gate->stacked == up->stacked) {
      // One [E, 2I, H] tensor: gate rows [0, I), up rows [I, 2I).
      if (gate->row != 0 || up->row != inter || up->rows != inter ||
          sourceType(*gate).getDimSize(1) != 2 * inter)
        return rewriter.notifyMatchFailure(loop, "gate and up are not the two halves");
      raised.gateUp = gate->stacked;
      raised.layout = moe::GateUpLayout::Concatenated;
    } else {
      for (const ExpertSlice *s : {&*gate, &*up})
        if (s->row != 0 || s->rows != sourceType(*s).getDimSize(1))
          return rewriter.notifyMatchFailure(loop, "gate or up weights are sliced partially");
      raised.gateUp = gate->stacked;
      raised.up = up->stacked;
    }
    return replaceWithLayer(rewriter, loop, raised);
  }
};

//===----------------------------------------------------------------------===//
// The unrolled form
//===----------------------------------------------------------------------===//

/// The bytes of a constant, splats expanded (a per-expert weight may well be
/// all zeros).
std::optional<std::vector<char>> constantData(Value value) {
  if (std::optional<ArrayRef<char>> bytes = getConstantBytes(value))
    return std::vector<char>(bytes->begin(), bytes->end());
  DenseElementsAttr dense;
  if (!matchPattern(value, m_Constant(&dense)) || !dense.isSplat() ||
      dense.getElementType().isInteger(1))
    return std::nullopt;
  ArrayRef<char> one = dense.getRawData();
  std::vector<char> bytes;
  for (int64_t i = 0; i < dense.getNumElements(); ++i)
    bytes.insert(bytes.end(), one.begin(), one.end());
  return bytes;
}

/// An expert block of the unrolled form: constant weights and a constant
/// expert index.
struct UnrolledExpert {
  ExpertBlock block;
  int64_t index;
};

FailureOr<UnrolledExpert> matchUnrolledExpert(linalg::GenericOp accumulate) {
  FailureOr<ExpertBlock> block = matchExpertBlock(accumulate);
  if (failed(block))
    return failure();
  std::optional<int64_t> index = getConstantIntValue(block->routing.expert);
  if (!index)
    return failure();
  for (Value weight : {block->gate, block->up, block->down})
    if (!matchPattern(weight, m_Constant()) || !isa<RankedTensorType>(weight.getType()))
      return failure();
  return UnrolledExpert{*block, *index};
}

/// The bytes of E constants of one type [...], stacked in the order given:
/// the row-major data of the [E, ...] tensor.
std::optional<std::vector<char>> stackedData(ArrayRef<Value> parts) {
  std::vector<char> bytes;
  for (Value part : parts) {
    std::optional<std::vector<char>> data = constantData(part);
    if (!data || part.getType() != parts.front().getType())
      return std::nullopt;
    bytes.insert(bytes.end(), data->begin(), data->end());
  }
  return bytes;
}

Value makeStacked(PatternRewriter &rewriter, Location loc, ArrayRef<Value> parts,
                  ArrayRef<char> bytes, StringRef name) {
  auto type = cast<RankedTensorType>(parts.front().getType());
  SmallVector<int64_t> shape = {static_cast<int64_t>(parts.size())};
  llvm::append_range(shape, type.getShape());
  return makeConstant(rewriter, loc, RankedTensorType::get(shape, type.getElementType()), bytes,
                      name);
}

struct RaiseUnrolledExperts : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp last, PatternRewriter &rewriter) const override {
    // Only the end of a chain: a later expert block takes the whole chain.
    for (Operation *user : last->getUsers()) {
      auto next = dyn_cast<linalg::GenericOp>(user);
      if (next && next.getNumDpsInits() == 1 &&
          next.getDpsInitOperand(0)->get() == last->getResult(0) &&
          succeeded(matchUnrolledExpert(next)))
        return rewriter.notifyMatchFailure(last, "not the last expert of the chain");
    }
    // Walk the accumulator chain back to its zero fill.
    SmallVector<UnrolledExpert> chain;
    for (linalg::GenericOp op = last;;) {
      FailureOr<UnrolledExpert> expert = matchUnrolledExpert(op);
      if (failed(expert))
        return rewriter.notifyMatchFailure(last, "not a chain of expert blocks");
      chain.push_back(*expert);
      Value acc = expert->block.accumulator;
      if (isZeroFill(acc))
        break;
      op = defOf<linalg::GenericOp>(acc);
      if (!op)
        return rewriter.notifyMatchFailure(last, "the chain does not start at zeros");
    }
    // Experts 0..E-1, each once, all on the same hidden states and routing.
    int64_t experts = static_cast<int64_t>(chain.size());
    SmallVector<const ExpertBlock *> byIndex(experts, nullptr);
    const ExpertBlock &first = chain.front().block;
    for (const UnrolledExpert &expert : chain) {
      const ExpertBlock &b = expert.block;
      if (expert.index < 0 || expert.index >= experts || byIndex[expert.index])
        return rewriter.notifyMatchFailure(last, "the expert indices are not 0..E-1, once each");
      if (b.hidden != first.hidden || b.routing.ids != first.routing.ids ||
          b.routing.weights != first.routing.weights)
        return rewriter.notifyMatchFailure(last, "the experts read different inputs");
      byIndex[expert.index] = &b;
    }
    SmallVector<Value> gates, ups, downs;
    for (const ExpertBlock *b : byIndex) {
      gates.push_back(b->gate);
      ups.push_back(b->up);
      downs.push_back(b->down);
    }
    // moe.layer needs top_k <= E; check before any constant is made.
    auto idsType = cast<RankedTensorType>(first.routing.ids.getType());
    if (idsType.getRank() != 2 || idsType.isDynamicDim(1) || idsType.getDimSize(1) > experts)
      return rewriter.notifyMatchFailure(last, "top_k must be static and at most E");
    // Stacked at compile time, in expert order.
    std::optional<std::vector<char>> gateData = stackedData(gates), upData = stackedData(ups);
    std::optional<std::vector<char>> downData = stackedData(downs);
    if (!gateData || !upData || !downData)
      return rewriter.notifyMatchFailure(last, "the per-expert weights differ in type");
    Location loc = last.getLoc();
    Value gate = makeStacked(rewriter, loc, gates, *gateData, "gate_weight");
    Value up = makeStacked(rewriter, loc, ups, *upData, "up_weight");
    Value down = makeStacked(rewriter, loc, downs, *downData, "down_weight");
    RaisedLayer raised{first.hidden, first.routing.ids, first.routing.weights, gate, up, down,
                       moe::GateUpLayout::Separate};
    if (failed(replaceWithLayer(rewriter, last, raised))) {
      for (Value made : {gate, up, down})
        rewriter.eraseOp(made.getDefiningOp());
      return failure();
    }
    return success();
  }
};

struct MoERaiseExpertLoops : moec::impl::MoERaiseExpertLoopsBase<MoERaiseExpertLoops> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseExpertLoop, RaiseUnrolledExperts>(&getContext());
    // The loop (or the unrolled chain) is dead once the layer replaces its
    // result; the greedy driver erases it (every op in it is pure).
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
