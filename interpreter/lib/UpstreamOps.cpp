//===- UpstreamOps.cpp - kernels for the upstream dialects -----------------===//
//
// What hand-written MoE blocks are made of (docs/pipeline.md,
// "moe-raise-expert-loops"), so that raising them can be shown to preserve
// their outputs:
//
//   * arith and math on scalars and elementwise on tensors of one shape;
//     scalars (index, integers, floats) are held as rank-0 tensors, index as i64;
//   * scf.for with an index induction variable and any iter_args: the body is
//     evaluated once per iteration by the driver (RegionRunner);
//   * tensor.empty (dynamic sizes too; contents NaN), tensor.dim,
//     tensor.extract_slice (rank-reducing, any offsets, sizes, strides),
//     tensor.concat;
//   * every linalg structured op on tensors (linalg.generic, linalg.fill,
//     linalg.matmul with its indexing_maps, ...): the payload region is
//     evaluated at every point of the iteration space, in row-major order of
//     the loop dimensions (so reductions run in ascending order), reading and
//     writing the operands through their indexing maps.
//
// Each scalar op rounds its result to its type, as the driver rounds every
// op's result: the values are those a real execution in those types has,
// computed exactly before each rounding.
//
//===----------------------------------------------------------------------===//

#include "Indexing.h"
#include "Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <functional>
#include <limits>

using namespace mlir;

namespace moec::interp::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ElementType elementTypeOf(Type type) {
  return getElementType(getElementTypeOrSelf(type)).value_or(ElementType::F64);
}

//===----------------------------------------------------------------------===//
// Scalar functions
//===----------------------------------------------------------------------===//

/// The exact value of one scalar op from its operands' values (the caller
/// rounds it to the result type).
using ScalarFunction = std::function<double(ArrayRef<double>)>;

bool compareInt(arith::CmpIPredicate predicate, double a, double b) {
  auto ua = static_cast<uint64_t>(toInt64(a)), ub = static_cast<uint64_t>(toInt64(b));
  switch (predicate) {
  case arith::CmpIPredicate::eq: return a == b;
  case arith::CmpIPredicate::ne: return a != b;
  case arith::CmpIPredicate::slt: return a < b;
  case arith::CmpIPredicate::sle: return a <= b;
  case arith::CmpIPredicate::sgt: return a > b;
  case arith::CmpIPredicate::sge: return a >= b;
  case arith::CmpIPredicate::ult: return ua < ub;
  case arith::CmpIPredicate::ule: return ua <= ub;
  case arith::CmpIPredicate::ugt: return ua > ub;
  case arith::CmpIPredicate::uge: return ua >= ub;
  }
  return false;
}

bool compareFloat(arith::CmpFPredicate predicate, double a, double b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  using P = arith::CmpFPredicate;
  switch (predicate) {
  case P::AlwaysFalse: return false;
  case P::AlwaysTrue: return true;
  case P::ORD: return !unordered;
  case P::UNO: return unordered;
  case P::OEQ: return !unordered && a == b;
  case P::ONE: return !unordered && a != b;
  case P::OLT: return !unordered && a < b;
  case P::OLE: return !unordered && a <= b;
  case P::OGT: return !unordered && a > b;
  case P::OGE: return !unordered && a >= b;
  case P::UEQ: return unordered || a == b;
  case P::UNE: return unordered || a != b;
  case P::ULT: return unordered || a < b;
  case P::ULE: return unordered || a <= b;
  case P::UGT: return unordered || a > b;
  case P::UGE: return unordered || a >= b;
  }
  return false;
}

/// IEEE maximum/minimum (NaN wins) and maxnum/minnum (NaN loses).
double maximum(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }
double minimum(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }

/// The function of a scalar (or elementwise) arith or math op; failure for
/// an op it does not know.
FailureOr<ScalarFunction> scalarFunction(Operation *op) {
  using Args = ArrayRef<double>;
  auto unary = [](double (*f)(double)) -> ScalarFunction {
    return [f](Args a) { return f(a[0]); };
  };
  auto identity = [](Args a) { return a[0]; };
  return llvm::TypeSwitch<Operation *, FailureOr<ScalarFunction>>(op)
      .Case<arith::AddFOp, arith::AddIOp>([](auto) -> ScalarFunction {
        return [](Args a) { return a[0] + a[1]; };
      })
      .Case<arith::SubFOp, arith::SubIOp>([](auto) -> ScalarFunction {
        return [](Args a) { return a[0] - a[1]; };
      })
      .Case<arith::MulFOp, arith::MulIOp>([](auto) -> ScalarFunction {
        return [](Args a) { return a[0] * a[1]; };
      })
      .Case([](arith::DivFOp) -> ScalarFunction { return [](Args a) { return a[0] / a[1]; }; })
      .Case([](arith::NegFOp) -> ScalarFunction { return [](Args a) { return -a[0]; }; })
      .Case([](arith::MaximumFOp) -> ScalarFunction {
        return [](Args a) { return maximum(a[0], a[1]); };
      })
      .Case([](arith::MinimumFOp) -> ScalarFunction {
        return [](Args a) { return minimum(a[0], a[1]); };
      })
      .Case([](arith::MaxNumFOp) -> ScalarFunction {
        return [](Args a) { return std::fmax(a[0], a[1]); };
      })
      .Case([](arith::MinNumFOp) -> ScalarFunction {
        return [](Args a) { return std::fmin(a[0], a[1]); };
      })
      .Case([](arith::CmpIOp cmp) -> ScalarFunction {
        arith::CmpIPredicate predicate = cmp.getPredicate();
        return [predicate](Args a) { return compareInt(predicate, a[0], a[1]) ? 1.0 : 0.0; };
      })
      .Case([](arith::CmpFOp cmp) -> ScalarFunction {
        arith::CmpFPredicate predicate = cmp.getPredicate();
        return [predicate](Args a) { return compareFloat(predicate, a[0], a[1]) ? 1.0 : 0.0; };
      })
      .Case([](arith::SelectOp) -> ScalarFunction {
        return [](Args a) { return a[0] != 0.0 ? a[1] : a[2]; };
      })
      // Conversions: the value is kept and the rounding to the result type
      // converts it (floats to nearest, integers toward zero, saturating).
      .Case<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtFOp, arith::TruncFOp,
            arith::ExtSIOp, arith::TruncIOp, arith::SIToFPOp, arith::FPToSIOp>(
          [&](auto) -> ScalarFunction { return identity; })
      .Case([&](math::ExpOp) { return unary(std::exp); })
      .Case([&](math::LogOp) { return unary(std::log); })
      .Case([&](math::TanhOp) { return unary(std::tanh); })
      .Case([&](math::ErfOp) { return unary(std::erf); })
      .Case([&](math::SqrtOp) { return unary(std::sqrt); })
      .Case([&](math::AbsFOp) { return unary(std::fabs); })
      .Case([](math::RsqrtOp) -> ScalarFunction {
        return [](Args a) { return 1.0 / std::sqrt(a[0]); };
      })
      .Case([](math::PowFOp) -> ScalarFunction {
        return [](Args a) { return std::pow(a[0], a[1]); };
      })
      .Default([](Operation *) -> FailureOr<ScalarFunction> { return failure(); });
}

/// The value of a scalar arith.constant (integer, index or float).
std::optional<double> scalarConstant(arith::ConstantOp constant) {
  if (auto integer = dyn_cast<IntegerAttr>(constant.getValue()))
    return integer.getType().isUnsignedInteger() || integer.getType().isInteger(1)
               ? static_cast<double>(integer.getValue().getZExtValue())
               : static_cast<double>(integer.getValue().getSExtValue());
  if (auto real = dyn_cast<FloatAttr>(constant.getValue()))
    return real.getValueAsDouble();
  return std::nullopt;
}

/// An arith or math op on scalars, or elementwise on tensors of one shape (a
/// scalar condition of arith.select applies to every element).
LogicalResult evalElementwise(Operation *op, Operands in, Results &out) {
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    std::optional<double> value = scalarConstant(constant);
    if (!value)
      return op->emitOpError("with this value is not supported by the interpreter");
    out.emplace_back(resultElementType(op), ArrayRef<int64_t>{}, *value);
    return success();
  }
  FailureOr<ScalarFunction> function = scalarFunction(op);
  if (failed(function) || op->getNumResults() != 1)
    return op->emitOpError("is not supported by the interpreter");
  const Tensor *shaped = nullptr;
  for (const Tensor *operand : in)
    if (operand->rank() > 0) {
      if (shaped && shaped->shape != operand->shape)
        return op->emitOpError() << "has operands of shapes " << formatShape(shaped->shape)
                                 << " and " << formatShape(operand->shape)
                                 << " at run time; elementwise ops need one shape";
      shaped = operand;
    }
  ArrayRef<int64_t> shape = shaped ? ArrayRef<int64_t>(shaped->shape) : ArrayRef<int64_t>();
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  SmallVector<double, 3> args(in.size());
  for (int64_t i = 0; i < result.numElements(); ++i) {
    for (auto [arg, operand] : llvm::zip(args, in))
      arg = operand->values[operand->rank() > 0 ? i : 0];
    result.values[i] = (*function)(args);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// scf.for
//===----------------------------------------------------------------------===//

LogicalResult evalFor(scf::ForOp loop, Operands in, Results &out, RegionRunner &regions) {
  int64_t lower = toInt64(in[0]->values[0]), upper = toInt64(in[1]->values[0]);
  int64_t step = toInt64(in[2]->values[0]);
  if (step <= 0)
    return loop.emitOpError() << "has step " << step << " at run time; it must be positive";
  if (loop.getUnsignedCmp())
    return loop.emitOpError("with unsigned comparison is not supported by the interpreter");
  SmallVector<Tensor> iterValues;
  for (const Tensor *init : in.drop_front(3))
    iterValues.push_back(*init);
  for (int64_t iv = lower; iv < upper; iv += step) {
    SmallVector<Tensor> arguments;
    arguments.emplace_back(ElementType::I64, ArrayRef<int64_t>{}, static_cast<double>(iv));
    llvm::append_range(arguments, iterValues);
    FailureOr<SmallVector<Tensor>> yielded = regions.runBlock(*loop.getBody(), arguments);
    if (failed(yielded))
      return failure();
    iterValues = std::move(*yielded);
  }
  for (Tensor &value : iterValues)
    out.push_back(std::move(value));
  return success();
}

//===----------------------------------------------------------------------===//
// tensor
//===----------------------------------------------------------------------===//

/// The static sizes of `type` with its dynamic ones taken, in order, from
/// `dynamicSizes` (rank-0 tensors).
FailureOr<Shape> resolveShape(Operation *op, RankedTensorType type, Operands dynamicSizes) {
  Shape shape;
  size_t next = 0;
  for (int64_t size : type.getShape())
    shape.push_back(ShapedType::isDynamic(size) ? toInt64(dynamicSizes[next++]->values[0]) : size);
  if (failed(checkResultShape(op, shape)))
    return failure();
  return shape;
}

/// The values of mixed static/dynamic offsets, sizes or strides, whose dynamic
/// entries are the operands in `dynamic` (rank-0 tensors), in order.
SmallVector<int64_t> resolveMixed(ArrayRef<int64_t> statics, Operands dynamic) {
  SmallVector<int64_t> values;
  size_t next = 0;
  for (int64_t value : statics)
    values.push_back(ShapedType::isDynamic(value) ? toInt64(dynamic[next++]->values[0]) : value);
  return values;
}

LogicalResult evalExtractSlice(tensor::ExtractSliceOp slice, Operands in, Results &out) {
  const Tensor &source = *in[0];
  size_t offsetCount = slice.getOffsets().size(), sizeCount = slice.getSizes().size();
  Operands dynamic = in.drop_front(1);
  SmallVector<int64_t> offsets = resolveMixed(slice.getStaticOffsets(), dynamic.take_front(offsetCount));
  SmallVector<int64_t> sizes =
      resolveMixed(slice.getStaticSizes(), dynamic.drop_front(offsetCount).take_front(sizeCount));
  SmallVector<int64_t> strides =
      resolveMixed(slice.getStaticStrides(), dynamic.drop_front(offsetCount + sizeCount));
  for (int64_t d = 0; d < source.rank(); ++d) {
    int64_t last = offsets[d] + (sizes[d] - 1) * strides[d];
    if (sizes[d] < 0 || (sizes[d] > 0 && (offsets[d] < 0 || last < 0 || last >= source.dim(d))))
      return slice.emitOpError() << "reads dimension " << d << " at offset " << offsets[d]
                                 << ", size " << sizes[d] << ", stride " << strides[d]
                                 << " at run time, outside the source's " << source.dim(d);
  }
  // Rank reduction drops unit dimensions; the data is the same.
  llvm::SmallBitVector dropped = slice.getDroppedDims();
  Shape shape;
  for (int64_t d = 0; d < source.rank(); ++d)
    if (!dropped.test(d))
      shape.push_back(sizes[d]);
  Tensor &result = out.emplace_back(source.elementType, shape);
  Shape sourceStrides = stridesOf(source.shape);
  for (int64_t i = 0; i < result.numElements(); ++i) {
    Shape coords = unravel(i, sizes);
    int64_t index = 0;
    for (int64_t d = 0; d < source.rank(); ++d)
      index += (offsets[d] + coords[d] * strides[d]) * sourceStrides[d];
    result.values[i] = source.values[index];
  }
  return success();
}

/// tensor.collapse_shape and tensor.expand_shape (moe-legalize-for-codegen's
/// views of a block's [B, T, H] input and output as [B·T, H] rows) keep the
/// row-major values and change the shape: each reassociation group of the
/// expanded side's dimensions multiplies to one dimension of the collapsed
/// side. The collapsed shape of `expanded` by `groups`.
FailureOr<Shape> collapsedShape(Operation *op, ArrayRef<int64_t> expanded,
                                ArrayRef<ReassociationIndices> groups) {
  Shape shape;
  for (const ReassociationIndices &group : groups) {
    int64_t size = 1;
    for (int64_t d : group) {
      if (d < 0 || d >= static_cast<int64_t>(expanded.size()))
        return op->emitOpError() << "groups dimension " << d << " of a rank-" << expanded.size()
                                 << " side";
      size *= expanded[d];
    }
    shape.push_back(size);
  }
  return shape;
}

LogicalResult evalCollapseShape(tensor::CollapseShapeOp collapse, Operands in, Results &out) {
  const Tensor &source = *in[0];
  FailureOr<Shape> shape =
      collapsedShape(collapse, source.shape, collapse.getReassociationIndices());
  if (failed(shape))
    return failure();
  // Static sizes of the result type must agree with the data.
  for (auto [d, size] : llvm::enumerate(collapse.getResultType().getShape()))
    if (!ShapedType::isDynamic(size) && d < shape->size() && size != (*shape)[d])
      return collapse.emitOpError() << "collapses " << formatShape(source.shape) << " to "
                                    << formatShape(*shape) << " at run time, not its type's "
                                    << size << " in dimension " << d;
  out.emplace_back(source.elementType, *shape).values = source.values;
  return success();
}

LogicalResult evalExpandShape(tensor::ExpandShapeOp expand, Operands in, Results &out) {
  const Tensor &source = *in[0];
  Shape shape = resolveMixed(expand.getStaticOutputShape(), in.drop_front(1));
  for (int64_t size : shape)
    if (size < 0)
      return expand.emitOpError() << "expands to " << formatShape(shape) << " at run time";
  SmallVector<ReassociationIndices> groups = expand.getReassociationIndices();
  FailureOr<Shape> collapsed = collapsedShape(expand, shape, groups);
  if (failed(collapsed))
    return failure();
  if (static_cast<int64_t>(collapsed->size()) != source.rank())
    return expand.emitOpError() << "has " << collapsed->size()
                                << " reassociation groups for a rank-" << source.rank()
                                << " source";
  for (auto [g, size] : llvm::enumerate(*collapsed))
    if (size != source.dim(g))
      return expand.emitOpError() << "gets " << formatShape(source.shape)
                                  << " at run time: group " << g << " of "
                                  << formatShape(shape) << " holds " << size
                                  << " elements, not " << source.dim(g);
  out.emplace_back(source.elementType, shape).values = source.values;
  return success();
}

LogicalResult evalConcat(tensor::ConcatOp concat, Operands in, Results &out) {
  int64_t dim = static_cast<int64_t>(concat.getDim());
  Shape shape(in[0]->shape);
  shape[dim] = 0;
  for (const Tensor *part : in) {
    for (int64_t d = 0; d < part->rank(); ++d)
      if (d != dim && part->dim(d) != shape[d])
        return concat.emitOpError() << "concatenates shapes " << formatShape(in[0]->shape)
                                    << " and " << formatShape(part->shape) << " at run time";
    shape[dim] += part->dim(dim);
  }
  Tensor &result = out.emplace_back(resultElementType(concat), shape);
  // Row-major: each outer block is every part's slab in turn.
  int64_t outer = productOf(shape, 0, dim);
  size_t position = 0;
  for (int64_t block = 0; block < outer; ++block)
    for (const Tensor *part : in) {
      int64_t slab = productOf(part->shape, dim, part->shape.size());
      std::copy_n(part->values.begin() + block * slab, slab, result.values.begin() + position);
      position += slab;
    }
  return success();
}

//===----------------------------------------------------------------------===//
// linalg structured ops
//===----------------------------------------------------------------------===//

int64_t evalAffine(AffineExpr expr, ArrayRef<int64_t> dims) {
  if (auto dim = dyn_cast<AffineDimExpr>(expr))
    return dims[dim.getPosition()];
  if (auto constant = dyn_cast<AffineConstantExpr>(expr))
    return constant.getValue();
  auto binary = cast<AffineBinaryOpExpr>(expr);
  int64_t lhs = evalAffine(binary.getLHS(), dims), rhs = evalAffine(binary.getRHS(), dims);
  switch (expr.getKind()) {
  case AffineExprKind::Add: return lhs + rhs;
  case AffineExprKind::Mul: return lhs * rhs;
  case AffineExprKind::Mod: return rhs == 0 ? 0 : ((lhs % rhs) + rhs) % rhs;
  case AffineExprKind::FloorDiv:
    return rhs == 0 ? 0 : lhs / rhs - ((lhs % rhs != 0) && ((lhs < 0) != (rhs < 0)));
  case AffineExprKind::CeilDiv:
    return rhs == 0 ? 0 : lhs / rhs + ((lhs % rhs != 0) && ((lhs < 0) == (rhs < 0)));
  default: return 0;
  }
}

/// The payload region compiled once into steps over value slots: block
/// arguments first, then values captured from above, then each op's result.
class Payload {
public:
  LogicalResult compile(Block &body, RegionRunner &regions) {
    for (BlockArgument arg : body.getArguments())
      slotOf[arg] = allocate(elementTypeOf(arg.getType()));
    for (Operation &op : body) {
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        for (Value value : op.getOperands())
          if (FailureOr<int> slot = operandSlot(&op, value, regions); succeeded(slot))
            yields.push_back(*slot);
          else
            return failure();
        return success();
      }
      Step step;
      step.op = &op;
      if (op.getNumResults() != 1 || !op.getResult(0).getType().isIntOrIndexOrFloat() ||
          op.getNumRegions() != 0)
        return op.emitOpError("in a linalg body is not supported by the interpreter");
      if (auto index = dyn_cast<linalg::IndexOp>(op)) {
        step.loopDim = static_cast<int>(index.getDim());
      } else if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
        std::optional<double> value = scalarConstant(constant);
        if (!value)
          return op.emitOpError("with this value is not supported by the interpreter");
        step.function = [v = *value](ArrayRef<double>) { return v; };
      } else {
        FailureOr<ScalarFunction> function = scalarFunction(&op);
        if (failed(function))
          return op.emitOpError("in a linalg body is not supported by the interpreter");
        step.function = std::move(*function);
      }
      for (Value operand : op.getOperands()) {
        FailureOr<int> slot = operandSlot(&op, operand, regions);
        if (failed(slot))
          return failure();
        step.args.push_back(*slot);
      }
      step.type = elementTypeOf(op.getResult(0).getType());
      step.result = allocate(step.type);
      slotOf[op.getResult(0)] = step.result;
      steps.push_back(std::move(step));
    }
    return body.getParentOp()->emitOpError("has a body without linalg.yield");
  }

  /// Runs the body with the block arguments in slots [0, #args) already set;
  /// returns the yielded values.
  void run(ArrayRef<int64_t> loopIndices, SmallVectorImpl<double> &results) {
    SmallVector<double, 4> args;
    for (Step &step : steps) {
      double value;
      if (step.loopDim >= 0) {
        value = static_cast<double>(loopIndices[step.loopDim]);
      } else {
        args.clear();
        for (int slot : step.args)
          args.push_back(slots[slot]);
        value = step.function(args);
      }
      slots[step.result] = roundTo(step.type, value);
    }
    results.clear();
    for (int slot : yields)
      results.push_back(slots[slot]);
  }

  std::vector<double> slots;

private:
  struct Step {
    Operation *op = nullptr;
    ScalarFunction function;
    SmallVector<int, 3> args;
    int result = 0;
    int loopDim = -1; // linalg.index
    ElementType type = ElementType::F64;
  };

  int allocate(ElementType) {
    slots.push_back(0.0);
    return static_cast<int>(slots.size()) - 1;
  }

  /// The slot of an operand: a block argument or earlier result, or a scalar
  /// defined above the op (copied in once).
  FailureOr<int> operandSlot(Operation *user, Value value, RegionRunner &regions) {
    auto it = slotOf.find(value);
    if (it != slotOf.end())
      return it->second;
    const Tensor *captured = regions.lookup(value);
    if (!captured || captured->rank() != 0)
      return user->emitOpError("uses a value from above the linalg body that is not a "
                               "computed scalar");
    int slot = allocate(captured->elementType);
    slots[slot] = captured->values[0];
    slotOf[value] = slot;
    return slot;
  }

  llvm::DenseMap<Value, int> slotOf;
  SmallVector<Step> steps;
  SmallVector<int> yields;
};

LogicalResult evalLinalg(linalg::LinalgOp op, Operands in, Results &out, RegionRunner &regions) {
  if (!op.hasPureTensorSemantics())
    return op->emitOpError("on buffers is not supported by the interpreter");
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned numLoops = op.getNumLoops();
  unsigned numInputs = op.getNumDpsInputs();
  // Loop bounds: each loop dimension an operand's map reads directly takes
  // that operand's size there; they must agree.
  SmallVector<int64_t> bounds(numLoops, -1);
  for (auto [operand, map] : llvm::zip(in, maps)) {
    if (static_cast<int64_t>(map.getNumResults()) != operand->rank())
      return op->emitOpError() << "has an indexing map with " << map.getNumResults()
                               << " results for an operand of rank " << operand->rank();
    for (auto [position, expr] : llvm::enumerate(map.getResults())) {
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (!dim)
        continue;
      int64_t &bound = bounds[dim.getPosition()];
      int64_t size = operand->dim(position);
      if (bound >= 0 && bound != size)
        return op->emitOpError() << "loop dimension " << dim.getPosition() << " is " << bound
                                 << " by one operand and " << size << " by another at run time";
      bound = size;
    }
  }
  for (auto [index, bound] : llvm::enumerate(bounds))
    if (bound < 0)
      return op->emitOpError() << "loop dimension " << index
                               << " is read by no operand; the interpreter cannot size it";

  Payload payload;
  if (failed(payload.compile(*op.getBlock(), regions)))
    return failure();
  // The results start as the inits and are updated in place, point by point.
  for (unsigned i = numInputs; i < in.size(); ++i)
    out.push_back(*in[i]);
  SmallVector<Shape> strides;
  for (const Tensor *operand : in)
    strides.push_back(stridesOf(operand->shape));

  int64_t points = 1;
  for (int64_t bound : bounds)
    points *= bound;
  SmallVector<int64_t> indices(numLoops, 0);
  SmallVector<int64_t> offsets(in.size());
  SmallVector<double, 4> yielded;
  for (int64_t point = 0; point < points; ++point) {
    for (unsigned i = 0; i < in.size(); ++i) {
      int64_t offset = 0;
      for (auto [position, expr] : llvm::enumerate(maps[i].getResults())) {
        int64_t coordinate = evalAffine(expr, indices);
        if (coordinate < 0 || coordinate >= in[i]->dim(position))
          return op->emitOpError() << "operand " << i << " is read at " << coordinate
                                   << " in dimension " << position << ", outside its "
                                   << in[i]->dim(position);
        offset += coordinate * strides[i][position];
      }
      offsets[i] = offset;
      const Tensor &source = i < numInputs ? *in[i] : out[out.size() - (in.size() - i)];
      payload.slots[i] = source.values[offset];
    }
    payload.run(indices, yielded);
    for (unsigned r = 0; r < yielded.size(); ++r) {
      Tensor &result = out[out.size() - yielded.size() + r];
      result.values[offsets[numInputs + r]] = roundTo(result.elementType, yielded[r]);
    }
    // Row-major odometer over the loop dimensions: the last one moves fastest.
    for (int d = static_cast<int>(numLoops) - 1; d >= 0; --d) {
      if (++indices[d] < bounds[d])
        break;
      indices[d] = 0;
    }
  }
  return success();
}

} // namespace

FailureOr<ScalarBlock> compileScalarBlock(Block &block, RegionRunner &regions) {
  auto payload = std::make_shared<Payload>();
  if (failed(payload->compile(block, regions)))
    return failure();
  return ScalarBlock([payload](ArrayRef<double> arguments) {
    std::copy(arguments.begin(), arguments.end(), payload->slots.begin());
    SmallVector<double, 1> yielded;
    payload->run({}, yielded);
    return yielded.empty() ? 0.0 : yielded[0];
  });
}

LogicalResult evalUpstreamOp(Operation *op, Operands operands, Results &results,
                             RegionRunner &regions) {
  if (auto loop = dyn_cast<scf::ForOp>(op))
    return evalFor(loop, operands, results, regions);
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return evalLinalg(linalgOp, operands, results, regions);
  if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
    FailureOr<Shape> shape = resolveShape(op, empty.getType(), operands);
    if (failed(shape))
      return failure();
    // The contents are undefined: NaN makes a read of them visible.
    ElementType type = resultElementType(op);
    results.emplace_back(type, *shape, isFloat(type) ? kNaN : 0.0);
    return success();
  }
  if (auto dim = dyn_cast<tensor::DimOp>(op)) {
    int64_t index = toInt64(operands[1]->values[0]);
    if (index < 0 || index >= operands[0]->rank())
      return op->emitOpError() << "asks for dimension " << index << " of a rank-"
                               << operands[0]->rank() << " tensor";
    results.emplace_back(ElementType::I64, ArrayRef<int64_t>{},
                         static_cast<double>(operands[0]->dim(index)));
    return success();
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
    return evalExtractSlice(slice, operands, results);
  if (auto concat = dyn_cast<tensor::ConcatOp>(op))
    return evalConcat(concat, operands, results);
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
    return evalCollapseShape(collapse, operands, results);
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
    return evalExpandShape(expand, operands, results);
  if (isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
    return evalElementwise(op, operands, results);
  return op->emitOpError("is not supported by the interpreter");
}

} // namespace moec::interp::detail
