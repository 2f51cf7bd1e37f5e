//===- Emitter.cpp - the printers' shared emitter -------------------------===//
//
// A direct C++ printer rather than MLIR's EmitC dialect: every op of the
// grouped phase becomes one call of a runtime kernel whose arguments are
// pointers into three memory regions (inputs/outputs, the mapped weights, one
// workspace) plus sizes that are constants or multiples of the token count T.
// EmitC would model the same calls as emitc.call_opaque with verbatim operands
// and add a conversion step without checking anything more; printing the
// calls directly keeps one function per op kind, readable output and precise
// errors at the op (docs/artifact.md, "Why a direct printer").
//
// This file holds what both targets share (EmitterBase.h says what that is);
// CpuPrinter.cpp and CudaPrinter.cpp print the target's calls.
//
//===----------------------------------------------------------------------===//

#include "EmitterBase.h"

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Dialect/Utils/ConstantData.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

using namespace mlir;
namespace moe = moec::moe;

namespace moec::codegen {

/// The element count of `dims` as a Dim (at most one may scale with T).
std::optional<Dim> countOf(ArrayRef<Dim> dims) {
  Dim count;
  for (Dim dim : dims) {
    if (dim.perToken && count.perToken)
      return std::nullopt; // T² elements: not a shape this target plans for
    count.size *= dim.size;
    count.perToken |= dim.perToken;
  }
  return count;
}

std::string dimExpr(Dim dim) {
  if (!dim.perToken)
    return std::to_string(dim.size);
  return dim.size == 1 ? "T" : std::to_string(dim.size) + " * T";
}

std::string shapeText(ArrayRef<Dim> dims) {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (i)
      text += ",";
    text += dim.perToken ? (dim.size == 1 ? "-1" : "?") : std::to_string(dim.size);
  }
  return text + "]";
}

/// A float as an exact C++ literal.
std::string floatLiteral(double value) {
  float f = static_cast<float>(value);
  if (std::isinf(f))
    return f > 0 ? "std::numeric_limits<float>::infinity()"
                 : "-std::numeric_limits<float>::infinity()";
  char text[64];
  std::snprintf(text, sizeof(text), "%af", static_cast<double>(f));
  return text;
}

std::optional<std::string> cppElementType(Type type) {
  if (type.isF32())
    return std::string("float");
  if (isa<Float8E4M3FNType>(type)) // e4m3 bits (runtime/include/moec/runtime/Float8.h)
    return std::string("uint8_t");
  if (type.isInteger(32))
    return std::string("int32_t");
  if (type.isInteger(64))
    return std::string("int64_t");
  return std::nullopt;
}

std::string manifestDType(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return "f8e4m3";
  return type.isF32() ? "f32" : type.isInteger(32) ? "i32" : "i64";
}

/// f32 to bf16 bits, rounded to nearest even (NaN stays a quiet NaN).
static uint16_t toBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

bool isView(Operation *op) {
  return isa<onnx::ReshapeOp, onnx::SqueezeOp, onnx::UnsqueezeOp, onnx::IdentityOp>(op);
}

namespace {
/// The bytes of a constant weight: a view of the module's storage, or for a
/// splat the expanded bytes in `storage`.
std::optional<ArrayRef<char>> constantBytes(Value value,
                                            std::shared_ptr<std::vector<char>> &storage) {
  if (std::optional<ArrayRef<char>> bytes = getConstantBytes(value))
    return bytes;
  Attribute attr;
  if (auto constant = value.getDefiningOp<arith::ConstantOp>())
    attr = constant.getValue();
  else if (auto constant = value.getDefiningOp<onnx::ConstantOp>())
    attr = constant.getValue() ? Attribute(*constant.getValue()) : Attribute();
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat() || dense.getElementType().isInteger(1))
    return std::nullopt;
  ArrayRef<char> one = dense.getRawData();
  storage = std::make_shared<std::vector<char>>();
  storage->reserve(one.size() * dense.getNumElements());
  for (int64_t i = 0; i < dense.getNumElements(); ++i)
    storage->insert(storage->end(), one.begin(), one.end());
  return ArrayRef<char>(*storage);
}

std::string constantName(Value value, size_t index) {
  Attribute attr;
  if (auto constant = value.getDefiningOp<arith::ConstantOp>())
    attr = constant.getValue();
  else if (auto constant = value.getDefiningOp<onnx::ConstantOp>())
    attr = constant.getValue() ? Attribute(*constant.getValue()) : Attribute();
  std::string name;
  if (auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(attr))
    name = resource.getRawHandle().getKey().str();
  // A name given by hand (bench/make_block_mlir.py names its splat weights so
  // that bench/write_weights.py can fill them by name).
  if (Operation *def = value.getDefiningOp())
    if (auto given = def->getAttrOfType<StringAttr>("moec.name"))
      name = given.str();
  if (name.empty())
    name = "constant" + std::to_string(index);
  for (char &c : name)
    if (!llvm::isPrint(c) || c == ' ')
      c = '_';
  return name;
}
} // namespace

Value Emitter::viewRoot(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isView(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

LogicalResult Emitter::checkTensor(Operation *op, Value value, StringRef role, bool floatOnly,
                                   bool fp8) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return unsupported(op, role + " is not a ranked tensor");
  Type element = type.getElementType();
  if (isa<Float8E4M3FNType>(element)) {
    if (!fp8)
      return unsupported(op, role + " is FP8, which only moe.quantize and moe.grouped_matmul "
                                    "take");
    return success();
  }
  if (floatOnly && !element.isF32())
    return unsupported(op, role + " has element type " + llvm::formatv("{0}", element).str() +
                               "; " + targetPhrase() + " computes in f32 only");
  if (!floatOnly && !cppElementType(element))
    return unsupported(op, role + " has element type " + llvm::formatv("{0}", element).str() +
                               "; expected f32, i32 or i64");
  return success();
}

/// Dims of `result`: static sizes from its type; a dynamic dimension 0 takes
/// `rows`, the op's row count (which scales with T).
FailureOr<SmallVector<Dim>> Emitter::resultDims(Operation *op, Value result,
                                                std::optional<Dim> rows) {
  auto type = cast<RankedTensorType>(result.getType());
  SmallVector<Dim> dims;
  for (auto [i, size] : llvm::enumerate(type.getShape())) {
    if (!ShapedType::isDynamic(size)) {
      dims.push_back({size, false});
      continue;
    }
    if (i != 0 || !rows)
      return LogicalResult(unsupported(op, "dynamic dimension " + Twine(i) +
                                         " of a result; only the token (row) dimension may be "
                                         "dynamic"));
    dims.push_back(*rows);
  }
  return dims;
}

FailureOr<ValueInfo *> Emitter::define(Operation *op, Value result, std::optional<Dim> rows,
                                       bool fp8) {
  if (failed(checkTensor(op, result, "a result", /*floatOnly=*/false, fp8)))
    return failure();
  FailureOr<SmallVector<Dim>> dims = resultDims(op, result, rows);
  if (failed(dims))
    return failure();
  std::optional<Dim> count = countOf(*dims);
  if (!count)
    return LogicalResult(unsupported(op, "a result with two token dimensions"));
  Type element = cast<RankedTensorType>(result.getType()).getElementType();
  ValueInfo &info = values[result];
  info.var = "v" + std::to_string(nextVar++);
  info.dims = *dims;
  info.elementType = element;
  info.bf16 = storedAsBF16(result);
  std::string cppType = info.bf16 ? "BF16" : *cppElementType(element);
  auto output = outputOf.find(result);
  // Planned for the largest T; every intermediate keeps its own slot (the
  // grouped phase has a handful, so reuse would save little).
  uint64_t elements = static_cast<uint64_t>(count->size) * (count->perToken ? maxTokens : 1);
  declareResult(info, cppType, elements * (info.bf16 ? 2 : element.getIntOrFloatBitWidth() / 8),
                output == outputOf.end() ? std::nullopt : std::optional<unsigned>(output->second));
  return &info;
}

FailureOr<ValueInfo *> Emitter::operand(Operation *op, Value value, StringRef role,
                                        bool floatOnly, bool fp8) {
  if (failed(checkTensor(op, value, role, floatOnly, fp8)))
    return failure();
  if (auto it = values.find(value); it != values.end())
    return &it->second;
  Operation *def = value.getDefiningOp();
  if (!def || !isa<arith::ConstantOp, onnx::ConstantOp>(def))
    return LogicalResult(unsupported(op, role + " is defined by '" +
                                   (def ? def->getName().getStringRef() : StringRef("?")) +
                                   "', which has no code"));
  // A weight: copied into weights.bin at the next 256-byte boundary (external
  // weights: only its place is planned).
  auto type = cast<RankedTensorType>(value.getType());
  std::shared_ptr<std::vector<char>> expanded;
  std::optional<ArrayRef<char>> bytes;
  if (externalWeights) {
    if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
      return LogicalResult(unsupported(op, role + " is a constant of no static size"));
    bytes = ArrayRef<char>();
  } else {
    bytes = constantBytes(value, expanded);
  }
  if (!bytes)
    return LogicalResult(unsupported(op, role + " is a constant whose bytes cannot be read"));
  WeightEntry entry;
  entry.bytes = *bytes;
  entry.expanded = std::move(expanded);
  entry.size = externalWeights ? static_cast<uint64_t>(type.getNumElements()) *
                                     (type.getElementTypeBitWidth() / 8)
                               : entry.bytes.size();
  return &placeWeight(value, std::move(entry), values[value]);
}

ValueInfo &Emitter::placeWeight(Value value, WeightEntry entry, ValueInfo &info) {
  auto type = cast<RankedTensorType>(value.getType());
  std::vector<WeightEntry> &weights = result.weights;
  entry.name = constantName(value, weights.size());
  entry.elementType = type.getElementType();
  entry.shape.assign(type.getShape().begin(), type.getShape().end());
  entry.offset = alignUp(result.weightsBytes);
  result.weightsBytes = entry.offset + entry.size;
  info.var = "w" + std::to_string(weights.size());
  info.weightOffset = entry.offset;
  for (int64_t size : type.getShape())
    info.dims.push_back({size, false});
  info.elementType = entry.elementType;
  std::string cppType = entry.bf16 ? "uint16_t" : *cppElementType(entry.elementType);
  decl("const " + cppType + " *" + info.var + " = reinterpret_cast<const " + cppType +
       " *>(weights + " + std::to_string(entry.offset) + "); // " + entry.name +
       (entry.bf16 ? " (bf16)" : ""));
  weights.push_back(std::move(entry));
  return info;
}

FailureOr<ValueInfo *> Emitter::bf16Weight(Operation *op, Value value, StringRef role) {
  if (failed(checkTensor(op, value, role, true)))
    return failure();
  if (auto it = bf16Values.find(value); it != bf16Values.end())
    return &it->second;
  auto type = cast<RankedTensorType>(value.getType());
  Operation *def = value.getDefiningOp();
  if (!def || !isa<arith::ConstantOp, onnx::ConstantOp>(def) || !type.getElementType().isF32() ||
      !type.hasStaticShape())
    return LogicalResult(unsupported(
        op, role + " must be an f32 constant of static shape to be stored as bf16 "
                   "(--expert-weights=bf16)"));
  WeightEntry entry;
  entry.bf16 = true;
  entry.size = static_cast<uint64_t>(type.getNumElements()) * 2;
  if (!externalWeights) {
    std::shared_ptr<std::vector<char>> expanded;
    std::optional<ArrayRef<char>> bytes = constantBytes(value, expanded);
    if (!bytes || bytes->size() != static_cast<size_t>(type.getNumElements()) * 4)
      return LogicalResult(unsupported(op, role + " is a constant whose bytes cannot be read"));
    auto converted = std::make_shared<std::vector<char>>(entry.size);
    for (int64_t i = 0; i < type.getNumElements(); ++i) {
      float f;
      std::memcpy(&f, bytes->data() + 4 * i, 4);
      uint16_t half = toBF16(f);
      std::memcpy(converted->data() + 2 * i, &half, 2);
    }
    entry.expanded = std::move(converted);
    entry.bytes = ArrayRef<char>(*entry.expanded);
  }
  return &placeWeight(value, std::move(entry), bf16Values[value]);
}

std::string Emitter::optionalOperand(Operation *op, Value value, StringRef role, bool &failedFlag) {
  if (!value)
    return "nullptr";
  FailureOr<ValueInfo *> info = operand(op, value, role);
  if (failed(info)) {
    failedFlag = true;
    return "";
  }
  return (*info)->var;
}

std::string Emitter::epilogue(std::optional<moe::ActivationAttr> activation,
                              std::optional<moe::GateUpLayout> layout) {
  if (!activation)
    return "Epilogue{}";
  const char *kind = "Identity";
  switch (activation->getKind()) {
  case moe::ActivationKind::SiLU:
    kind = "SiLU";
    break;
  case moe::ActivationKind::GELU:
    kind = "GELU";
    break;
  case moe::ActivationKind::ReLU:
    kind = "ReLU";
    break;
  case moe::ActivationKind::Identity:
    kind = "Identity";
    break;
  }
  const char *layoutName = "None";
  if (layout == moe::GateUpLayout::Concatenated)
    layoutName = "Concatenated";
  else if (layout == moe::GateUpLayout::Interleaved)
    layoutName = "Interleaved";
  return llvm::formatv("Epilogue{true, ActivationKind::{0}, GateUpLayout::{1}, {2}, {3}, {4}}",
                       kind, layoutName, floatLiteral(activation->getAlphaValue()),
                       floatLiteral(activation->getBetaValue()),
                       floatLiteral(activation->getLimitValue()))
      .str();
}

static LogicalResult checkEpilogueLayout(Operation *op, std::optional<moe::GateUpLayout> layout,
                                  bool hasEpilogue) {
  if (hasEpilogue && layout == moe::GateUpLayout::Separate)
    return op->emitError() << "cannot generate code for '" << op->getName()
                           << "': a 'separate' epilogue layout (moe-lower-layer concatenates "
                              "gate and up first)";
  return success();
}

LogicalResult Emitter::emitView(Operation *op) {
  Value input = op->getOperand(0), result = op->getResult(0);
  FailureOr<ValueInfo *> in = operand(op, input, "the data operand", /*floatOnly=*/false);
  if (failed(in) || failed(checkTensor(op, result, "the result", false)))
    return failure();
  auto inType = cast<RankedTensorType>(input.getType());
  auto outType = cast<RankedTensorType>(result.getType());
  // Only the leading dimensions may change: the row length stays, so the
  // result is the same bytes (a view), whatever the op's shape operand says.
  if (inType.getRank() == 0 || outType.getRank() == 0 ||
      inType.getShape().back() != outType.getShape().back() ||
      ShapedType::isDynamic(inType.getShape().back()))
    return unsupported(op, "it changes the innermost dimension (" +
                               llvm::formatv("{0} to {1}", inType, outType).str() +
                               "); only changes of the leading dimensions are views");
  std::optional<Dim> count = countOf((*in)->dims);
  Dim known{1, false};
  int dynamicDims = 0;
  for (int64_t size : outType.getShape()) {
    if (ShapedType::isDynamic(size))
      ++dynamicDims;
    else
      known.size *= size;
  }
  SmallVector<Dim> dims;
  if (dynamicDims > 1 || (dynamicDims == 1 && (!count->perToken || count->size % known.size)) ||
      (dynamicDims == 0 && count->perToken))
    return unsupported(op, llvm::formatv("cannot map {0} onto {1} as a view", inType, outType));
  for (int64_t size : outType.getShape())
    dims.push_back(ShapedType::isDynamic(size) ? Dim{count->size / known.size, true}
                                                 : Dim{size, false});
  if (dynamicDims == 0 && count->size != known.size)
    return unsupported(op, llvm::formatv("{0} and {1} hold different element counts", inType,
                                         outType));
  ValueInfo info = **in;
  info.dims = dims;
  values[result] = info;
  return success();
}

bool Emitter::linearTakesBF16(moe::LinearOp op) {
  // Shared experts' weights follow --expert-weights=bf16 onto the tensor cores;
  // the router's stay f32, since its logits choose the experts and bf16 would
  // flip near ties. Weights that are not constants, or whose K the bf16 kernel
  // cannot load (K % 8), stay f32 too.
  bool router = llvm::any_of(op.getResult().getUsers(),
                             [](Operation *user) { return isa<moe::RouteOp>(user); });
  auto weightType = dyn_cast<RankedTensorType>(op.getWeight().getType());
  Operation *weightDef = op.getWeight().getDefiningOp();
  return bf16ExpertWeights && !router && weightType && weightType.hasStaticShape() &&
         weightType.getRank() == 2 && weightType.getDimSize(1) % 8 == 0 && weightDef &&
         isa<arith::ConstantOp, onnx::ConstantOp>(weightDef);
}

bool Emitter::storedAsBF16(Value value) {
  if (!bf16ExpertWeights || value.use_empty() ||
      !cast<RankedTensorType>(value.getType()).getElementType().isF32())
    return false;
  // Producers that can write bf16: permute, and the bf16-weight kernels (not
  // the FP8 grouped matmul, not an f32 linear).
  Operation *def = value.getDefiningOp();
  auto producerMatmul = dyn_cast_or_null<moe::GroupedMatmulOp>(def);
  auto producerLinear = dyn_cast_or_null<moe::LinearOp>(def);
  if (!isa_and_nonnull<moe::PermuteOp>(def) &&
      !(producerMatmul && !producerMatmul.getLhsScales() && !producerMatmul.getWeightScales()) &&
      !(producerLinear && linearTakesBF16(producerLinear)))
    return false;
  // --expert-outputs=bf16: the experts' results rounded to bf16 for the
  // combine, a precision choice (docs/design.md, "bf16 expert outputs"), unlike
  // the rows below, which their readers round so anyway.
  // (A grouped matmul that got past the check above has no scales: bf16 weights.)
  if (bf16ExpertOutputs && producerMatmul &&
      llvm::all_of(value.getUses(), [](OpOperand &use) {
        auto combine = dyn_cast<moe::CombineOp>(use.getOwner());
        return combine && use.get() == combine.getRows() &&
               combine.getRows() != combine.getAddend();
      }))
    return true;
  return llvm::all_of(value.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto matmul = dyn_cast<moe::GroupedMatmulOp>(user))
      return use.get() == matmul.getLhs() && !matmul.getLhsScales() &&
             !matmul.getWeightScales() && matmul.getLhs() != matmul.getWeights();
    if (auto linear = dyn_cast<moe::LinearOp>(user))
      return use.get() == linear.getInput() && linear.getInput() != linear.getWeight() &&
             linearTakesBF16(linear);
    return false;
  });
}

LogicalResult Emitter::emitLinear(moe::LinearOp op) {
  comment(op);
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  bool bf16 = linearTakesBF16(op);
  FailureOr<ValueInfo *> x = operand(op, op.getInput(), "the input");
  FailureOr<ValueInfo *> w = bf16 ? bf16Weight(op, op.getWeight(), "the weight")
                                  : operand(op, op.getWeight(), "the weight");
  bool bad = false;
  std::string bias = optionalOperand(op, op.getBias(), "the bias", bad);
  if (failed(x) || failed(w) || bad)
    return failure();
  if ((*x)->dims.size() != 2 || (*w)->dims.size() != 2)
    return unsupported(op, "the input and weight must be matrices");
  Dim m = (*x)->dims[0];
  FailureOr<ValueInfo *> y = define(op, op.getResult(), m);
  if (failed(y))
    return failure();
  kernel(bf16 ? "linearBF16" : "linear",
         {(*x)->var, dimExpr(m), dimExpr((*x)->dims[1]), (*w)->var, dimExpr((*w)->dims[0]), bias,
          epilogue(op.getEpilogue(), op.getEpilogueLayout()), (*y)->var});
  return success();
}

LogicalResult Emitter::emitRoute(moe::RouteOp op) {
  comment(op);
  FailureOr<ValueInfo *> logits = operand(op, op.getLogits(), "the logits");
  bool bad = false;
  std::string bias = optionalOperand(op, op.getCorrectionBias(), "the correction bias", bad);
  if (failed(logits) || bad)
    return failure();
  if ((*logits)->dims.size() != 2)
    return unsupported(op, "the logits must be a matrix");
  Dim tokens = (*logits)->dims[0];
  FailureOr<ValueInfo *> ids = define(op, op.getExpertIds(), tokens);
  if (failed(ids))
    return failure();
  FailureOr<ValueInfo *> weights = define(op, op.getWeights(), tokens);
  if (failed(weights))
    return failure();
  const char *kind = "SoftmaxTopK";
  if (op.getRouting() == moe::RoutingKind::TopKSoftmax)
    kind = "TopKSoftmax";
  else if (op.getRouting() == moe::RoutingKind::SigmoidGroupTopK)
    kind = "SigmoidGroupTopK";
  kernel("route", {(*logits)->var, dimExpr(tokens), dimExpr((*logits)->dims[1]), bias,
                  llvm::formatv("Routing{RoutingKind::{0}, {1}, {2}, {3}, {4}, {5}}", kind,
                                op.getTopK(), op.getNormalize() ? "true" : "false",
                                op.getNumGroups(), op.getTopkGroups(),
                                floatLiteral(op.getRoutedScalingFactor().convertToDouble()))
                      .str(),
                  (*ids)->var, (*weights)->var});
  return success();
}

LogicalResult Emitter::emitSort(moe::SortOp op) {
  comment(op);
  FailureOr<ValueInfo *> ids = operand(op, op.getExpertIds(), "the expert ids", false);
  if (failed(ids))
    return failure();
  std::optional<Dim> slots = countOf((*ids)->dims);
  FailureOr<ValueInfo *> permutation = define(op, op.getPermutation(), slots);
  if (failed(permutation))
    return failure();
  FailureOr<ValueInfo *> offsets = define(op, op.getOffsets(), std::nullopt);
  if (failed(offsets))
    return failure();
  FailureOr<ValueInfo *> numValid = define(op, op.getNumValid(), std::nullopt);
  if (failed(numValid))
    return failure();
  std::string idsVar = (*ids)->var;
  if ((*ids)->elementType.isInteger(64)) {
    // The kernel sorts i32 ids; an i64 id outside i32's range is no local
    // expert either, so it becomes -1, which sorts into the sentinel tail.
    idsVar = workspaceInt32(*slots);
    narrowIds(**ids, *slots, idsVar);
  } else if (!(*ids)->elementType.isInteger(32)) {
    return unsupported(op, "expert ids must be i32 or i64");
  }
  std::vector<std::string> args = {idsVar,
                                   dimExpr(*slots),
                                   std::to_string(op.getNumExperts()),
                                   std::to_string(op.getFirstExpert()),
                                   (*permutation)->var,
                                   (*offsets)->var,
                                   (*numValid)->var};
  addSortArgs(op, *slots, args);
  kernel("sortByExpert", args, /*pool=*/false);
  return success();
}

LogicalResult Emitter::emitPermute(moe::PermuteOp op) {
  comment(op);
  if (fusedIntoQuantize(op)) {
    line("// (fused into the moe.quantize below)");
    return success();
  }
  FailureOr<ValueInfo *> hidden = operand(op, op.getHidden(), "the hidden states");
  FailureOr<ValueInfo *> permutation = operand(op, op.getPermutation(), "the permutation", false);
  FailureOr<ValueInfo *> numValid = operand(op, op.getNumValid(), "num_valid", false);
  if (failed(hidden) || failed(permutation) || failed(numValid))
    return failure();
  if ((*hidden)->dims.size() != 2)
    return unsupported(op, "the hidden states must be a matrix");
  FailureOr<ValueInfo *> rows = define(op, op.getResult(), (*permutation)->dims[0]);
  if (failed(rows))
    return failure();
  printPermute(op, **hidden, **permutation, **numValid, **rows);
  return success();
}

LogicalResult Emitter::emitGroupedMatmul(moe::GroupedMatmulOp op) {
  comment(op);
  if (op.getLhsScales() || op.getWeightScales())
    return emitGroupedMatmulFP8(op);
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  bool bf16 = bf16ExpertWeights;
  FailureOr<ValueInfo *> lhs = operand(op, op.getLhs(), "the lhs");
  FailureOr<ValueInfo *> w = bf16 ? bf16Weight(op, op.getWeights(), "the weights")
                                  : operand(op, op.getWeights(), "the weights");
  FailureOr<ValueInfo *> offsets = operand(op, op.getOffsets(), "the offsets", false);
  bool bad = false;
  std::string bias = optionalOperand(op, op.getBias(), "the bias", bad);
  if (failed(lhs) || failed(w) || failed(offsets) || bad)
    return failure();
  if ((*lhs)->dims.size() != 2 || (*w)->dims.size() != 3)
    return unsupported(op, "the lhs must be [S, K] and the weights [E, N, K]");
  Dim rows = (*lhs)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), rows);
  if (failed(out))
    return failure();
  std::optional<moe::GateUpLayout> layout = op.getEpilogueLayout();
  if (bf16)
    layout = interleaveOnDevice(op, **w, layout);
  std::vector<std::string> args = {(*lhs)->var, dimExpr((*lhs)->dims[1]), (*w)->var,
                                   dimExpr((*w)->dims[0]), dimExpr((*w)->dims[1]),
                                   (*offsets)->var, bias, epilogue(op.getEpilogue(), layout),
                                   (*out)->var};
  if (launchTakesRowCount())
    args.insert(args.begin() + 1, dimExpr(rows));
  if (bf16) {
    // The kernel loads 8 bf16 weights (16 bytes) at a time.
    int64_t k = (*w)->dims[2].size;
    if (k % 8 != 0)
      return unsupported(op, "K = " + std::to_string(k) +
                                 " is not a multiple of 8, which bf16 expert weights need");
    kernel(offsetsSettled(op) ? "groupedMatmulBF16SettledOffsets" : "groupedMatmulBF16", args);
    return success();
  }
  kernel("groupedMatmul", args);
  return success();
}

/// The FP8 grouped matmul: e4m3 weights with block scales, and e4m3 rows with
/// their per-row group scales (from moe.quantize), or (CPU only) f32 rows.
LogicalResult Emitter::emitGroupedMatmulFP8(moe::GroupedMatmulOp op) {
  FailureOr<std::vector<std::string>> args = fp8MatmulArgs(op);
  if (failed(args))
    return failure();
  if (fusedIntoQuantize(op)) {
    line("// (fused into the moe.quantize below)");
    return success();
  }
  FailureOr<ValueInfo *> out = define(op, op.getResult(), fp8MatmulRows(op));
  if (failed(out))
    return failure();
  args->push_back((*out)->var);
  if (!op.getLhsScales())
    kernel("groupedMatmulFP8Weights", *args);
  else
    kernel(offsetsSettled(op) ? "groupedMatmulFP8SettledOffsets" : "groupedMatmulFP8", *args);
  return success();
}

/// After the sort that wrote `op`'s offsets, a kernel of its own produced
/// `op`'s rows: the permute of that sort's permutation (fused into a quantize
/// or not) or a grouped matmul on the same offsets (quantized or not). So the
/// sort ran at least two launches before `op`, which may stream its first
/// weights while its predecessor still runs (groupedMatmul*SettledOffsets).
/// Any sort would not do: a second one emitted right before `op` would be its
FailureOr<std::vector<std::string>> Emitter::fp8MatmulArgs(moe::GroupedMatmulOp op) {
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  bool fp8Rows = static_cast<bool>(op.getLhsScales());
  if (!op.getWeightScales())
    return LogicalResult(unsupported(op, "FP8 rows with weights that are not FP8; " +
                                             targetPhrase() +
                                             " multiplies FP8 rows only with FP8 weights"));
  if (failed(checkFP8Rows(op, fp8Rows)))
    return failure();
  FailureOr<ValueInfo *> lhs = operand(op, op.getLhs(), "the lhs", true, /*fp8=*/true);
  FailureOr<ValueInfo *> w = operand(op, op.getWeights(), "the weights", true, /*fp8=*/true);
  FailureOr<ValueInfo *> weightScales = operand(op, op.getWeightScales(), "the weight scales");
  FailureOr<ValueInfo *> offsets = operand(op, op.getOffsets(), "the offsets", false);
  bool bad = false;
  std::string bias = optionalOperand(op, op.getBias(), "the bias", bad);
  std::string lhsScales = optionalOperand(op, op.getLhsScales(), "the lhs scales", bad);
  if (failed(lhs) || failed(w) || failed(weightScales) || failed(offsets) || bad)
    return failure();
  if ((*lhs)->dims.size() != 2 || (*w)->dims.size() != 3)
    return LogicalResult(unsupported(op, "the lhs must be [S, K] and the weights [E, N, K]"));
  std::vector<std::string> args = {(*lhs)->var};
  if (launchTakesRowCount())
    args.push_back(dimExpr((*lhs)->dims[0]));
  if (fp8Rows)
    args.push_back(lhsScales);
  args.insert(args.end(), {dimExpr((*lhs)->dims[1]), (*w)->var, (*weightScales)->var,
                           dimExpr((*w)->dims[0]), dimExpr((*w)->dims[1]), (*offsets)->var, bias,
                           epilogue(op.getEpilogue(), op.getEpilogueLayout())});
  return args;
}

FailureOr<std::pair<ValueInfo *, ValueInfo *>> Emitter::defineCodes(moe::QuantizeOp op,
                                                                    Dim rows) {
  FailureOr<ValueInfo *> q = define(op, op.getResult(), rows, /*fp8=*/true);
  if (failed(q))
    return failure();
  FailureOr<ValueInfo *> scales = define(op, op.getScales(), rows);
  if (failed(scales))
    return failure();
  return std::make_pair(*q, *scales);
}

LogicalResult Emitter::emitQuantize(moe::QuantizeOp op) {
  comment(op);
  // The rows: moe.permute's (fused here on CUDA: its f32 rows are never
  // written), or the input's.
  // Or an FP8 grouped matmul's result, done here (its f32 result never written).
  if (auto matmul = op.getInput().getDefiningOp<moe::GroupedMatmulOp>();
      matmul && fusedIntoQuantize(matmul))
    return emitMatmulQuantize(op, matmul);
  auto permute = op.getInput().getDefiningOp<moe::PermuteOp>();
  bool fused = permute && fusedIntoQuantize(permute);
  FailureOr<ValueInfo *> input = fused ? operand(permute, permute.getHidden(), "the hidden states")
                                       : operand(op, op.getInput(), "the input");
  FailureOr<ValueInfo *> permutation, numValid;
  if (fused) {
    permutation = operand(permute, permute.getPermutation(), "the permutation", false);
    numValid = operand(permute, permute.getNumValid(), "num_valid", false);
  }
  if (failed(input) || (fused && (failed(permutation) || failed(numValid))))
    return failure();
  if ((*input)->dims.size() != 2)
    return unsupported(op, fused ? "the hidden states must be a matrix"
                                 : "the input must be a matrix");
  Dim rows = fused ? (*permutation)->dims[0] : (*input)->dims[0];
  FailureOr<std::pair<ValueInfo *, ValueInfo *>> codes = defineCodes(op, rows);
  if (failed(codes))
    return failure();
  ValueInfo *q = codes->first, *scales = codes->second;
  std::string k = dimExpr((*input)->dims[1]);
  if (fused)
    printPermuteQuantize(permute, **input, **permutation, **numValid, *q, *scales);
  else
    printQuantize(**input, rows, k, writtenRows(op.getInput(), rows), *q, *scales);
  return success();
}

LogicalResult Emitter::emitCombine(moe::CombineOp op) {
  comment(op);
  FailureOr<ValueInfo *> rows = operand(op, op.getRows(), "the rows");
  FailureOr<ValueInfo *> permutation = operand(op, op.getPermutation(), "the permutation", false);
  FailureOr<ValueInfo *> weights = operand(op, op.getWeights(), "the routing weights");
  FailureOr<ValueInfo *> numValid = operand(op, op.getNumValid(), "num_valid", false);
  bool bad = false;
  std::string addend = optionalOperand(op, op.getAddend(), "the addend", bad);
  std::string gate = optionalOperand(op, op.getAddendGate(), "the addend gate", bad);
  if (failed(rows) || failed(permutation) || failed(weights) || failed(numValid) || bad)
    return failure();
  if ((*rows)->dims.size() != 2 || (*weights)->dims.size() != 2)
    return unsupported(op, "the rows and routing weights must be matrices");
  Dim tokens = (*weights)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), tokens);
  if (failed(out))
    return failure();
  printCombine(op, **rows, **permutation, **weights, **numValid, addend, gate, **out);
  return success();
}

/// tensor.concat of static shapes: what moe-lower-layer leaves when separate
/// gate and up weights are function arguments rather than constants (the
/// hand-written expert loops). A copy per operand per outer index.
LogicalResult Emitter::emitConcat(tensor::ConcatOp op) {
  comment(op);
  auto resultType = cast<RankedTensorType>(op.getType());
  if (!resultType.hasStaticShape())
    return unsupported(op, "only concatenations of static shapes are supported");
  SmallVector<ValueInfo *> parts;
  for (Value input : op.getInputs()) {
    FailureOr<ValueInfo *> info = operand(op, input, "an operand");
    if (failed(info))
      return failure();
    parts.push_back(*info);
  }
  FailureOr<ValueInfo *> out = define(op, op.getResult(), std::nullopt);
  if (failed(out))
    return failure();
  int64_t dim = op.getDim(), outer = 1;
  for (int64_t i = 0; i < dim; ++i)
    outer *= resultType.getDimSize(i);
  printConcat(**out, parts, dim, outer);
  return success();
}

LogicalResult Emitter::emitReturn(func::ReturnOp op) {
  for (auto [i, value] : llvm::enumerate(op.getOperands())) {
    FailureOr<ValueInfo *> info = operand(op, value, "result " + std::to_string(i), false);
    if (failed(info))
      return failure();
    // The caller sizes outputs from the manifest, where the dynamic dimension
    // is T itself; a result of S = K·T rows (say) would overrun it.
    const SmallVector<Dim> &declared = result.outputs[i].dims;
    bool same = declared.size() == (*info)->dims.size();
    for (size_t d = 0; same && d < declared.size(); ++d)
      same = declared[d].size == (*info)->dims[d].size &&
             declared[d].perToken == (*info)->dims[d].perToken;
    if (!same)
      return unsupported(op, "result " + Twine(i) + " has shape " + shapeText((*info)->dims) +
                                 " ('?': a multiple of the token count T), the output is "
                                 "declared " + shapeText(declared) +
                                 "; an output's dynamic dimension must be T itself");
    std::optional<Dim> count = countOf((*info)->dims);
    printResult(i, value, **info, *count);
  }
  return success();
}

static std::string tensorName(func::FuncOp function, bool input, unsigned index) {
  DictionaryAttr attrs = input ? function.getArgAttrDict(index) : function.getResultAttrDict(index);
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("onnx.name"))
      return name.str();
  return (input ? "input" : "output") + std::to_string(index);
}

LogicalResult Emitter::run() {
  auto declare = [&](Operation *at, Type type, const std::string &name, bool input,
                     std::vector<TensorDecl> &decls) -> FailureOr<SmallVector<Dim>> {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return LogicalResult(at->emitError() << "cannot generate code for '" << name
                                     << "': not a ranked tensor");
    Type element = tensor.getElementType();
    if (!element.isF32() && !(input && (element.isInteger(32) || element.isInteger(64))))
      return LogicalResult(at->emitError()
                     << "cannot generate code for " << (input ? "input" : "output") << " '"
                     << name << "' of element type " << element
                     << ": " << targetPhrase() << " takes f32 tensors (and i32/i64 expert ids) only");
    if (name.empty() || llvm::any_of(name, [](char c) { return !llvm::isPrint(c) || c == ' '; }))
      return LogicalResult(at->emitError() << "cannot generate code for the tensor named '" << name
                                     << "': names in the manifest must be printable, no spaces");
    for (const std::vector<TensorDecl> *list : {&result.inputs, &result.outputs})
      for (const TensorDecl &decl : *list)
        if (decl.name == name)
          return LogicalResult(at->emitError() << "two inputs or outputs are named '" << name << "'");
    SmallVector<Dim> dims;
    int dynamic = 0;
    for (int64_t size : tensor.getShape()) {
      dynamic += ShapedType::isDynamic(size);
      dims.push_back(ShapedType::isDynamic(size) ? Dim{1, true} : Dim{size, false});
    }
    if (dynamic > 1)
      return LogicalResult(at->emitError() << "cannot generate code for '" << name << "' of type "
                                     << tensor << ": only one (token) dimension may be dynamic");
    usesTokens |= dynamic == 1;
    decls.push_back({name, element, dims});
    return dims;
  };

  for (auto [i, arg] : llvm::enumerate(function.getArguments())) {
    FailureOr<SmallVector<Dim>> dims =
        declare(function, arg.getType(), tensorName(function, true, i), true, result.inputs);
    if (failed(dims))
      return failure();
    ValueInfo &info = values[arg];
    info.var = "in" + std::to_string(i);
    info.dims = *dims;
    info.elementType = cast<RankedTensorType>(arg.getType()).getElementType();
    std::string cppType = *cppElementType(info.elementType);
    declareInput(i, info, cppType);
  }
  auto returnOp = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  for (auto [i, type] : llvm::enumerate(function.getResultTypes()))
    if (failed(declare(returnOp, type, tensorName(function, false, i), false, result.outputs)))
      return failure();
  // A result computed by a kernel is written straight into its output buffer
  // (through any views); others are copied at the end.
  for (auto [i, value] : llvm::enumerate(returnOp.getOperands())) {
    Value root = viewRoot(value);
    Operation *def = root.getDefiningOp();
    if (def && isa<moe::MoEDialect>(def->getDialect()) && !outputOf.count(root))
      outputOf[root] = i;
  }
  planOutputs(returnOp);

  auto emitOp = [&](Operation &op) -> LogicalResult {
    return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
        .Case<arith::ConstantOp, onnx::ConstantOp>([](Operation *) {
          return success(); // weights are placed when a kernel reads them
        })
        .Case<moe::LinearOp>([&](auto op) { return emitLinear(op); })
        .Case<moe::RouteOp>([&](auto op) { return emitRoute(op); })
        .Case<moe::SortOp>([&](auto op) { return emitSort(op); })
        .Case<moe::PermuteOp>([&](auto op) { return emitPermute(op); })
        .Case<moe::GroupedMatmulOp>([&](auto op) { return emitGroupedMatmul(op); })
        .Case<moe::CombineOp>([&](auto op) { return emitCombine(op); })
        .Case<tensor::ConcatOp>([&](auto op) { return emitConcat(op); })
        .Case<func::ReturnOp>([&](auto op) { return emitReturn(op); })
        .Case<moe::AllReduceOp>([&](Operation *op) -> LogicalResult {
          return unsupported(op, "expert parallelism (moe.all_reduce) is not supported by " +
                                     targetPhrase() + "; compile without --ep-size");
        })
        .Case<moe::QuantizeOp>([&](auto op) { return emitQuantize(op); })
        .Default([&](Operation *op) -> LogicalResult {
          if (isView(op))
            return emitView(op);
          return unsupported(op,
                             "not an op of the grouped phase that " + targetPhrase() + " knows");
        });
  };
  if (failed(emitOps(emitOp)))
    return failure();

  // Assemble the translation unit.
  llvm::raw_string_ostream os(result.source);
  assemble(os);
  return success();
}

LogicalResult Emitter::emitOps(llvm::function_ref<LogicalResult(Operation &)> emitOp) {
  for (Operation &op : function.getBody().front())
    if (failed(emitOp(op)))
      return failure();
  return success();
}

std::string Emitter::workspaceInt32(const Dim &count) {
  std::string var = "v" + std::to_string(nextVar++);
  uint64_t offset =
      reserve(4 * static_cast<uint64_t>(count.size) * (count.perToken ? maxTokens : 1));
  decl("int32_t *" + var + " = reinterpret_cast<int32_t *>(workspace + " +
       std::to_string(offset) + ");");
  return var;
}

InFlightDiagnostic Emitter::unsupported(Operation *op, const Twine &why) {
  // An imported op's location is its ONNX node's name over the file, which
  // a file:line:col printer drops; name the node in the message.
  std::string node;
  op->getLoc()->walk([&](Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc); name && node.empty())
      node = " (ONNX node '" + name.getName().str() + "')";
    return WalkResult::advance();
  });
  return op->emitError() << "cannot generate code for '" << op->getName() << "'" << node
                         << ": " << why;
}

void Emitter::comment(Operation *op) {
  std::string loc;
  llvm::raw_string_ostream os(loc);
  op->getLoc().print(os);
  line("// " + op->getName().getStringRef() + " " + loc);
}

FailureOr<EmittedModule> emitModule(ModuleOp module, Target target,
                                    const EmitterOptions &options) {
  bool cuda = target == Target::CUDA;
  auto fail = [&](const Twine &message) {
    emitError(module.getLoc()) << message;
    return failure();
  };
  if (options.maxTokens < 1)
    return fail("--max-tokens must be at least 1");
  SmallVector<func::FuncOp> functions;
  for (auto function : module.getOps<func::FuncOp>())
    if (!function.isExternal())
      functions.push_back(function);
  if (functions.size() != 1)
    return fail("cannot generate code: the module holds " + Twine(functions.size()) +
                " functions with a body; the " + (cuda ? "CUDA" : "CPU") +
                " target compiles exactly one");
  func::FuncOp function = functions.front();
  if (!function.getBody().hasOneBlock())
    return fail("cannot generate code for @" + function.getSymName() + ": more than one block");
  std::unique_ptr<Emitter> emitter =
      cuda ? createCudaPrinter(function, options) : createCpuPrinter(function, options);
  if (failed(emitter->run()))
    return failure();
  return std::move(emitter->result);
}

} // namespace moec::codegen
