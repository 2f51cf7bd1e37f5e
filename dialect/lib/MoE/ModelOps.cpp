//===- ModelOps.cpp - verifiers of the decoder ops around moe.layer -------===//
//
// Shapes as in MoEOps.cpp: symbolic, naming the operand and dimension at
// fault. Column counts that hold several heads are checked as products.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "ShapeChecker.h"

#include <cmath>

using namespace mlir;
using namespace moec::moe;
using moec::moe::detail::ShapeChecker;

namespace {

int64_t dimOf(Value value, unsigned index) {
  return cast<RankedTensorType>(value.getType()).getDimSize(index);
}

Type elementOf(Value value) { return cast<ShapedType>(value.getType()).getElementType(); }

/// `columns` (static) must be `count` · something; returns that or a failure.
FailureOr<int64_t> perHead(Operation *op, Value value, StringRef name, int64_t count) {
  int64_t columns = dimOf(value, 1);
  if (ShapedType::isDynamic(columns))
    return op->emitOpError() << name << " needs a static column count";
  if (columns % count != 0)
    return op->emitOpError() << name << " has " << columns << " columns, not a multiple of "
                             << count << " heads";
  return columns / count;
}

} // namespace

LogicalResult EmbeddingOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getIds(), "ids", {"N"})) ||
      failed(shapes.expect(getTable(), "table", {"V", "H"})) ||
      failed(shapes.expect(getResult(), "result", {"N", "H"})))
    return failure();
  // A bf16 (or f16) table may give f32 rows: widened exactly (the CUDA
  // target's bf16 embedding, moe-cast-model-bf16).
  Type result = elementOf(getResult()), table = elementOf(getTable());
  if (result != table && !(result.isF32() && (table.isBF16() || table.isF16())))
    return emitOpError("result element type must be the table's, or f32 for a bf16 or f16 "
                       "table");
  return success();
}

/// moe.rms_norm's and moe.add_rms_norm's shared rules: a non-empty weight of G
/// that divides the K columns into groups, a finite epsilon >= 0 and a finite
/// weight_offset.
static LogicalResult verifyNormParameters(Operation *op, int64_t columns, int64_t group,
                                          APFloat epsilonAttr, APFloat weightOffset) {
  if (group == 0)
    return op->emitOpError("weight must not be empty: it is one group's scale");
  if (!ShapedType::isDynamic(columns) && !ShapedType::isDynamic(group) && columns % group != 0)
    return op->emitOpError() << "weight length " << group << " does not divide the " << columns
                             << " input columns into groups";
  double epsilon = epsilonAttr.convertToDouble();
  if (!(epsilon >= 0.0) || !std::isfinite(epsilon))
    return op->emitOpError() << "epsilon must be non-negative and finite, got " << epsilon;
  if (!std::isfinite(weightOffset.convertToDouble()))
    return op->emitOpError("weight_offset must be finite");
  return success();
}

LogicalResult RMSNormOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getInput(), "input", {"M", "K"})) ||
      failed(shapes.expect(getWeight(), "weight", {"G"})) ||
      failed(shapes.expect(getResult(), "result", {"M", "K"})))
    return failure();
  return verifyNormParameters(*this, shapes.get("K"), shapes.get("G"), getEpsilon(),
                              getWeightOffset());
}

LogicalResult AddRMSNormOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getInput(), "input", {"M", "K"})) ||
      failed(shapes.expect(getAddend(), "addend", {"M", "K"})) ||
      failed(shapes.expect(getWeight(), "weight", {"G"})) ||
      failed(shapes.expect(getSum(), "sum", {"M", "K"})) ||
      failed(shapes.expect(getResult(), "result", {"M", "K"})))
    return failure();
  for (auto [value, name] : {std::pair<Value, const char *>{getInput(), "input"},
                             {getAddend(), "addend"},
                             {getSum(), "sum"}})
    if (!cast<RankedTensorType>(value.getType()).getElementType().isF32())
      return emitOpError() << name << " must be f32: the residual stream is summed in f32";
  return verifyNormParameters(*this, shapes.get("K"), shapes.get("G"), getEpsilon(),
                              getWeightOffset());
}

LogicalResult RotaryOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getInput(), "input", {"N", "C"})) ||
      failed(shapes.expect(getPositions(), "positions", {"N"})) ||
      failed(shapes.expect(getInvFreq(), "inv_freq", {"R/2"})) ||
      failed(shapes.expect(getResult(), "result", {"N", "C"})))
    return failure();
  int64_t headDim = getHeadDimAttr().getInt();
  FailureOr<int64_t> heads = perHead(*this, getInput(), "input", 1);
  if (failed(heads))
    return failure();
  if (*heads % headDim != 0)
    return emitOpError() << "input has " << *heads << " columns, not whole heads of head_dim "
                         << headDim;
  int64_t half = shapes.get("R/2");
  if (ShapedType::isDynamic(half) || half == 0)
    return emitOpError("inv_freq must have a static, non-zero length");
  int64_t offset = getOffsetAttr().getInt();
  if (offset < 0 || offset + 2 * half > headDim)
    return emitOpError() << "the rotated columns [" << offset << ", " << offset + 2 * half << ") do not lie in a head of "
                         << headDim << " columns";
  if (!std::isfinite(getScale().convertToDouble()))
    return emitOpError("scale must be finite");
  return success();
}

LogicalResult AttentionOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getQuery(), "query", {"N", "Hq*D"})) ||
      failed(shapes.expect(getKey(), "key", {"N", "Hkv*Dk"})) ||
      failed(shapes.expect(getValue(), "value", {"N", "Hkv*Dv"})) ||
      failed(shapes.expect(getPositions(), "positions", {"N"})) ||
      failed(shapes.expect(getSequences(), "sequences", {"N"})) ||
      (getKeyShared() && failed(shapes.expect(getKeyShared(), "key_shared", {"N", "Dr"}))) ||
      (getSinks() && failed(shapes.expect(getSinks(), "sinks", {"Hq"}))) ||
      failed(shapes.expect(getResult(), "result", {"N", "Hq*Dv"})))
    return failure();
  int64_t heads = getNumHeadsAttr().getInt(), kvHeads = getNumKvHeadsAttr().getInt();
  if (heads % kvHeads != 0)
    return emitOpError() << "num_heads = " << heads << " is not a multiple of num_kv_heads = "
                         << kvHeads;
  if (failed(shapes.bind("Hq", heads, "attribute num_heads")))
    return failure();
  FailureOr<int64_t> d = perHead(*this, getQuery(), "query", heads);
  FailureOr<int64_t> dk = failed(d) ? d : perHead(*this, getKey(), "key", kvHeads);
  FailureOr<int64_t> dv = failed(dk) ? dk : perHead(*this, getValue(), "value", kvHeads);
  FailureOr<int64_t> dvOut = failed(dv) ? dv : perHead(*this, getResult(), "result", heads);
  if (failed(dvOut))
    return failure();
  int64_t shared = getKeyShared() ? dimOf(getKeyShared(), 1) : 0;
  if (ShapedType::isDynamic(shared))
    return emitOpError("key_shared needs a static column count");
  if (*d != *dk + shared)
    return emitOpError() << "query heads have " << *d << " columns, but keys have " << *dk
                         << (shared ? " + " + std::to_string(shared) + " shared" : std::string())
                         << " columns";
  if (*dvOut != *dv)
    return emitOpError() << "result heads have " << *dvOut << " columns, values " << *dv;
  double scale = getScale().convertToDouble();
  if (!(scale > 0.0) || !std::isfinite(scale))
    return emitOpError() << "scale must be positive and finite, got " << scale;
  if (getWindowAttr().getInt() < 0)
    return emitOpError() << "window must be non-negative (0: no window), got "
                         << getWindowAttr().getInt();
  return success();
}
