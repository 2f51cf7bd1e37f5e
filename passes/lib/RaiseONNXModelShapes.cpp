//===- RaiseONNXModelShapes.cpp - shapes, positions and constants ---------===//
//
// Part of moe-raise-onnx-model (RaiseONNXModel.h): what the forms rely on
// besides the activations. The dimensions of the shapes the export computes
// (B and T are input_ids' Shape; everything else a number), the positions
// 0..T-1 it computes from them, and the constants made at compile time
// (transposed weights, reshaped tables); and the name of a node, for errors.
//
//===----------------------------------------------------------------------===//

#include "RaiseONNXModel.h"

#include "moec/Dialect/Utils/ConstantData.h"

#include "mlir/IR/DialectResourceBlobManager.h"

#include <algorithm>
#include <cstring>

using namespace mlir;
using namespace moec;

namespace moec::raise_model {

std::string describeNode(Operation *op) {
  std::string node;
  op->getLoc()->walk([&](Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc); name && node.empty())
      node = name.getName().str();
    return WalkResult::advance();
  });
  StringRef kind = op->getName().getStringRef();
  if (kind.starts_with("onnx."))
    kind = kind.drop_front(5);
  if (node.empty())
    return ("'" + op->getName().getStringRef() + "'").str();
  return "node '" + node + "' (" + kind.str() + ")";
}

namespace {

/// Shape(x)'s [start, end) of a rank-`rank` x, clamped as ONNX does.
std::pair<int64_t, int64_t> shapeRange(ox::ShapeOp shape, int64_t rank) {
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  return {clamp(shape.getStart().value_or(0)), clamp(shape.getEnd().value_or(rank))};
}

} // namespace

//===----------------------------------------------------------------------===//
// Dimensions and shapes
//===----------------------------------------------------------------------===//

Dim ModelRaiser::dimOf(Value value, int64_t axis) {
  if (value == tokenIds)
    return axis == 0 ? Dim::batch() : axis == 1 ? Dim::tokens() : Dim();
  if (int64_t size = staticDim(value, axis); size != ShapedType::kDynamic)
    return Dim::constant(size);
  if (auto fill = def<ox::ConstantOfShapeOp>(value))
    if (std::optional<SmallVector<Dim>> spec = shapeSpec(fill.getInput());
        spec && axis < static_cast<int64_t>(spec->size()))
      return (*spec)[axis];
  return Dim();
}

Dim ModelRaiser::scalarDim(Value value) {
  if (std::optional<SmallVector<int64_t>> list = intList(value); list && list->size() == 1)
    return Dim::constant(list->front());
  auto oneElement = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() && type.getNumElements() == 1;
  };
  if (auto squeeze = def<ox::SqueezeOp>(value); squeeze && oneElement(squeeze.getData()))
    return scalarDim(squeeze.getData());
  if (auto unsqueeze = def<ox::UnsqueezeOp>(value); unsqueeze && oneElement(unsqueeze.getData()))
    return scalarDim(unsqueeze.getData());
  if (auto reshapeOp = def<ox::ReshapeOp>(value); reshapeOp && oneElement(reshapeOp.getData()))
    return scalarDim(reshapeOp.getData());
  if (auto shape = def<ox::ShapeOp>(value)) {
    auto [start, end] = shapeRange(shape, rankOf(shape.getData()));
    return end == start + 1 ? dimOf(shape.getData(), start) : Dim();
  }
  if (auto gather = def<ox::GatherOp>(value)) {
    auto shape = def<ox::ShapeOp>(gather.getData());
    std::optional<SmallVector<int64_t>> index = intList(gather.getIndices());
    if (shape && index && index->size() == 1 && gather.getAxis().value_or(0) == 0) {
      auto [start, end] = shapeRange(shape, rankOf(shape.getData()));
      int64_t axis = start + normalizeAxis(index->front(), end - start);
      return axis >= start && axis < end ? dimOf(shape.getData(), axis) : Dim();
    }
  }
  return Dim();
}

std::optional<SmallVector<Dim>> ModelRaiser::shapeSpec(Value shape) {
  SmallVector<Dim> dims;
  if (std::optional<SmallVector<int64_t>> list = intList(shape)) {
    for (int64_t v : *list)
      dims.push_back(Dim::constant(v));
    return dims;
  }
  if (auto shapeOp = def<ox::ShapeOp>(shape)) {
    int64_t rank = rankOf(shapeOp.getData());
    if (rank < 0)
      return std::nullopt;
    auto [start, end] = shapeRange(shapeOp, rank);
    for (int64_t axis = start; axis < end; ++axis)
      dims.push_back(dimOf(shapeOp.getData(), axis));
  } else if (auto concatOp = def<ox::ConcatOp>(shape)) {
    for (Value part : concatOp.getInputs()) {
      std::optional<SmallVector<Dim>> partDims = shapeSpec(part);
      if (!partDims)
        return std::nullopt;
      dims.append(*partDims);
    }
  } else if (rankOf(shape) == 1 && staticDim(shape, 0) == 1) {
    dims.push_back(scalarDim(shape));
  } else {
    return std::nullopt;
  }
  if (llvm::any_of(dims, [](const Dim &d) { return d.kind == Dim::Unknown; }))
    return std::nullopt;
  return dims;
}

bool ModelRaiser::isPositions(Value value) {
  while (true) {
    if (auto unsqueeze = def<ox::UnsqueezeOp>(value))
      value = unsqueeze.getData();
    else if (auto expand = def<ox::ExpandOp>(value))
      value = expand.getInput();
    else if (auto cast = def<ox::CastOp>(value))
      value = cast.getInput();
    else
      break;
  }
  auto range = def<ox::RangeOp>(value);
  return range && scalarDim(range.getStart()).is(0) && scalarDim(range.getDelta()).is(1) &&
         scalarDim(range.getLimit()).kind == Dim::Tokens;
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

std::string ModelRaiser::constantName(Value value, StringRef fallback) {
  Attribute attr;
  if (auto constant = value.getDefiningOp<ox::ConstantOp>())
    attr = constant.getValue() ? Attribute(*constant.getValue()) : Attribute();
  else if (auto constant = value.getDefiningOp<arith::ConstantOp>())
    attr = constant.getValue();
  if (auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(attr))
    return resource.getRawHandle().getKey().str();
  return fallback.str();
}

Value ModelRaiser::transposed(Value weight, StringRef name) {
  if (Value known = transposedWeights.lookup(weight))
    return known;
  auto type = cast<RankedTensorType>(weight.getType());
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  auto outType = RankedTensorType::get({cols, rows}, type.getElementType());
  std::optional<ArrayRef<char>> data = getConstantBytes(weight);
  if (!data) { // a splat
    Value splat = arith::ConstantOp::create(builder, weight.getLoc(), outType,
                                            denseElements(weight).resizeSplat(outType));
    transposedWeights[weight] = splat;
    return splat;
  }
  ArrayRef<char> bytes = *data;
  int64_t size = elementBytes(type.getElementType());
  std::vector<char> out(bytes.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&out[(c * rows + r) * size], &bytes[(r * cols + c) * size], size);
  Value result = makeConstant(builder, weight.getLoc(), outType, out, name);
  transposedWeights[weight] = result;
  return result;
}

Value ModelRaiser::reshaped(Value constant, ArrayRef<int64_t> shape, StringRef name) {
  auto type = RankedTensorType::get(shape, cast<ShapedType>(constant.getType()).getElementType());
  if (std::optional<ArrayRef<char>> bytes = getConstantBytes(constant))
    return makeConstant(builder, constant.getLoc(), type, *bytes, name);
  DenseElementsAttr dense = denseElements(constant);
  if (!dense || !dense.isSplat())
    return Value();
  return arith::ConstantOp::create(builder, constant.getLoc(), type, dense.resizeSplat(type));
}

} // namespace moec::raise_model
