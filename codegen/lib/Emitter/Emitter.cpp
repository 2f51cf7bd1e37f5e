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
// This file holds what both targets share (EmitterBase.h says what that is)
// but the op-by-op emission (EmitOps.cpp); CpuPrinter.cpp and CudaPrinter.cpp
// print the target's calls.
//
//===----------------------------------------------------------------------===//

#include "EmitterBase.h"

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/runtime/ArtifactFormat.h"
#include "moec/runtime/MXFP4.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/MapVector.h"
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
  // MXFP4 (moec/runtime/MXFP4.h): packed e2m1 codes, e8m0 scale bytes.
  if (isa<Float4E2M1FNType, Float8E8M0FNUType>(type))
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
  if (isa<Float4E2M1FNType>(type))
    return "f4e2m1";
  if (isa<Float8E8M0FNUType>(type))
    return "f8e8m0";
  if (type.isBF16())
    return "bf16";
  return type.isF32() ? "f32" : type.isInteger(32) ? "i32" : "i64";
}

/// f32 to bf16 bits, rounded to nearest even (NaN stays a quiet NaN).
bool isView(Operation *op) {
  return isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::ReshapeOp>(op);
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
                                   bool fp8, bool bf16, bool mxfp4) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return unsupported(op, role + " is not a ranked tensor");
  Type element = type.getElementType();
  if (isa<Float4E2M1FNType, Float8E8M0FNUType>(element)) {
    if (!mxfp4)
      return unsupported(op, role + " is MXFP4 (" + llvm::formatv("{0}", element).str() +
                                 "), which only moe.grouped_matmul's weights take");
    return success();
  }
  if (isa<Float8E4M3FNType>(element)) {
    if (!fp8)
      return unsupported(op, role + " is FP8, which only moe.quantize and moe.grouped_matmul "
                                    "take");
    return success();
  }
  // bf16 is a storage type (moe-cast-experts-bf16): only the kernels that
  // read or write bf16 rows and weights take it.
  if (element.isBF16() && hasBF16Kernels()) {
    if (!bf16)
      return unsupported(op, role + " has element type bf16, which only the bf16-weight "
                                    "matmuls, moe.permute and moe.combine take");
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
                                       bool fp8, bool bf16) {
  if (failed(checkTensor(op, result, "a result", /*floatOnly=*/false, fp8, bf16)))
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
  std::string cppType = element.isBF16() ? "BF16" : *cppElementType(element);
  auto output = outputOf.find(result);
  // Planned for the largest T; on the CPU an intermediate's slot is reused
  // once its last reader has run (a whole model has thousands).
  defining = result;
  declareResult(info, cppType, bytesAtMaxTokens(*count, element.getIntOrFloatBitWidth() / 8),
                output == outputOf.end() ? std::nullopt : std::optional<unsigned>(output->second));
  return &info;
}

FailureOr<ValueInfo *> Emitter::operand(Operation *op, Value value, StringRef role,
                                        bool floatOnly, bool fp8, bool bf16, bool mxfp4) {
  if (failed(checkTensor(op, value, role, floatOnly, fp8, bf16, mxfp4)))
    return failure();
  if (auto it = values.find(value); it != values.end())
    return &it->second;
  Operation *def = value.getDefiningOp();
  if (auto shard = dyn_cast_or_null<moe::EPShardOp>(def))
    return shardOperand(op, shard, role);
  if (!def || !isa<arith::ConstantOp>(def))
    return LogicalResult(unsupported(op, role + " is defined by '" +
                                   (def ? def->getName().getStringRef() : StringRef("?")) +
                                   "', which has no code"));
  // A weight: copied into weights.bin at the next 256-byte boundary (external
  // weights: only its place is planned).
  auto type = cast<RankedTensorType>(value.getType());
  std::shared_ptr<std::vector<char>> expanded;
  std::optional<ArrayRef<char>> bytes;
  // Weights filled at load: a normal or a splat is a fill, not bytes.
  if (result.randomSeed) {
    FailureOr<WeightEntry> filled = fillOf(op, value, role);
    if (failed(filled))
      return failure();
    if (filled->fill != WeightEntry::Fill::Stored)
      return &placeWeight(value, std::move(*filled), values[value]);
  }
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
  // MXFP4 codes, one a byte in the IR, are stored packed (docs/artifact.md).
  if (isa<Float4E2M1FNType>(type.getElementType()))
    packMXFP4(type, entry);
  return &placeWeight(value, std::move(entry), values[value]);
}

FailureOr<ValueInfo *> Emitter::shardOperand(Operation *op, moe::EPShardOp shard, StringRef role) {
  if (failed(expertParallel(shard, shard.getEpSize())))
    return failure();
  Value whole = shard.getInput();
  if (!whole.getDefiningOp<arith::ConstantOp>())
    return LogicalResult(unsupported(
        op, role + " is one rank's share of a tensor that is no constant; only constant "
                   "weights are sharded at load"));
  // The whole constant's entry, stored or filled, then cut to one slice.
  FailureOr<ValueInfo *> placed = operand(op, whole, role, false, true, true, true);
  if (failed(placed))
    return failure();
  WeightEntry &entry = result.weights.back();
  ValueInfo info = **placed;
  values.erase(whole);
  uint64_t epSize = static_cast<uint64_t>(shard.getEpSize());
  if (entry.size % epSize != 0)
    return LogicalResult(unsupported(op, role + "'s bytes do not split evenly over the ranks"));
  // A slice's elements (MXFP4 codes: two a byte).
  unsigned bits = cast<RankedTensorType>(whole.getType()).getElementTypeBitWidth();
  uint64_t sliceElements = entry.size / epSize * 8 / bits;
  if (entry.fill == WeightEntry::Fill::Normal && sliceElements % 4 != 0)
    return LogicalResult(unsupported(op, role + " is a random weight whose rank slices are not "
                                             "a multiple of 4 elements (the generator's group)"));
  // The image holds one slice; weights.bin every rank's.
  result.weightsBytes = entry.offset + entry.size / epSize;
  entry.size /= epSize;
  entry.shard = true;
  auto sliceType = cast<RankedTensorType>(shard.getResult().getType());
  entry.shape.assign(sliceType.getShape().begin(), sliceType.getShape().end());
  info.dims.clear();
  for (int64_t size : sliceType.getShape())
    info.dims.push_back({size, false});
  return &(values[shard.getResult()] = std::move(info));
}

LogicalResult Emitter::expertParallel(Operation *op, int64_t epSize) {
  if (!hasExpertParallelism())
    return unsupported(op, "expert parallelism with one artifact for every rank is not "
                           "supported by " + targetPhrase() + " yet; compile with --target=cpu");
  if (result.epSize && result.epSize != epSize)
    return unsupported(op, "the program mixes " + std::to_string(result.epSize) + " and " +
                               std::to_string(epSize) + " expert-parallel ranks");
  result.epSize = epSize;
  return success();
}

void Emitter::packMXFP4(RankedTensorType type, WeightEntry &entry) {
  int64_t k = type.getShape().back(), rows = type.getNumElements() / std::max<int64_t>(k, 1);
  int64_t rowBytes = rt::mxfp4::packedRowBytes(k);
  entry.size = static_cast<uint64_t>(rows * rowBytes);
  if (externalWeights)
    return;
  auto packed = std::make_shared<std::vector<char>>(entry.size);
  auto *codes = reinterpret_cast<const uint8_t *>(entry.bytes.data());
  auto *out = reinterpret_cast<uint8_t *>(packed->data());
  for (int64_t row = 0; row < rows; ++row)
    rt::mxfp4::packRow(codes + row * k, k, out + row * rowBytes);
  entry.bytes = *packed;
  entry.expanded = std::move(packed);
}

FailureOr<WeightEntry> Emitter::fillOf(Operation *op, Value value, StringRef role) {
  WeightEntry entry;
  auto type = cast<RankedTensorType>(value.getType());
  Operation *def = value.getDefiningOp();
  auto constant = dyn_cast<arith::ConstantOp>(def);
  auto splat = constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  // A normal's placeholder (a splat, or a resource without data) is never read.
  auto deviation = def->getAttrOfType<FloatAttr>(kRandomNormalAttr);
  if (!deviation && !(splat && splat.isSplat()))
    return entry; // stored: its bytes, as in any artifact
  Type element = type.getElementType();
  // MXFP4 (moe-quantize-experts-mxfp4 of a random weight): random codes in
  // rows of whole 32-blocks (two a byte, no padding), and a splat scale.
  bool codes = isa<Float4E2M1FNType>(element) && deviation && type.hasStaticShape() &&
               type.getRank() > 0 && type.getShape().back() % rt::mxfp4::kBlock == 0;
  bool scales = isa<Float8E8M0FNUType>(element) && !deviation;
  if (!type.hasStaticShape() || !(element.isF32() || element.isBF16() ||
                                  isa<Float8E4M3FNType>(element) || codes || scales)) {
    if (!deviation)
      return entry; // an integer splat: expanded and stored
    return LogicalResult(unsupported(
        op, role + " is a random weight of type " + llvm::formatv("{0}", type).str() +
                "; weights filled at load are f32, bf16, f8E4M3FN or f4E2M1FN (rows of whole "
                "32-blocks) of static shape"));
  }
  entry.size = codes ? static_cast<uint64_t>(type.getNumElements()) / 2
                     : static_cast<uint64_t>(type.getNumElements()) *
                           (type.getElementTypeBitWidth() / 8);
  if (deviation) {
    entry.fill = WeightEntry::Fill::Normal;
    entry.value = static_cast<float>(deviation.getValueAsDouble());
    if (!std::isfinite(entry.value) || entry.value < 0)
      return LogicalResult(unsupported(op, role + "'s " + kRandomNormalAttr +
                                         " is not a finite deviation >= 0"));
  } else if (scales) {
    // A fill holds a normal f32 power of two; bytes 0 (2^-127) and 0xFF (NaN)
    // are stored.
    auto byte = static_cast<uint8_t>(splat.getRawData()[0]);
    if (byte == 0 || byte == rt::mxfp4::kScaleNaN)
      return WeightEntry{};
    entry.fill = WeightEntry::Fill::Constant;
    entry.value = rt::mxfp4::decodeE8M0(byte);
  } else {
    entry.fill = WeightEntry::Fill::Constant;
    entry.value = *decodeAsFloat(element, splat.getRawData(), 0);
    if (!std::isfinite(entry.value))
      return entry; // a NaN or infinite splat: stored as it is
  }
  return entry;
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
  // bf16 weights are the raw bits the bf16-weight kernels take.
  bool bf16 = entry.elementType.isBF16();
  std::string cppType = bf16 ? "uint16_t" : *cppElementType(entry.elementType);
  decl("const " + cppType + " *" + info.var + " = reinterpret_cast<const " + cppType +
       " *>(weights + " + std::to_string(entry.offset) + "); // " + entry.name +
       (bf16 ? " (bf16)" : ""));
  weights.push_back(std::move(entry));
  return info;
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

static std::string tensorName(func::FuncOp function, bool input, unsigned index) {
  DictionaryAttr attrs = input ? function.getArgAttrDict(index) : function.getResultAttrDict(index);
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("onnx.name"))
      return name.str();
  return (input ? "input" : "output") + std::to_string(index);
}

LogicalResult Emitter::run() {
  if (failed(readKVCachePlan()))
    return failure();
  result.maxBatch = cacheMaxBatch;
  result.maxSeq = cacheMaxSeq;
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

  // The last op that reads each value, through views; function results are
  // never released.
  {
    // In program order, so that the plan does not depend on pointer values.
    llvm::MapVector<Value, Operation *> lastRead;
    for (Operation &op : function.getBody().front())
      for (Value operand : op.getOperands()) {
        Value root = viewRoot(operand);
        lastRead[root] = &op;
        // The CPU printer reads the row count of permuted rows and of a
        // grouped matmul's result from the op that wrote them (writtenRows).
        if (auto permute = root.getDefiningOp<moe::PermuteOp>())
          lastRead[permute.getNumValid()] = &op;
        if (auto matmul = root.getDefiningOp<moe::GroupedMatmulOp>())
          lastRead[viewRoot(matmul.getOffsets())] = &op;
      }
    for (auto [value, op] : lastRead)
      if (!isa<func::ReturnOp>(op))
        lastReaders[op].push_back(value);
  }

  auto emitOneOp = [&](Operation &op) -> LogicalResult {
    return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
        .Case<arith::ConstantOp>([](Operation *) {
          return success(); // weights are placed when a kernel reads them
        })
        .Case<tensor::DimOp>([&](tensor::DimOp op) -> LogicalResult {
          // The token count of an expand_shape's output_shape: the view's
          // dims say it already.
          if (llvm::all_of(op->getUsers(), [](Operation *user) { return isView(user); }))
            return success();
          return unsupported(op, "only the output shape of a view may read a tensor's size");
        })
        .Case<moe::LinearOp>([&](auto op) { return emitLinear(op); })
        .Case<moe::MultiLinearOp>([&](auto op) { return emitMultiLinear(op); })
        .Case<moe::RouteOp>([&](auto op) { return emitRoute(op); })
        .Case<moe::SortOp>([&](auto op) { return emitSort(op); })
        .Case<moe::PermuteOp>([&](auto op) { return emitPermute(op); })
        .Case<moe::GroupedMatmulOp>([&](auto op) { return emitGroupedMatmul(op); })
        .Case<moe::CombineOp>([&](auto op) { return emitCombine(op); })
        .Case<tensor::ConcatOp>([&](auto op) { return emitConcat(op); })
        .Case<func::ReturnOp>([&](auto op) { return emitReturn(op); })
        .Case<moe::AllReduceOp>([&](auto op) { return emitAllReduce(op); })
        .Case<moe::EPShardOp>([](Operation *) {
          return success(); // a weight, placed when a kernel reads it
        })
        .Case<moe::QuantizeOp>([&](auto op) { return emitQuantize(op); })
        .Case<moe::EmbeddingOp>([&](auto op) { return emitEmbedding(op); })
        .Case<moe::RMSNormOp>([&](auto op) { return emitRMSNorm(op); })
        .Case<moe::AddRMSNormOp>([&](auto op) { return emitAddRMSNorm(op); })
        .Case<moe::RotaryOp>([&](auto op) { return emitRotary(op); })
        .Case<moe::AttentionOp>([&](auto op) { return emitAttention(op); })
        .Case<arith::AddFOp>([&](auto op) { return emitAdd(op); })
        .Case<moe::ElementwiseOp>([&](auto op) { return emitElementwise(op); })
        .Case<moe::ReduceRowsOp>([&](auto op) { return emitReduceRows(op); })
        .Default([&](Operation *op) -> LogicalResult {
          if (isView(op))
            return emitView(op);
          if (isa<onnx::ONNXDialect>(op->getDialect()))
            return unsupported(op, "an onnx op; moe-legalize-for-codegen states the constants "
                                   "and views codegen takes in arith and tensor ops (moec "
                                   "compile --target runs it)");
          return unsupported(op,
                             "not an op of the grouped phase that " + targetPhrase() + " knows");
        });
  };
  auto emitOp = [&](Operation &op) -> LogicalResult {
    if (failed(emitOneOp(op)))
      return failure();
    releaseAfter(&op);
    return success();
  };
  if (failed(emitOps(emitOp)))
    return failure();
  if (sizeOverflow || result.weightsBytes > kMaxPlannedBytes)
    return function.emitError() << "cannot generate code for @" << function.getSymName()
                                << ": its buffers for " << maxTokens << " tokens would exceed "
                                << kMaxPlannedBytes << " bytes; lower --max-tokens";

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

uint64_t Emitter::reserveValue(uint64_t bytes) {
  uint64_t size = alignUp(bytes);
  if (reusesWorkspace() && defining) {
    // First fit; the rest of a larger slot stays free.
    for (auto it = freeSlots.begin(); it != freeSlots.end(); ++it) {
      if (it->second < size)
        continue;
      uint64_t offset = it->first;
      if (it->second == size)
        freeSlots.erase(it);
      else
        *it = {offset + size, it->second - size};
      slotOf[defining] = {offset, size};
      return offset;
    }
  }
  uint64_t offset = reserve(bytes);
  if (defining)
    slotOf[defining] = {offset, size};
  return offset;
}

void Emitter::releaseAfter(Operation *op) {
  if (!reusesWorkspace())
    return;
  auto it = lastReaders.find(op);
  if (it == lastReaders.end())
    return;
  for (Value value : it->second)
    if (auto slot = slotOf.find(value); slot != slotOf.end())
      freeSlots.push_back(slot->second);
}

std::string Emitter::workspaceInt32(const Dim &count) {
  std::string var = "v" + std::to_string(nextVar++);
  uint64_t offset =
      reserve(bytesAtMaxTokens(count, 4));
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
  if (options.maxTokens < 1 || options.maxTokens > moec::rt::artifact::kMaxTokensLimit)
    return fail("--max-tokens must be in [1, " + Twine(moec::rt::artifact::kMaxTokensLimit) + "]");
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
