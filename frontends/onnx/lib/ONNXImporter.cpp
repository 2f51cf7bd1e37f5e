//===- ONNXImporter.cpp - ONNX models into the onnx dialect ----------------===//
//
// Reads a ModelProto and builds one func.func for its main graph: graph inputs
// become arguments, initializers onnx.Constant ops, each node one op, graph
// outputs the results. Nothing here trusts the file: every name, type, size and
// offset is checked, and each failure is one diagnostic naming the node or
// tensor and the reason.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Frontends/ONNX/Import.h"
#include "moec/Dialect/ONNX/DequantizeLayout.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <limits>

using namespace mlir;
using namespace moec::onnx;
using namespace moec::onnx::detail;

namespace {

// ONNX TensorProto.DataType codes.
enum OnnxDType : int32_t {
  kFloat = 1, kUInt8 = 2, kInt8 = 3, kUInt16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
  kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11, kUInt32 = 12, kUInt64 = 13,
  kBFloat16 = 16, kFloat8E4M3FN = 17, kFloat8E4M3FNUZ = 18, kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
};

/// Initializers larger than this become dense_resource blobs; smaller ones stay
/// inline, readable in tests and foldable.
constexpr int64_t kInlineElementLimit = 64;

std::string describeShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") +
            (ShapedType::isDynamic(shape[i]) ? std::string("?") : std::to_string(shape[i]));
  return text + "]";
}

/// Number of elements, or nullopt when a dimension is negative or the byte
/// count of `elementBytes`-sized elements would overflow.
std::optional<int64_t> checkedElementCount(ArrayRef<int64_t> shape, int64_t elementBytes) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim)
      return std::nullopt;
    count *= dim;
  }
  if (elementBytes > 0 && count > std::numeric_limits<int64_t>::max() / elementBytes)
    return std::nullopt;
  return count;
}

int64_t storageBytes(Type elementType) {
  return elementType.isInteger(1) ? 1 : (elementType.getIntOrFloatBitWidth() + 7) / 8;
}

/// Converts a TensorProto (an initializer or a TENSOR attribute) to an
/// ElementsAttr. Raw data moves into a resource blob instead of being copied;
/// external data is mapped from its file.
class TensorConverter {
public:
  TensorConverter(GraphImporter &importer) : importer(importer) {}

  FailureOr<ElementsAttr> convert(::onnx::TensorProto &tensor, Location loc) {
    std::string what = "tensor '" + printableName(tensor.name()) + "'";
    FailureOr<Type> elementType = convertElementType(tensor.data_type(), loc, what);
    if (failed(elementType))
      return failure();
    SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
    int64_t elementBytes = storageBytes(*elementType);
    std::optional<int64_t> count = checkedElementCount(shape, elementBytes);
    if (!count)
      return emitError(loc) << what << " has shape " << describeShape(shape)
                            << ", which is negative or overflows";
    auto type = RankedTensorType::get(shape, *elementType);
    int64_t bytes = *count * elementBytes;

    if (tensor.data_location() == ::onnx::TensorProto::EXTERNAL)
      return convertExternal(tensor, type, bytes, loc, what);
    if (tensor.has_raw_data()) {
      if (static_cast<int64_t>(tensor.raw_data().size()) != bytes)
        return emitError(loc) << what << " holds " << tensor.raw_data().size()
                              << " bytes of raw data, but " << type << " needs " << bytes;
      return fromRawData(tensor, type);
    }
    return fromTypedFields(tensor, type, *count, loc, what);
  }

private:
  FailureOr<ElementsAttr> fromRawData(::onnx::TensorProto &tensor, RankedTensorType type) {
    // The protobuf's string becomes the blob's storage: the weights exist once.
    auto owner = std::make_unique<std::string>(std::move(*tensor.mutable_raw_data()));
    ArrayRef<char> data(owner->data(), owner->size());
    return fromBytes(tensor.name(), type, data, std::move(owner));
  }

  /// Elements over `data`, whose storage `owner` keeps alive. Booleans and
  /// small tensors are copied inline (readable in tests, foldable); larger ones
  /// become a resource blob that takes `owner` over, so nothing is copied
  /// unless `data` is misaligned for its element type.
  template <typename Owner>
  ElementsAttr fromBytes(const std::string &name, RankedTensorType type, ArrayRef<char> data,
                         Owner owner) {
    if (type.getElementType().isInteger(1)) {
      SmallVector<bool> bits(data.begin(), data.end());
      return cast<ElementsAttr>(DenseElementsAttr::get(type, ArrayRef<bool>(bits)));
    }
    if (type.getNumElements() <= kInlineElementLimit)
      return cast<ElementsAttr>(DenseElementsAttr::getFromRawBuffer(type, data));
    size_t alignment = alignmentFor(type, data.data());
    if (alignment == 0)
      return blob(name, type, HeapAsmResourceBlob::allocateAndCopyWithAlign(data, kBlobAlignment));
    return blob(name, type,
                AsmResourceBlob(data, alignment,
                                [owner = std::move(owner)](void *, size_t, size_t) mutable {
                                  owner.reset();
                                },
                                /*dataIsMutable=*/false));
  }

  FailureOr<ElementsAttr> convertExternal(const ::onnx::TensorProto &tensor,
                                          RankedTensorType type, int64_t bytes, Location loc,
                                          const std::string &what) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto &entry : tensor.external_data()) {
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset" || entry.key() == "length") {
        int64_t value = 0;
        if (llvm::StringRef(entry.value()).getAsInteger(10, value) || value < 0)
          return emitError(loc) << what << " has external_data " << entry.key() << " '"
                                << entry.value() << "', which is not a non-negative integer";
        (entry.key() == "offset" ? offset : length) = value;
      }
    }
    if (location.empty())
      return emitError(loc) << what << " is stored externally but names no location";
    if (llvm::sys::path::is_absolute(location) || llvm::StringRef(location).contains(".."))
      return emitError(loc) << what << " names external data '" << location
                            << "' outside the model's folder";
    SmallString<256> file(llvm::sys::path::parent_path(importer.path));
    llvm::sys::path::append(file, location);
    uint64_t fileSize = 0;
    if (std::error_code error = llvm::sys::fs::file_size(file, fileSize))
      return emitError(loc) << what << ": cannot open external data '" << file
                            << "': " << error.message();
    if (static_cast<uint64_t>(offset) > fileSize)
      return emitError(loc) << what << ": external data offset " << offset
                            << " lies beyond the end of '" << file << "' (" << fileSize
                            << " bytes)";
    if (length < 0)
      length = static_cast<int64_t>(fileSize - static_cast<uint64_t>(offset));
    if (length != bytes)
      return emitError(loc) << what << " has " << length << " bytes of external data, but "
                            << type << " needs " << bytes;
    if (static_cast<uint64_t>(length) > fileSize - static_cast<uint64_t>(offset))
      return emitError(loc) << what << ": external data of " << length << " bytes at offset "
                            << offset << " runs past the end of '" << file << "' ("
                            << fileSize << " bytes)";
    auto buffer = llvm::MemoryBuffer::getFileSlice(file, length, offset,
                                                   /*IsVolatile=*/false);
    if (!buffer)
      return emitError(loc) << what << ": cannot read external data '" << file
                            << "': " << buffer.getError().message();
    // The mapping itself is the blob's storage: nothing is copied.
    std::unique_ptr<llvm::MemoryBuffer> mapped = std::move(*buffer);
    ArrayRef<char> data(mapped->getBufferStart(), mapped->getBufferSize());
    return fromBytes(tensor.name(), type, data, std::move(mapped));
  }

  FailureOr<ElementsAttr> fromTypedFields(const ::onnx::TensorProto &tensor,
                                          RankedTensorType type, int64_t count, Location loc,
                                          const std::string &what) {
    Type elementType = type.getElementType();
    int64_t elementBytes = storageBytes(elementType);
    // Compare the count before allocating: the shape comes from the file and
    // may claim far more elements than the file holds.
    int64_t available = 0;
    switch (tensor.data_type()) {
    case kFloat: available = tensor.float_data_size(); break;
    case kDouble: available = tensor.double_data_size(); break;
    case kInt64: available = tensor.int64_data_size(); break;
    case kUInt32:
    case kUInt64: available = tensor.uint64_data_size(); break;
    default: available = tensor.int32_data_size(); break; // narrower types widen to int32
    }
    if (available != count)
      return emitError(loc) << what << " holds " << available << " values, but shape "
                            << describeShape(type.getShape()) << " needs " << count;
    std::vector<char> bytes(static_cast<size_t>(count * elementBytes));
    auto fill = [&](const auto &field, auto convert) {
      for (int64_t i = 0; i < count; ++i) {
        auto value = convert(field.Get(i));
        std::memcpy(bytes.data() + i * elementBytes, &value, elementBytes);
      }
    };
    switch (tensor.data_type()) {
    case kFloat: fill(tensor.float_data(), [](float v) { return v; }); break;
    case kDouble: fill(tensor.double_data(), [](double v) { return v; }); break;
    case kInt64: fill(tensor.int64_data(), [](int64_t v) { return v; }); break;
    case kUInt32:
    case kUInt64: fill(tensor.uint64_data(), [](uint64_t v) { return v; }); break;
    default: fill(tensor.int32_data(), [](int32_t v) { return v; }); break;
    }
    if (elementType.isInteger(1)) {
      SmallVector<bool> bits(bytes.begin(), bytes.end());
      return cast<ElementsAttr>(DenseElementsAttr::get(type, ArrayRef<bool>(bits)));
    }
    return cast<ElementsAttr>(DenseElementsAttr::getFromRawBuffer(type, bytes));
  }

  /// The alignment to declare for a blob at `data`: the element size when the
  /// data sits on such a boundary, else 0 (the caller then copies).
  static size_t alignmentFor(RankedTensorType type, const char *data) {
    size_t alignment = static_cast<size_t>(storageBytes(type.getElementType()));
    return reinterpret_cast<uintptr_t>(data) % alignment == 0 ? alignment : 0;
  }

  ElementsAttr blob(const std::string &name, RankedTensorType type, AsmResourceBlob data) {
    return DenseResourceElementsAttr::get(type, name.empty() ? "onnx_tensor" : name,
                                          std::move(data));
  }

  GraphImporter &importer;
};

FailureOr<Attribute> convertAttribute(GraphImporter &importer, ::onnx::AttributeProto &attr,
                                      Location loc, const std::string &nodeName) {
  MLIRContext *context = &importer.context;
  Builder b(context);
  switch (attr.type()) {
  case ::onnx::AttributeProto::FLOAT:
    return b.getF32FloatAttr(attr.f());
  case ::onnx::AttributeProto::INT:
    return b.getI64IntegerAttr(attr.i());
  case ::onnx::AttributeProto::STRING:
    return b.getStringAttr(attr.s());
  case ::onnx::AttributeProto::INTS:
    return b.getDenseI64ArrayAttr(SmallVector<int64_t>(attr.ints().begin(), attr.ints().end()));
  case ::onnx::AttributeProto::FLOATS:
    return b.getDenseF32ArrayAttr(SmallVector<float>(attr.floats().begin(), attr.floats().end()));
  case ::onnx::AttributeProto::STRINGS: {
    SmallVector<Attribute> strings;
    for (const std::string &s : attr.strings())
      strings.push_back(b.getStringAttr(s));
    return b.getArrayAttr(strings);
  }
  case ::onnx::AttributeProto::TENSOR: {
    FailureOr<ElementsAttr> value = TensorConverter(importer).convert(*attr.mutable_t(), loc);
    if (failed(value))
      return failure();
    return Attribute(*value);
  }
  default:
    return emitError(loc) << nodeName << ": attribute '" << printableName(attr.name())
                          << "' has type " << attributeTypeName(attr.type())
                          << ", which moec does not import";
  }
}

/// Constant's scalar and list forms (value_float, value_ints, ...) become the
/// one `value` tensor form.
FailureOr<Attribute> normalizeConstantValue(Builder &b, const ::onnx::AttributeProto &attr,
                                            Location loc) {
  auto scalar = [&](Type type) { return RankedTensorType::get({}, type); };
  auto vector = [&](Type type, int64_t n) { return RankedTensorType::get({n}, type); };
  StringRef name = attr.name();
  auto expected = [&](::onnx::AttributeProto::AttributeType type) { return attr.type() == type; };
  if ((name == "value_float" && !expected(::onnx::AttributeProto::FLOAT)) ||
      (name == "value_int" && !expected(::onnx::AttributeProto::INT)) ||
      (name == "value_floats" && !expected(::onnx::AttributeProto::FLOATS)) ||
      (name == "value_ints" && !expected(::onnx::AttributeProto::INTS)))
    return failure();
  if (name == "value_float")
    return Attribute(DenseElementsAttr::get(scalar(b.getF32Type()), attr.f()));
  if (name == "value_int")
    return Attribute(DenseElementsAttr::get(scalar(b.getI64Type()), attr.i()));
  if (name == "value_floats")
    return Attribute(DenseElementsAttr::get(
        vector(b.getF32Type(), attr.floats_size()),
        ArrayRef<float>(attr.floats().data(), attr.floats_size())));
  if (name == "value_ints")
    return Attribute(DenseElementsAttr::get(
        vector(b.getI64Type(), attr.ints_size()),
        ArrayRef<int64_t>(attr.ints().data(), attr.ints_size())));
  return failure();
}

/// ReduceMax, ReduceMin, ReduceMean and ReduceProd took `axes` as an attribute
/// before opset 18 and as an input since; the dialect holds the input form.
bool reduceAxesMovedToInput(StringRef opType, int64_t opset) {
  return opset < 18 && (opType == "ReduceMax" || opType == "ReduceMin" ||
                        opType == "ReduceMean" || opType == "ReduceProd");
}

} // namespace

//===----------------------------------------------------------------------===//
// GraphImporter helpers
//===----------------------------------------------------------------------===//

std::string moec::onnx::detail::attributeTypeName(int type) {
  return ::onnx::AttributeProto::AttributeType_IsValid(type)
             ? ::onnx::AttributeProto::AttributeType_Name(
                   static_cast<::onnx::AttributeProto::AttributeType>(type))
             : "kind " + std::to_string(type);
}

std::string moec::onnx::detail::printableName(StringRef name) {
  std::string text;
  for (unsigned char c : name) {
    if (c >= 0x20 && c < 0x7F) {
      text += static_cast<char>(c);
    } else {
      static const char hex[] = "0123456789ABCDEF";
      text += "\\x";
      text += hex[c >> 4];
      text += hex[c & 0xF];
    }
  }
  return text;
}

std::string moec::onnx::detail::describeNode(const ::onnx::NodeProto &node) {
  std::string op = node.domain().empty() || node.domain() == "ai.onnx"
                       ? node.op_type()
                       : node.domain() + "." + node.op_type();
  return "node '" + printableName(node.name()) + "' (" + printableName(op) + ")";
}

Location GraphImporter::fileLoc() { return FileLineColLoc::get(&context, path, 0, 0); }

Location GraphImporter::nodeLoc(const ::onnx::NodeProto &node) {
  std::string name = node.name().empty() ? node.op_type() : node.name();
  return NameLoc::get(StringAttr::get(&context, name), fileLoc());
}

FailureOr<Value> GraphImporter::lookup(const ::onnx::NodeProto &node, StringRef name) {
  Value value = values.lookup(name);
  if (!value)
    return emitError(nodeLoc(node))
           << describeNode(node) << ": input '" << printableName(name)
           << "' is not a graph input, an initializer or an earlier node's output";
  return value;
}

FailureOr<Type> GraphImporter::declaredType(const ::onnx::NodeProto &node, StringRef name) {
  const ::onnx::TypeProto *type = declaredTypes.lookup(name);
  if (!type)
    return emitError(nodeLoc(node))
           << describeNode(node) << ": output '" << printableName(name)
           << "' has no type information; run onnx.shape_inference.infer_shapes on the "
              "model first";
  return convertType(*type, nodeLoc(node), "value '" + name.str() + "'");
}

Value GraphImporter::constantI64(Location loc, ArrayRef<int64_t> data) {
  auto type = RankedTensorType::get({static_cast<int64_t>(data.size())}, builder.getI64Type());
  return makeConstant(loc, DenseElementsAttr::get(type, data));
}

LogicalResult GraphImporter::defineOutputs(const ::onnx::NodeProto &node, ValueRange results) {
  for (auto [name, result] : llvm::zip(node.output(), results)) {
    if (name.empty())
      continue;
    auto [it, inserted] = values.try_emplace(name, result);
    if (!inserted)
      return emitError(nodeLoc(node)) << describeNode(node) << ": output '" << printableName(name)
                                      << "' is already defined by an earlier node, input or "
                                         "initializer (ONNX values are assigned once)";
  }
  return success();
}

Value GraphImporter::makeConstant(Location loc, ElementsAttr value) {
  NamedAttribute attr(builder.getStringAttr("value"), value);
  return ConstantOp::create(builder, loc, TypeRange{value.getType()}, ValueRange{},
                            ArrayRef<NamedAttribute>{attr})
      .getResult();
}

FailureOr<Type> moec::onnx::detail::convertElementType(int32_t dtype, Location loc,
                                                      StringRef what) {
  MLIRContext *context = loc.getContext();
  Builder b(context);
  switch (dtype) {
  case kFloat: return b.getF32Type();
  case kDouble: return b.getF64Type();
  case kFloat16: return b.getF16Type();
  case kBFloat16: return b.getBF16Type();
  case kFloat8E4M3FN: return Type(b.getType<Float8E4M3FNType>());
  case kFloat8E4M3FNUZ: return Type(b.getType<Float8E4M3FNUZType>());
  case kFloat8E5M2: return Type(b.getType<Float8E5M2Type>());
  case kFloat8E5M2FNUZ: return Type(b.getType<Float8E5M2FNUZType>());
  case kBool: return b.getI1Type();
  case kInt8: return b.getIntegerType(8);
  case kInt16: return b.getIntegerType(16);
  case kInt32: return b.getI32Type();
  case kInt64: return b.getI64Type();
  case kUInt8: return b.getIntegerType(8, /*isSigned=*/false);
  case kUInt16: return b.getIntegerType(16, false);
  case kUInt32: return b.getIntegerType(32, false);
  case kUInt64: return b.getIntegerType(64, false);
  default: {
    std::string name = ::onnx::TensorProto::DataType_IsValid(dtype)
                           ? ::onnx::TensorProto::DataType_Name(
                                 static_cast<::onnx::TensorProto::DataType>(dtype))
                           : "code " + std::to_string(dtype);
    return emitError(loc) << what << " has element type " << name
                          << ", which moec does not support";
  }
  }
}

FailureOr<Type> moec::onnx::detail::convertType(const ::onnx::TypeProto &type, Location loc,
                                               StringRef what) {
  if (!type.has_tensor_type())
    return emitError(loc) << what << " is not a tensor (sequences, maps and optionals are "
                                     "not supported)";
  const auto &tensor = type.tensor_type();
  FailureOr<Type> elementType = convertElementType(tensor.elem_type(), loc, what);
  if (failed(elementType))
    return failure();
  if (!tensor.has_shape())
    return Type(UnrankedTensorType::get(*elementType));
  SmallVector<int64_t> shape;
  for (const auto &dim : tensor.shape().dim()) {
    if (!dim.has_dim_value()) {
      shape.push_back(ShapedType::kDynamic);
      continue;
    }
    if (dim.dim_value() < 0)
      return emitError(loc) << what << " has negative dimension " << dim.dim_value();
    shape.push_back(dim.dim_value());
  }
  SmallVector<int64_t> staticDims;
  llvm::copy_if(shape, std::back_inserter(staticDims),
                [](int64_t d) { return !ShapedType::isDynamic(d); });
  if (!checkedElementCount(staticDims, storageBytes(*elementType)))
    return emitError(loc) << what << " has shape " << describeShape(shape)
                          << ", whose size overflows";
  return Type(RankedTensorType::get(shape, *elementType));
}

int64_t moec::onnx::detail::intAttribute(const ::onnx::NodeProto &node, StringRef name,
                                         int64_t fallback) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return attr.i();
  return fallback;
}

std::optional<float> moec::onnx::detail::floatAttribute(const ::onnx::NodeProto &node,
                                                        StringRef name) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return attr.f();
  return std::nullopt;
}

std::string moec::onnx::detail::stringAttribute(const ::onnx::NodeProto &node, StringRef name,
                                                StringRef fallback) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return attr.s();
  return fallback.str();
}

//===----------------------------------------------------------------------===//
// Nodes and graphs
//===----------------------------------------------------------------------===//

namespace {

class ModelImporter : public GraphImporter {
public:
  using GraphImporter::GraphImporter;

  FailureOr<OwningOpRef<ModuleOp>> importModel(::onnx::ModelProto &model);

private:
  LogicalResult checkOpsets(const ::onnx::ModelProto &model);
  LogicalResult importGraph(::onnx::GraphProto &graph, ModuleOp module);
  LogicalResult importNode(::onnx::NodeProto &node);
  LogicalResult importDefaultDomainNode(::onnx::NodeProto &node);
  LogicalResult checkDequantizeLinear(const ::onnx::NodeProto &node, Operation *op);

  InFlightDiagnostic nodeError(const ::onnx::NodeProto &node) {
    return emitError(nodeLoc(node)) << describeNode(node) << ": ";
  }
};

LogicalResult ModelImporter::checkOpsets(const ::onnx::ModelProto &model) {
  for (const auto &opsetId : model.opset_import()) {
    if (opsetId.domain().empty() || opsetId.domain() == "ai.onnx") {
      opset = opsetId.version();
      if (opset < kMinOpset || opset > kMaxOpset)
        return emitError(fileLoc()) << "the model uses default-domain opset " << opset
                                    << "; moec imports opsets " << kMinOpset << " to "
                                    << kMaxOpset;
    }
  }
  return success();
}

LogicalResult ModelImporter::importNode(::onnx::NodeProto &node) {
  StringRef domain = node.domain();
  if (domain.empty() || domain == "ai.onnx") {
    if (opset == 0)
      return nodeError(node) << "the model imports no default-domain opset";
    return importDefaultDomainNode(node);
  }
  if (domain == "com.microsoft")
    return importMicrosoftNode(*this, node);
  return nodeError(node) << "unknown operator domain '" << domain << "'";
}

LogicalResult ModelImporter::importDefaultDomainNode(::onnx::NodeProto &node) {
  const OpInfo *info = lookupOpInfo(node.op_type());
  if (!info)
    return nodeError(node) << "operator '" << node.op_type()
                           << "' is not supported (docs/onnx-import.md lists those that are)";
  Location loc = nodeLoc(node);
  OperationState state(loc, "onnx." + node.op_type());

  // Operands: omitted optional inputs (empty names, or trailing) are NoValue.
  auto noValue = [&]() -> Value { return NoValueOp::create(builder, loc, builder.getNoneType()).getResult(); };
  if (!info->variadicInputs && node.input_size() > info->numInputs)
    return nodeError(node) << "has " << node.input_size() << " inputs, but "
                           << node.op_type() << " takes at most " << info->numInputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      state.operands.push_back(noValue());
      continue;
    }
    FailureOr<Value> value = lookup(node, name);
    if (failed(value))
      return failure();
    state.operands.push_back(*value);
  }

  if (node.op_type() == "Constant" && node.attribute_size() != 1)
    return nodeError(node) << "a Constant needs exactly one value attribute, got "
                           << node.attribute_size();

  // Attributes, by ONNX name; older opsets' forms become the dialect's form.
  std::optional<RegisteredOperationName> opName = state.name.getRegisteredInfo();
  llvm::StringSet<> known;
  for (StringAttr name : opName->getAttributeNames())
    known.insert(name.getValue());
  for (::onnx::AttributeProto &attr : *node.mutable_attribute()) {
    if (node.op_type() == "Constant") {
      if (node.attribute_size() != 1)
        return nodeError(node) << "a Constant needs exactly one value attribute, got "
                               << node.attribute_size();
      if (attr.name() != "value") {
        FailureOr<Attribute> value = normalizeConstantValue(builder, attr, loc);
        if (failed(value))
          return nodeError(node) << "Constant attribute '" << printableName(attr.name())
                                 << "' of kind " << attributeTypeName(attr.type())
                                 << " is not supported";
        state.addAttribute("value", *value);
        continue;
      }
    }
    if (attr.name() == "axes" && reduceAxesMovedToInput(node.op_type(), opset)) {
      if (state.operands.size() < 2)
        state.operands.push_back(constantI64(loc, SmallVector<int64_t>(attr.ints().begin(),
                                                                       attr.ints().end())));
      continue;
    }
    std::optional<int> kind = lookupAttributeKind(node.op_type(), attr.name());
    if (!known.contains(attr.name()) || !kind)
      return nodeError(node) << "unknown attribute '" << printableName(attr.name()) << "' for "
                             << node.op_type() << " (opset " << info->sinceVersion << ")";
    if (attr.type() != *kind)
      return nodeError(node) << "attribute '" << attr.name() << "' must be "
                             << attributeTypeName(*kind) << ", got "
                             << attributeTypeName(attr.type());
    FailureOr<Attribute> value = convertAttribute(*this, attr, loc, describeNode(node));
    if (failed(value))
      return failure();
    state.addAttribute(attr.name(), *value);
  }
  if (!info->variadicInputs)
    while (static_cast<int>(state.operands.size()) < info->numInputs)
      state.operands.push_back(noValue());

  // Results: declared types; omitted optional outputs are `none`.
  if (!info->variadicOutputs && node.output_size() > info->numOutputs)
    return nodeError(node) << "has " << node.output_size() << " outputs, but "
                           << node.op_type() << " has at most " << info->numOutputs;
  for (const std::string &name : node.output()) {
    if (name.empty()) {
      state.types.push_back(builder.getNoneType());
      continue;
    }
    FailureOr<Type> type = node.op_type() == "Constant" && !declaredTypes.lookup(name)
                               ? FailureOr<Type>(Type())
                               : declaredType(node, name);
    if (failed(type))
      return failure();
    if (!*type) { // an untyped Constant takes its value's type
      auto value = dyn_cast_or_null<TypedAttr>(state.attributes.get("value"));
      if (!value)
        return nodeError(node) << "Constant has no value";
      type = value.getType();
    }
    state.types.push_back(*type);
  }
  if (!info->variadicOutputs)
    while (static_cast<int>(state.types.size()) < info->numOutputs)
      state.types.push_back(builder.getNoneType());

  // value_info is trusted for shapes, but an element type that contradicts the
  // operator's own typing is an error in the file.
  if (info->sameElementType && !state.operands.empty() && !state.types.empty()) {
    auto in = dyn_cast<TensorType>(state.operands[0].getType());
    auto out = dyn_cast<TensorType>(state.types[0]);
    if (in && out && in.getElementType() != out.getElementType())
      return nodeError(node) << "output '" << printableName(node.output(0)) << "' is declared "
                             << out.getElementType() << ", but " << node.op_type()
                             << " gives its input's element type, " << in.getElementType();
  }
  Operation *op = builder.create(state);
  if (failed(verify(op)) || failed(checkDequantizeLinear(node, op)))
    return failure();
  return defineOutputs(node, op->getResults());
}

LogicalResult ModelImporter::checkDequantizeLinear(const ::onnx::NodeProto &node, Operation *op) {
  // Its scale layout follows from shapes and attributes that the types carry,
  // so a scale that fits none is reported here, with the node, rather than by
  // whatever later fails to read the weight.
  auto dq = dyn_cast<DequantizeLinearOp>(op);
  if (!dq)
    return success();
  auto x = dyn_cast<RankedTensorType>(dq.getX().getType());
  auto scale = dyn_cast<RankedTensorType>(dq.getXScale().getType());
  if (!x || !scale || !x.hasStaticShape() || !scale.hasStaticShape())
    return success();
  std::string why;
  if (!DequantizeLayout::get(x.getShape(), scale.getShape(), dq.getAxis(), dq.getBlockSize(), why))
    return nodeError(node) << "x_scale " << scale << " does not fit x " << x << ": " << why;
  return success();
}

LogicalResult ModelImporter::importGraph(::onnx::GraphProto &graph, ModuleOp module) {
  for (const auto &info : graph.input())
    declaredTypes[info.name()] = &info.type();
  for (const auto &info : graph.value_info())
    declaredTypes[info.name()] = &info.type();
  for (const auto &info : graph.output())
    declaredTypes[info.name()] = &info.type();

  llvm::StringSet<> initializerNames;
  for (const auto &tensor : graph.initializer())
    initializerNames.insert(tensor.name());

  // Arguments: graph inputs that are not initializers.
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const auto &info : graph.input()) {
    if (initializerNames.contains(info.name()))
      continue;
    FailureOr<Type> type = convertType(info.type(), fileLoc(), "graph input '" + info.name() + "'");
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    argNames.push_back(info.name());
  }
  std::string funcName = graph.name().empty() ? "main_graph" : graph.name();
  builder.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder, fileLoc(), funcName,
                                   builder.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (auto [index, name] : llvm::enumerate(argNames)) {
    if (values.count(name))
      return emitError(fileLoc()) << "graph input '" << name << "' is declared twice";
    values[name] = entry->getArgument(index);
    func.setArgAttr(index, "onnx.name", builder.getStringAttr(name));
  }
  builder.setInsertionPointToStart(entry);

  for (::onnx::TensorProto &tensor : *graph.mutable_initializer()) {
    Location loc = NameLoc::get(builder.getStringAttr(tensor.name()), fileLoc());
    FailureOr<ElementsAttr> value = TensorConverter(*this).convert(tensor, loc);
    if (failed(value))
      return failure();
    if (!values.try_emplace(tensor.name(), makeConstant(loc, *value)).second)
      return emitError(loc) << "initializer '" << printableName(tensor.name())
                            << "' is defined twice";
  }

  for (::onnx::NodeProto &node : *graph.mutable_node())
    if (failed(importNode(node)))
      return failure();

  SmallVector<Value> results;
  for (const auto &info : graph.output()) {
    Value value = values.lookup(info.name());
    if (!value)
      return emitError(fileLoc()) << "graph output '" << info.name()
                                  << "' is not produced by any node, input or initializer";
    results.push_back(value);
  }
  func::ReturnOp::create(builder, fileLoc(), results);
  // Collect the ops first: one op may stand behind several listed values.
  llvm::SetVector<Operation *> candidates;
  for (Value value : eraseIfUnused)
    if (Operation *def = value.getDefiningOp())
      candidates.insert(def);
  for (Operation *def : candidates)
    if (def->use_empty())
      def->erase();
  eraseIfUnused.clear();
  func.setFunctionType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [index, info] : llvm::enumerate(graph.output()))
    func.setResultAttr(index, "onnx.name", builder.getStringAttr(info.name()));
  return success();
}

FailureOr<OwningOpRef<ModuleOp>> ModelImporter::importModel(::onnx::ModelProto &model) {
  if (!model.has_graph())
    return emitError(fileLoc()) << "the model has no graph";
  if (failed(checkOpsets(model)))
    return failure();
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc());
  if (opset)
    (*module)->setAttr("onnx.opset", builder.getI64IntegerAttr(opset));
  if (!model.producer_name().empty())
    (*module)->setAttr("onnx.producer",
                       builder.getStringAttr(model.producer_name() + " " +
                                             model.producer_version()));
  if (failed(importGraph(*model.mutable_graph(), *module)))
    return failure();
  return module;
}

} // namespace

OwningOpRef<ModuleOp> moec::onnx::importModel(const llvm::MemoryBuffer &buffer,
                                              StringRef path, MLIRContext &context) {
  context.loadDialect<ONNXDialect, moe::MoEDialect, func::FuncDialect>();
  ModelImporter importer(context, path);
  if (buffer.getBufferSize() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    emitError(importer.fileLoc()) << "the file is over 2 GiB; store the weights as external "
                                     "data (onnx.save(..., save_as_external_data=True))";
    return nullptr;
  }
  ::onnx::ModelProto model;
  if (!model.ParseFromArray(buffer.getBufferStart(), static_cast<int>(buffer.getBufferSize()))) {
    emitError(importer.fileLoc()) << "not a valid ONNX model: the protobuf is truncated or "
                                     "malformed";
    return nullptr;
  }
  FailureOr<OwningOpRef<ModuleOp>> module = importer.importModel(model);
  if (failed(module))
    return nullptr;
  return std::move(*module);
}

void moec::onnx::registerImportONNXTranslation() {
  static TranslateToMLIRRegistration registration(
      "import-onnx", "import an ONNX model (.onnx) into the onnx and moe dialects",
      [](llvm::SourceMgr &sourceMgr, MLIRContext *context) -> OwningOpRef<Operation *> {
        const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
        OwningOpRef<ModuleOp> module =
            importModel(*buffer, buffer->getBufferIdentifier(), *context);
        return OwningOpRef<Operation *>(module.release());
      },
      [](DialectRegistry &registry) {
        registry.insert<ONNXDialect, moe::MoEDialect, func::FuncDialect>();
      });
}
