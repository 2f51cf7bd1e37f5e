//===- EmitCpp.cpp - grouped phase → C++ calling the CPU kernels ----------===//
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
// Shapes: every dimension is static except the token dimension, which is
// dynamic up to --max-tokens. A dimension is therefore `n` or `n·T`, a tensor
// has at most one dynamic dimension, and the workspace is planned once for
// T = max tokens (each intermediate at a fixed, 256-byte aligned offset).
//
//===----------------------------------------------------------------------===//

#include "moec/Codegen/EmitCpp.h"

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/runtime/ArtifactABI.h"
#include "moec/runtime/ArtifactFormat.h"
#include "moec/runtime/Bundle.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Alignment.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unistd.h>

using namespace mlir;
namespace moe = moec::moe;

#ifndef MOEC_RUNTIME_INCLUDE_DIR
#define MOEC_RUNTIME_INCLUDE_DIR ""
#endif
#ifndef MOEC_RUNTIME_LIBRARY
#define MOEC_RUNTIME_LIBRARY ""
#endif
#ifndef MOEC_RUNTIME_CUDA_LIBRARY
#define MOEC_RUNTIME_CUDA_LIBRARY ""
#endif
#ifndef MOEC_NVCC
#define MOEC_NVCC ""
#endif
#ifndef MOEC_RUN_PROGRAM
#define MOEC_RUN_PROGRAM ""
#endif

namespace moec::codegen {
namespace {

/// Weights and workspace slots start at the format's alignment
/// (rt::artifact::kWeightsAlignment says why).
constexpr uint64_t kAlignment = rt::artifact::kWeightsAlignment;

uint64_t alignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

/// One dimension: `size`, or `size · T` when it scales with the token count.
struct Dim {
  int64_t size = 1;
  bool perToken = false;
};

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
uint16_t toBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

/// What a value lives in and what the generated code calls it.
struct ValueInfo {
  std::string var;       // the C++ pointer variable
  SmallVector<Dim> dims; // its shape
  Type elementType;
  /// CUDA, --expert-weights=bf16: an f32 value held as bf16 (BF16 *), since
  /// only bf16-weight kernels read it and they round it so anyway.
  bool bf16 = false;
  /// A weight constant: its offset in weights.bin.
  std::optional<uint64_t> weightOffset;
};

struct WeightEntry {
  std::string name;
  Type elementType;
  SmallVector<int64_t> shape;
  uint64_t offset = 0;
  /// The constant's bytes, held by the module (not copied: weights can be
  /// gigabytes), or `expanded` for a splat.
  ArrayRef<char> bytes;
  std::shared_ptr<std::vector<char>> expanded;
  /// The size in weights.bin; `bytes` is empty for external weights.
  uint64_t size = 0;
  /// Stored as bf16 (converted from the f32 constant): --expert-weights=bf16.
  bool bf16 = false;
};

struct TensorDecl {
  std::string name;
  Type elementType;
  SmallVector<Dim> dims;
};

class Emitter {
public:
  Emitter(func::FuncOp function, int64_t maxTokens, Target target, bool externalWeights = false,
          bool bf16ExpertWeights = false, bool bf16ExpertOutputs = false)
      : function(function), maxTokens(maxTokens), cuda(target == Target::CUDA),
        externalWeights(externalWeights), bf16ExpertWeights(bf16ExpertWeights),
        bf16ExpertOutputs(bf16ExpertOutputs) {}

  LogicalResult run();

  std::string source;
  std::vector<WeightEntry> weights;
  std::vector<TensorDecl> inputs, outputs;
  uint64_t workspaceBytes = 0;
  uint64_t weightsBytes = rt::artifact::kWeightsHeaderBytes;
  /// CUDA: slot counts (at max tokens) of each moe.sort, whose CUB workspace
  /// is sized when the model is created.
  std::vector<uint64_t> sortSlots;
  /// CUDA: statements create() runs once the weights are on the device.
  std::vector<std::string> createSteps;

private:
  /// "the CPU target" / "the CUDA target", for messages.
  std::string targetPhrase() const { return cuda ? "the CUDA target" : "the CPU target"; }
  /// A workspace slot of `bytes` bytes; returns its offset.
  uint64_t reserve(uint64_t bytes) {
    uint64_t offset = workspaceBytes;
    workspaceBytes = alignUp(offset + bytes);
    return offset;
  }
  /// A new `int32_t *` variable over `count` int32 of the workspace (`count`
  /// per token: sized for max tokens); returns its name.
  std::string workspaceInt32(const Dim &count) {
    std::string var = "v" + std::to_string(nextVar++);
    uint64_t offset =
        reserve(4 * static_cast<uint64_t>(count.size) * (count.perToken ? maxTokens : 1));
    decl("int32_t *" + var + " = reinterpret_cast<int32_t *>(workspace + " +
         std::to_string(offset) + ");");
    return var;
  }
  /// One kernel call: on the CPU with the thread pool first (`pool`), on CUDA
  /// with the stream last and its Status checked.
  void kernel(StringRef name, std::vector<std::string> args, bool pool = true) {
    if (cuda) {
      args.push_back(streamExpr);
      line("MOEC_RETURN_IF_ERROR(" + name.str() + "(" + llvm::join(args, ", ") + "));");
      return;
    }
    if (pool)
      args.insert(args.begin(), "pool");
    line(name.str() + "(" + llvm::join(args, ", ") + ");");
  }
  InFlightDiagnostic unsupported(Operation *op, const Twine &why) {
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

  /// `fp8`: an f8E4M3FN tensor is acceptable here (moe.quantize's result,
  /// moe.grouped_matmul's FP8 operands; the CPU target only).
  LogicalResult checkTensor(Operation *op, Value value, StringRef role, bool floatOnly,
                            bool fp8 = false);
  FailureOr<SmallVector<Dim>> resultDims(Operation *op, Value result, std::optional<Dim> rows);
  FailureOr<ValueInfo *> operand(Operation *op, Value value, StringRef role, bool floatOnly = true,
                                 bool fp8 = false);
  /// An f32 constant stored in weights.bin as bf16 (--expert-weights=bf16).
  FailureOr<ValueInfo *> bf16Weight(Operation *op, Value value, StringRef role);
  /// Places `entry` (its bytes and size filled in) at weights.bin's next
  /// 64-byte boundary and declares the constant `value`'s pointer into `info`.
  ValueInfo &placeWeight(Value value, WeightEntry entry, ValueInfo &info);
  std::string optionalOperand(Operation *op, Value value, StringRef role, bool &failed);
  FailureOr<ValueInfo *> define(Operation *op, Value result, std::optional<Dim> rows,
                                bool fp8 = false);
  /// CUDA, bf16 expert weights: a gate/up projection with concatenated halves
  /// runs on interleaved ones, reordered once in create() (interleaveGateUp), so
  /// that the prefill GEMM applies the activation in its own epilogue
  /// (docs/design.md, "Gate/up rows on the GPU"). Only when the weights, and the
  /// bias if any, are weight constants that nothing else reads. Returns the
  /// layout the kernels are given.
  std::optional<moe::GateUpLayout> interleaveOnDevice(moe::GroupedMatmulOp op,
                                                      const ValueInfo &weights,
                                                      std::optional<moe::GateUpLayout> layout);
  std::string epilogue(std::optional<moe::ActivationAttr> activation,
                       std::optional<moe::GateUpLayout> layout);
  Value viewRoot(Value value);

  /// Whether moe.linear `op` multiplies by a bf16 weight (a constant, not the
  /// router's) under --expert-weights=bf16.
  bool linearTakesBF16(moe::LinearOp op);
  /// Whether `value` is held as bf16 rows: every use reads it as the rows of a
  /// bf16-weight grouped matmul or linear, which round f32 rows to bf16 first,
  /// so storing them rounded changes no bit of any result and halves their
  /// bytes (docs/design.md, "bf16 activations").
  bool storedAsBF16(Value value);

  LogicalResult emitView(Operation *op);
  LogicalResult emitLinear(moe::LinearOp op);
  LogicalResult emitRoute(moe::RouteOp op);
  LogicalResult emitSort(moe::SortOp op);
  LogicalResult emitPermute(moe::PermuteOp op);
  LogicalResult emitGroupedMatmul(moe::GroupedMatmulOp op);
  LogicalResult emitGroupedMatmulFP8(moe::GroupedMatmulOp op);
  LogicalResult emitQuantize(moe::QuantizeOp op);
  /// moe.quantize's codes and scales, `rows` rows.
  FailureOr<std::pair<ValueInfo *, ValueInfo *>> defineCodes(moe::QuantizeOp op, Dim rows);
  /// An FP8 grouped matmul's kernel arguments up to its epilogue (the result
  /// pointer, or the codes and scales, follow), after its checks.
  FailureOr<std::vector<std::string>> fp8MatmulArgs(moe::GroupedMatmulOp op);
  /// Whether the sort that wrote `op`'s offsets ran two launches or more
  /// before it (defined with fp8MatmulRows).
  bool offsetsSettled(moe::GroupedMatmulOp op);
  /// Its row count (the lhs's rows).
  Dim fp8MatmulRows(moe::GroupedMatmulOp op);
  /// The number of rows of `value` that hold data, as a C++ expression: the
  /// valid rows after moe.permute or a grouped matmul, else all rows.
  std::string writtenRows(Value value, Dim rows);
  LogicalResult emitCombine(moe::CombineOp op);
  LogicalResult emitConcat(tensor::ConcatOp op);
  LogicalResult emitReturn(func::ReturnOp op);
  void assembleCuda(llvm::raw_ostream &os);

  void line(const Twine &text) { body += "  " + text.str() + "\n"; }
  // CUDA keeps the pointer declarations, the input and the output copies apart
  // from the kernel calls, which run eagerly or as a captured CUDA graph; on
  // the CPU all are lines of the body in order.
  void decl(const Twine &text) {
    (cuda ? decls : body) += "  " + text.str() + "\n";
  }
  void copyInLine(const Twine &text) { copyIn += "  " + text.str() + "\n"; }
  void copyOutLine(const Twine &text) { copyOut += "  " + text.str() + "\n"; }
  void comment(Operation *op) {
    std::string loc;
    llvm::raw_string_ostream os(loc);
    op->getLoc().print(os);
    line("// " + op->getName().getStringRef() + " " + loc);
  }

  func::FuncOp function;
  int64_t maxTokens;
  bool cuda;
  /// --weights=external: weights.bin is laid out but not written, so a
  /// splat's bytes are never expanded (bench/write_weights.py fills it).
  bool externalWeights;
  /// --expert-weights=bf16 (CUDA): grouped matmul weights stored as bf16 and
  /// multiplied by the bf16-weight kernel.
  bool bf16ExpertWeights;
  /// --expert-outputs=bf16 (CUDA, with bf16ExpertWeights): a bf16-weight
  /// grouped matmul whose result only moe.combine reads rounds it to bf16.
  bool bf16ExpertOutputs;
  std::string body, decls, copyIn, copyOut;
  /// CUDA: every output is written by a kernel (no copies between results),
  /// so a run may use the caller's device buffers in place (inPlaceSetup).
  bool inPlaceCapable = false;
  /// CUDA: the caller's buffers as CallerBuffer initialisers, and whether the
  /// run uses them in place (GraphCache::inPlace).
  std::vector<std::string> callerInputs, callerOutputs;
  std::string inPlaceSetup() const;
  /// The graph's run: keyed by the caller's addresses when in place.
  std::string graphRun() const;
  llvm::DenseMap<Value, ValueInfo> values;
  llvm::DenseMap<Value, ValueInfo> bf16Values; // constants stored as bf16
  llvm::DenseMap<Value, unsigned> outputOf; // results written straight into an output
  /// CUDA: a moe.sort's permutation -> its inverse (rowOfSlot), which the sort
  /// writes and permute and combine read instead of inverting it again.
  llvm::DenseMap<Value, std::string> inverseOf;
  /// The inverse of `permutation` if a moe.sort wrote one, else "nullptr".
  std::string inverseOrNull(Value permutation) const {
    auto it = inverseOf.find(permutation);
    return it == inverseOf.end() ? "nullptr" : it->second;
  }
  unsigned nextVar = 0;
  bool usesTokens = false;
  bool needsIdsToI32 = false;
  /// CUDA: the ops that compute a moe.combine's addend or addend gate from the
  /// inputs alone (a shared expert), emitted first on the side stream so that
  /// they run beside the routed chain; the combine joins them (planSideBranch).
  llvm::DenseSet<Operation *> sideBranch;
  /// Views of the inputs that the side branch reads; the routed chain may read
  /// them too (a view is an alias, no kernel), so they are emitted first.
  llvm::DenseSet<Operation *> inputViews;
  void planSideBranch();
  /// The stream the next kernel call is queued on.
  std::string streamExpr = "stream";
};

bool isView(Operation *op) {
  return isa<onnx::ReshapeOp, onnx::SqueezeOp, onnx::UnsqueezeOp, onnx::IdentityOp>(op);
}

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
  // CPU: an output is written where the caller wants it. CUDA: in its own
  // workspace slot and copied out at the end, or, in place, in the caller's
  // device buffer.
  auto output = outputOf.find(result);
  if (!cuda && output != outputOf.end()) {
    line(cppType + " *" + info.var + " = static_cast<" + cppType + " *>(outputs[" +
         std::to_string(output->second) + "]);");
    return &info;
  }
  // Planned for the largest T; every intermediate keeps its own slot (the
  // grouped phase has a handful, so reuse would save little).
  uint64_t elements = static_cast<uint64_t>(count->size) * (count->perToken ? maxTokens : 1);
  uint64_t offset = reserve(elements * (info.bf16 ? 2 : element.getIntOrFloatBitWidth() / 8));
  std::string slot =
      "reinterpret_cast<" + cppType + " *>(workspace + " + std::to_string(offset) + ")";
  if (inPlaceCapable && output != outputOf.end())
    slot = "inPlace ? static_cast<" + cppType + " *>(outputs[" + std::to_string(output->second) +
           "]) : " + slot;
  decl(cppType + " *" + info.var + " = " + slot + ";");
  return &info;
}

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
  // A weight: copied into weights.bin at the next 64-byte boundary (external
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
  entry.name = constantName(value, weights.size());
  entry.elementType = type.getElementType();
  entry.shape.assign(type.getShape().begin(), type.getShape().end());
  entry.offset = alignUp(weightsBytes);
  weightsBytes = entry.offset + entry.size;
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

LogicalResult checkEpilogueLayout(Operation *op, std::optional<moe::GateUpLayout> layout,
                                  bool hasEpilogue) {
  if (hasEpilogue && layout == moe::GateUpLayout::Separate)
    return op->emitError() << "cannot generate code for '" << op->getName()
                           << "': a 'separate' epilogue layout (moe-lower-layer concatenates "
                              "gate and up first)";
  return success();
}

/// Finds the side branch. At decode a shared expert's two matmuls have one
/// expert's rows, a few dozen blocks each, and in line they would wait behind
/// the router, sort, permute and the routed GEMMs. Nothing of the routed chain
/// reads them, so they can run beside it (docs/design.md, "The shared expert
/// beside the routed experts"). The branch is the addend's (and gate's)
/// backward slice through moe.linear ops and views down to the inputs (or
/// views of them) and constants; it is taken only if nothing outside it but the
/// combine reads its values and none of them is a result of the function.
void Emitter::planSideBranch() {
  if (!cuda)
    return;
  auto isConstant = [](Operation *op) { return isa<arith::ConstantOp, onnx::ConstantOp>(op); };
  function.walk([&](moe::CombineOp combine) {
    for (Value start : {combine.getAddend(), combine.getAddendGate()}) {
      if (!start)
        continue;
      llvm::DenseSet<Operation *> slice, views;
      SmallVector<Operation *> work;
      if (Operation *def = start.getDefiningOp())
        work.push_back(def);
      bool closed = true, computes = false;
      while (!work.empty() && closed) {
        Operation *op = work.pop_back_val();
        if (isConstant(op) || slice.contains(op) || views.contains(op))
          continue;
        if (isView(op) && isa<BlockArgument>(viewRoot(op->getResult(0)))) {
          views.insert(op);
          continue;
        }
        if (!isa<moe::LinearOp>(op) && !isView(op)) {
          closed = false; // fed by the routed chain (or by anything else)
          break;
        }
        computes |= isa<moe::LinearOp>(op);
        slice.insert(op);
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp())
            work.push_back(def);
      }
      for (Operation *op : slice)
        for (Value result : op->getResults()) {
          closed &= !outputOf.count(result);
          for (Operation *user : result.getUsers())
            closed &= user == combine.getOperation() || slice.contains(user);
        }
      if (closed && computes) {
        sideBranch.insert(slice.begin(), slice.end());
        inputViews.insert(views.begin(), views.end());
      }
    }
  });
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
  return cuda && bf16ExpertWeights && !router && weightType && weightType.hasStaticShape() &&
         weightType.getRank() == 2 && weightType.getDimSize(1) % 8 == 0 && weightDef &&
         isa<arith::ConstantOp, onnx::ConstantOp>(weightDef);
}

bool Emitter::storedAsBF16(Value value) {
  if (!cuda || !bf16ExpertWeights || value.use_empty() ||
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
    if (cuda) {
      kernel("narrowIds", {(*ids)->var, dimExpr(*slots), idsVar});
    } else {
      needsIdsToI32 = true;
      line("idsToI32(" + (*ids)->var + ", " + dimExpr(*slots) + ", " + idsVar + ");");
    }
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
  if (cuda) {
    // The inverse permutation, one int32 per slot (sortByExpert).
    std::string rowOfSlot = workspaceInt32(*slots);
    inverseOf[op.getPermutation()] = rowOfSlot;
    args.push_back(rowOfSlot);
    // CUB's workspace, sized for max tokens when the model is created.
    size_t index = sortSlots.size();
    sortSlots.push_back(static_cast<uint64_t>(slots->size) * (slots->perToken ? maxTokens : 1));
    args.push_back("sortWorkspace + state.sortOffset[" + std::to_string(index) + "]");
    args.push_back("state.sortBytes[" + std::to_string(index) + "]");
  }
  kernel("sortByExpert", args, /*pool=*/false);
  return success();
}

/// CUDA: a permute whose rows only a moe.quantize reads is done by that
/// quantize (permuteQuantizeE4M3): the f32 rows are never written.
static bool fusedIntoQuantize(moe::PermuteOp op, bool cuda) {
  return cuda && op.getResult().hasOneUse() &&
         isa<moe::QuantizeOp>(*op.getResult().getUsers().begin());
}

LogicalResult Emitter::emitPermute(moe::PermuteOp op) {
  comment(op);
  if (fusedIntoQuantize(op, cuda)) {
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
  // CUDA reads num_valid on the device and takes the slot count as the bound.
  if (cuda)
    kernel("permute",
           {(*hidden)->var, dimExpr((*hidden)->dims[1]), (*permutation)->var, (*numValid)->var,
            inverseOrNull(op.getPermutation()), dimExpr((*permutation)->dims[0]),
            std::to_string(op.getTopK()), (*rows)->var});
  else
    kernel("permute", {(*hidden)->var, dimExpr((*hidden)->dims[1]), (*permutation)->var,
                       "*" + (*numValid)->var, std::to_string(op.getTopK()), (*rows)->var});
  return success();
}

LogicalResult Emitter::emitGroupedMatmul(moe::GroupedMatmulOp op) {
  comment(op);
  if (op.getLhsScales() || op.getWeightScales())
    return emitGroupedMatmulFP8(op);
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  bool bf16 = cuda && bf16ExpertWeights;
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
  if (cuda) // the row count bounds the launch; offsets[E-1] (on the device) the rows
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

std::optional<moe::GateUpLayout>
Emitter::interleaveOnDevice(moe::GroupedMatmulOp op, const ValueInfo &weights,
                            std::optional<moe::GateUpLayout> layout) {
  // (The caller has checked that the weights are [E, N, K].)
  if (!op.getEpilogue() || layout != moe::GateUpLayout::Concatenated || !weights.weightOffset ||
      !op.getWeights().hasOneUse())
    return layout;
  std::optional<uint64_t> biasOffset;
  if (Value bias = op.getBias()) {
    auto it = values.find(bias);
    if (it == values.end() || !it->second.weightOffset || !bias.hasOneUse())
      return layout;
    biasOffset = it->second.weightOffset;
  }
  int64_t experts = weights.dims[0].size, n = weights.dims[1].size, k = weights.dims[2].size;
  auto step = [&](uint64_t offset, int64_t rowBytes, StringRef what) {
    createSteps.push_back(llvm::formatv("MOEC_RETURN_IF_ERROR(interleaveGateUp(state.model."
                                        "mutableWeights() + {0}, {1}, {2}, {3}, "
                                        "state.model.stream())); // {4}",
                                        offset, experts, n, rowBytes, what)
                              .str());
  };
  step(*weights.weightOffset, 2 * k, "gate/up weights (bf16)");
  if (biasOffset)
    step(*biasOffset, 4, "gate/up bias");
  return moe::GateUpLayout::Interleaved;
}

/// CUDA: an FP8 grouped matmul whose result only a moe.quantize reads is done
/// by that quantize (groupedMatmulFP8Quantized): on the CUTLASS tiles its
/// epilogue pass writes the codes, and the f32 result is never written.
static bool fusedIntoQuantize(moe::GroupedMatmulOp op, bool cuda) {
  return cuda && op.getLhsScales() && op.getWeightScales() && op.getResult().hasOneUse() &&
         isa<moe::QuantizeOp>(*op.getResult().getUsers().begin());
}

/// The FP8 grouped matmul: e4m3 weights with block scales, and e4m3 rows with
/// their per-row group scales (from moe.quantize), or (CPU only) f32 rows.
LogicalResult Emitter::emitGroupedMatmulFP8(moe::GroupedMatmulOp op) {
  FailureOr<std::vector<std::string>> args = fp8MatmulArgs(op);
  if (failed(args))
    return failure();
  if (fusedIntoQuantize(op, cuda)) {
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
/// predecessor.
bool Emitter::offsetsSettled(moe::GroupedMatmulOp op) {
  auto sort = op.getOffsets().getDefiningOp<moe::SortOp>();
  if (!cuda || !sort)
    return false;
  Value rows = op.getLhs();
  if (auto quantize = rows.getDefiningOp<moe::QuantizeOp>())
    rows = quantize.getInput();
  if (auto permute = rows.getDefiningOp<moe::PermuteOp>())
    return permute.getPermutation() == sort.getPermutation();
  if (auto before = rows.getDefiningOp<moe::GroupedMatmulOp>())
    return before.getOffsets() == op.getOffsets();
  return false;
}

Dim Emitter::fp8MatmulRows(moe::GroupedMatmulOp op) { return values[op.getLhs()].dims[0]; }

FailureOr<std::vector<std::string>> Emitter::fp8MatmulArgs(moe::GroupedMatmulOp op) {
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  bool fp8Rows = static_cast<bool>(op.getLhsScales());
  if (!op.getWeightScales())
    return LogicalResult(unsupported(op, "FP8 rows with weights that are not FP8; " +
                                             targetPhrase() +
                                             " multiplies FP8 rows only with FP8 weights"));
  if (cuda && !fp8Rows)
    return LogicalResult(
        unsupported(op, "FP8 weights with f32 rows; the CUDA target multiplies FP8 weights "
                        "with FP8 rows (moe.quantize) only: compile with --fp8, which "
                        "quantises the rows"));
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
  if (cuda) // the row count bounds the launch; offsets[E-1] (on the device) the rows
    args.push_back(dimExpr((*lhs)->dims[0]));
  if (fp8Rows)
    args.push_back(lhsScales);
  args.insert(args.end(), {dimExpr((*lhs)->dims[1]), (*w)->var, (*weightScales)->var,
                           dimExpr((*w)->dims[0]), dimExpr((*w)->dims[1]), (*offsets)->var, bias,
                           epilogue(op.getEpilogue(), op.getEpilogueLayout())});
  return args;
}

std::string Emitter::writtenRows(Value value, Dim rows) {
  // CUDA: a pointer to the count on the device (nullptr: all rows).
  if (auto permute = value.getDefiningOp<moe::PermuteOp>())
    if (auto it = values.find(permute.getNumValid()); it != values.end())
      return cuda ? it->second.var : "*" + it->second.var;
  if (auto matmul = value.getDefiningOp<moe::GroupedMatmulOp>())
    if (auto it = values.find(matmul.getOffsets()); it != values.end())
      return cuda ? it->second.var + " + (" + dimExpr(it->second.dims[0]) + " - 1)"
                  : it->second.var + "[" + dimExpr(it->second.dims[0]) + " - 1]";
  return cuda ? "nullptr" : dimExpr(rows);
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
      matmul && fusedIntoQuantize(matmul, cuda)) {
    FailureOr<std::vector<std::string>> args = fp8MatmulArgs(matmul);
    if (failed(args))
      return failure();
    FailureOr<std::pair<ValueInfo *, ValueInfo *>> codes =
        defineCodes(op, fp8MatmulRows(matmul));
    if (failed(codes))
      return failure();
    // Decode's f32 gate/up result (the mma.sync tiles', up to kDecodeSlots
    // rows) in the workspace: an allocation in the captured graph would keep
    // this kernel and the next from launching under their predecessors.
    constexpr uint64_t kDecodeSlots = 16; // runtime: kFP8WgmmaMinSlots
    Dim rows = fp8MatmulRows(matmul);
    uint64_t maxRows = static_cast<uint64_t>(rows.size) * (rows.perToken ? maxTokens : 1);
    uint64_t scratchFloats = std::min(maxRows, kDecodeSlots) *
                             static_cast<uint64_t>(codes->first->dims.back().size);
    std::string scratch = "v" + std::to_string(nextVar++);
    decl("float *" + scratch + " = reinterpret_cast<float *>(workspace + " +
         std::to_string(reserve(4 * scratchFloats)) + "); // decode's f32 gate/up result");
    args->insert(args->end(), {codes->first->var, codes->second->var, scratch,
                               std::to_string(scratchFloats)});
    kernel(offsetsSettled(matmul) ? "groupedMatmulFP8QuantizedSettledOffsets"
                                  : "groupedMatmulFP8Quantized",
           *args);
    return success();
  }
  auto permute = op.getInput().getDefiningOp<moe::PermuteOp>();
  bool fused = permute && fusedIntoQuantize(permute, cuda);
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
    kernel("permuteQuantizeE4M3", {(*input)->var, k, (*permutation)->var, (*numValid)->var,
                                   inverseOrNull(permute.getPermutation()), dimExpr(rows),
                                   std::to_string(permute.getTopK()), q->var, scales->var});
  // Only rows that hold data: the sentinel tail of the permuted rows is never
  // written, and so never read.
  else if (cuda)
    kernel("quantizeE4M3", {(*input)->var, dimExpr(rows), k, writtenRows(op.getInput(), rows),
                            q->var, scales->var});
  else
    kernel("quantizeE4M3", {(*input)->var, writtenRows(op.getInput(), rows), k, q->var,
                            scales->var});
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
  std::vector<std::string> args = {(*rows)->var,
                                   (*permutation)->var,
                                   dimExpr((*permutation)->dims[0]),
                                   dimExpr((*rows)->dims[1]),
                                   (*weights)->var,
                                   dimExpr(tokens),
                                   dimExpr((*weights)->dims[1]),
                                   (cuda ? "" : "*") + (*numValid)->var,
                                   addend,
                                   gate,
                                   (*out)->var};
  if (std::string inverse = inverseOrNull(op.getPermutation()); cuda && inverse != "nullptr") {
    // The sort's inverse permutation, already on the device.
    kernel("combineRows",
           {(*rows)->var, inverse, dimExpr((*rows)->dims[1]), (*weights)->var, dimExpr(tokens),
            dimExpr((*weights)->dims[1]), addend, gate, (*out)->var});
    return success();
  }
  if (cuda) {
    // The inverse permutation: one int32 per slot.
    args.insert(args.end() - 1, workspaceInt32((*permutation)->dims[0]));
  }
  kernel("combine", args);
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
  if (cuda) {
    // One strided device-to-device copy per operand.
    int64_t total = 0, at = 0;
    SmallVector<int64_t> chunks;
    for (ValueInfo *part : parts) {
      int64_t chunk = 1;
      for (size_t i = dim; i < part->dims.size(); ++i)
        chunk *= part->dims[i].size;
      chunks.push_back(chunk);
      total += chunk;
    }
    for (auto [part, chunk] : llvm::zip(parts, chunks)) {
      line(llvm::formatv("MOEC_CUDA_TRY(cudaMemcpy2DAsync({0} + {1}, sizeof(float) * {2}, {3}, "
                         "sizeof(float) * {4}, sizeof(float) * {4}, {5}, "
                         "cudaMemcpyDeviceToDevice, stream));",
                         (*out)->var, at, total, part->var, chunk, outer)
               .str());
      at += chunk;
    }
    return success();
  }
  line("for (int64_t o = 0, at = 0; o < " + std::to_string(outer) + "; ++o) {");
  for (ValueInfo *part : parts) {
    int64_t chunk = 1;
    for (size_t i = dim; i < part->dims.size(); ++i)
      chunk *= part->dims[i].size;
    line(llvm::formatv("  std::memcpy({0} + at, {1} + o * {2}, sizeof(float) * {2});", (*out)->var,
                       part->var, chunk)
             .str());
    line("  at += " + std::to_string(chunk) + ";");
  }
  line("}");
  return success();
}

LogicalResult Emitter::emitReturn(func::ReturnOp op) {
  for (auto [i, value] : llvm::enumerate(op.getOperands())) {
    FailureOr<ValueInfo *> info = operand(op, value, "result " + std::to_string(i), false);
    if (failed(info))
      return failure();
    // The caller sizes outputs from the manifest, where the dynamic dimension
    // is T itself; a result of S = K·T rows (say) would overrun it.
    const SmallVector<Dim> &declared = outputs[i].dims;
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
    if (cuda) {
      // cudaMemcpyDefault: the caller's buffer may be host or device memory
      // (unified addressing tells which), moec.h says so.
      copyOutLine(llvm::formatv("{3}MOEC_CUDA_TRY(cudaMemcpyAsync(outputs[{0}], {1}, "
                                "sizeof(*{1}) * ({2}), cudaMemcpyDefault, stream));",
                                i, (*info)->var, dimExpr(*count),
                                inPlaceCapable ? "if (!inPlace)\n    " : "")
                      .str());
      continue;
    }
    if (auto it = outputOf.find(viewRoot(value)); it != outputOf.end() && it->second == i)
      continue; // computed in place
    line("// result " + std::to_string(i) + " is an input, a weight or another result: copied");
    line(llvm::formatv("std::memcpy(outputs[{0}], {1}, sizeof(*{1}) * ({2}));", i, (*info)->var,
                       dimExpr(*count))
             .str());
  }
  return success();
}

std::string tensorName(func::FuncOp function, bool input, unsigned index) {
  DictionaryAttr attrs = input ? function.getArgAttrDict(index) : function.getResultAttrDict(index);
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("onnx.name"))
      return name.str();
  return (input ? "input" : "output") + std::to_string(index);
}

/// The CUDA translation unit: the same body, run on the State's stream with
/// device pointers; inputs are copied in and outputs out within it, and the
/// host waits once, at the end.
void Emitter::assembleCuda(llvm::raw_ostream &os) {
  uint64_t sorts = sortSlots.size();
  os << "// Generated by `moec compile --target=cuda`: the grouped phase of @"
     << function.getSymName() << " as calls of moec's CUDA kernels on one stream. Do not edit.\n"
     << "#include \"moec/runtime/ArtifactABI.h\"\n"
     << "#include \"moec/runtime/Cuda.h\"\n"
     << "#include \"moec/runtime/cuda/Artifact.h\"\n"
     << "#include \"moec/runtime/cuda/MoEKernels.h\"\n\n"
     << "#include <cstdint>\n#include <limits>\n#include <new>\n\n"
     << "#define MOEC_EXPORT extern \"C\" __attribute__((visibility(\"default\")))\n\n"
     << "using namespace moec::rt;\nusing namespace moec::rt::cuda;\n"
     << "using moec::rt::cpu::ActivationKind;\nusing moec::rt::cpu::GateUpLayout;\n"
     << "using moec::rt::cpu::RoutingKind;\n\n"
     << "namespace {\n"
     << "// Planned for " << maxTokens << " tokens: device workspace " << workspaceBytes
     << " bytes plus CUB's sort workspace, weights " << weightsBytes << " bytes.\n"
     << "constexpr uint64_t kPlannedBytes = " << workspaceBytes << ";\n"
     << "constexpr int64_t kSortSlots[] = {";
  for (uint64_t i = 0; i < sorts; ++i)
    os << (i ? ", " : "") << sortSlots[i];
  os << (sorts ? "" : "0") << "};\n\n"
     << "struct State {\n  DeviceModel model;\n  GraphCache graphs;\n"
     << "  size_t sortOffset[" << std::max<uint64_t>(sorts, 1) << "] = {}, sortBytes["
     << std::max<uint64_t>(sorts, 1) << "] = {};\n};\n\n"
     << "Status create(State &state, const unsigned char *weights, uint64_t weightsBytes) {\n"
     << "  MOEC_RETURN_IF_ERROR(requireDevice());\n"
     << "  uint64_t total = kPlannedBytes;\n"
     << "  for (uint64_t i = 0; i < " << sorts << "; ++i) {\n"
     << "    MOEC_RETURN_IF_ERROR(sortWorkspaceBytes(kSortSlots[i], state.sortBytes[i]));\n"
     << "    state.sortOffset[i] = total - kPlannedBytes;\n"
     << "    total += (state.sortBytes[i] + 255) / 256 * 256;\n  }\n"
     << "  MOEC_RETURN_IF_ERROR(state.model.create(weights, weightsBytes, total));\n";
  if (!createSteps.empty()) {
    os << "  // Concatenated gate/up rows interleaved once on the device: the kernels below\n"
       << "  // are given GateUpLayout::Interleaved (docs/design.md, \"Gate/up rows on the GPU\").\n";
    for (const std::string &step : createSteps)
      os << "  " << step << "\n";
    os << "  MOEC_CUDA_TRY(cudaStreamSynchronize(state.model.stream()));\n";
  }
  os << "  return Status::ok();\n}\n\n"
     << "/// `caller`: null (moec_run: the host waits), or the stream of moec_run_async.\n"
     << "Status run(State &state, const void *const *inputs, void *const *outputs, int64_t T,\n"
     << "           const cudaStream_t *caller) {\n"
     << "  cudaStream_t stream = state.model.stream();\n"
     << "  const unsigned char *weights = state.model.weights();\n"
     << "  unsigned char *workspace = state.model.workspace();\n"
     << "  unsigned char *sortWorkspace = workspace + kPlannedBytes;\n"
     << "  (void)T;\n  (void)weights;\n  (void)sortWorkspace;\n  (void)inputs;\n"
     << inPlaceSetup() << decls
     << "  if (caller) // the inputs are ready once the caller's queued work is done\n"
     << "    MOEC_RETURN_IF_ERROR(state.model.waitForCaller(*caller));\n"
     << copyIn
     << "  // The kernels: eagerly, or replayed as the CUDA graph captured for T.\n"
     << "  auto compute = [&]() -> Status {\n"
     << llvm::join(llvm::map_range(llvm::split(StringRef(body).rtrim('\n'), '\n'),
                                   [](StringRef l) { return "  " + l.str(); }),
                   "\n")
     << "\n    return Status::ok();\n  };\n"
     << graphRun()
     << copyOut
     << "  if (caller) // the caller's stream goes on once the outputs are written; the host does not wait\n"
     << "    return state.model.releaseCaller(*caller);\n"
     << "  // The one host synchronisation: the outputs are where the caller wants them after it.\n"
     << "  MOEC_CUDA_TRY(cudaStreamSynchronize(stream));\n"
     << "  return Status::ok();\n}\n"
     << "} // namespace\n\n"
     << "MOEC_EXPORT int moec_artifact_abi_version() { return MOEC_ARTIFACT_ABI_VERSION; }\n\n"
     << "MOEC_EXPORT int moec_artifact_create(unsigned, const unsigned char *weights,\n"
     << "                                     uint64_t weightsBytes, void **state, char *error,\n"
     << "                                     size_t errorBytes) {\n"
     << "  auto *created = new (std::nothrow) State;\n"
     << "  if (!created)\n"
     << "    return reportStatus(Status::error(\"out of memory\"), error, errorBytes);\n"
     << "  Status status = create(*created, weights, weightsBytes);\n"
     << "  if (!status) {\n    delete created;\n"
     << "    return reportStatus(status.withContext(\"creating the CUDA model\"), error, errorBytes);\n"
     << "  }\n  *state = created;\n  return 0;\n}\n\n"
     << "MOEC_EXPORT void moec_artifact_destroy(void *state) { delete static_cast<State *>(state); }\n\n"
     << "MOEC_EXPORT int moec_artifact_run(void *state, const unsigned char *,\n"
     << "                                  const void *const *inputs, void *const *outputs,\n"
     << "                                  int64_t tokens, unsigned char *, const void *stream,\n"
     << "                                  char *error, size_t errorBytes) {\n"
     << "  return reportStatus(run(*static_cast<State *>(state), inputs, outputs, tokens,\n"
     << "                          static_cast<const cudaStream_t *>(stream)),\n"
     << "                      error, errorBytes);\n}\n";
}

std::string Emitter::inPlaceSetup() const {
  if (!inPlaceCapable)
    return "  const bool inPlace = false; // an output is not a kernel's own result\n";
  std::string counts = std::to_string(callerInputs.size()) + ", callerOutputs, " +
                       std::to_string(callerOutputs.size());
  return "  // The caller's buffers instead of copies through the workspace when they are\n"
         "  // device memory (moec.h; GraphCache::inPlace).\n"
         "  const CallerBuffer callerInputs[] = {" +
         llvm::join(callerInputs, ", ") + "};\n" +
         "  const CallerBuffer callerOutputs[] = {" + llvm::join(callerOutputs, ", ") + "};\n" +
         "  const bool inPlace = state.graphs.inPlace(T, callerInputs, " + counts + ");\n";
}

std::string Emitter::graphRun() const {
  if (!inPlaceCapable)
    return "  MOEC_RETURN_IF_ERROR(state.graphs.run(T, stream, compute));\n";
  return "  MOEC_RETURN_IF_ERROR(inPlace ? state.graphs.run(T, stream, compute, callerInputs, " +
         std::to_string(callerInputs.size()) + ", callerOutputs, " +
         std::to_string(callerOutputs.size()) +
         ")\n                               : state.graphs.run(T, stream, compute));\n";
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
    for (const std::vector<TensorDecl> *list : {&inputs, &outputs})
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
        declare(function, arg.getType(), tensorName(function, true, i), true, inputs);
    if (failed(dims))
      return failure();
    ValueInfo &info = values[arg];
    info.var = "in" + std::to_string(i);
    info.dims = *dims;
    info.elementType = cast<RankedTensorType>(arg.getType()).getElementType();
    std::string cppType = *cppElementType(info.elementType);
    if (cuda) {
      // The caller's buffer itself when the run is in place, else copied into
      // its own workspace slot, on the stream, from host or device memory
      // (cudaMemcpyDefault).
      std::optional<Dim> count = countOf(info.dims);
      uint64_t offset = reserve(static_cast<uint64_t>(count->size) *
                                (count->perToken ? maxTokens : 1) *
                                (info.elementType.getIntOrFloatBitWidth() / 8));
      decl(cppType + " *" + info.var + " = inPlace ? static_cast<" + cppType +
           " *>(const_cast<void *>(inputs[" + std::to_string(i) + "])) : reinterpret_cast<" +
           cppType + " *>(workspace + " + std::to_string(offset) + ");");
      callerInputs.push_back("{inputs[" + std::to_string(i) + "], sizeof(" + cppType + ") * (" +
                             dimExpr(*count) + ")}");
      copyInLine(llvm::formatv("if (!inPlace)\n    MOEC_CUDA_TRY(cudaMemcpyAsync({0}, inputs[{1}], "
                               "sizeof(*{0}) * ({2}), cudaMemcpyDefault, stream));",
                               info.var, i, dimExpr(*count))
                     .str());
      continue;
    }
    line("const " + cppType + " *" + info.var + " = static_cast<const " + cppType +
         " *>(inputs[" + std::to_string(i) + "]);");
  }
  auto returnOp = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  for (auto [i, type] : llvm::enumerate(function.getResultTypes()))
    if (failed(declare(returnOp, type, tensorName(function, false, i), false, outputs)))
      return failure();
  // A result computed by a kernel is written straight into its output buffer
  // (through any views); others are copied at the end.
  for (auto [i, value] : llvm::enumerate(returnOp.getOperands())) {
    Value root = viewRoot(value);
    Operation *def = root.getDefiningOp();
    if (def && isa<moe::MoEDialect>(def->getDialect()) && !outputOf.count(root))
      outputOf[root] = i;
  }
  inPlaceCapable = cuda && !inputs.empty() && !outputs.empty() &&
                   llvm::all_of(llvm::enumerate(returnOp.getOperands()), [&](auto result) {
                     auto it = outputOf.find(viewRoot(result.value()));
                     return it != outputOf.end() && it->second == result.index();
                   });
  for (const TensorDecl &output : outputs)
    callerOutputs.push_back("{outputs[" + std::to_string(callerOutputs.size()) + "], sizeof(" +
                            *cppElementType(output.elementType) + ") * (" +
                            dimExpr(*countOf(output.dims)) + ")}");

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
  planSideBranch();
  if (!sideBranch.empty()) {
    line("// The shared expert, on the side stream beside the routed chain (joined at the "
         "combine).");
    line("MOEC_RETURN_IF_ERROR(state.model.forkSide());");
    line("cudaStream_t side = state.model.sideStream();");
    streamExpr = "side";
    for (Operation &op : function.getBody().front())
      if ((sideBranch.contains(&op) || inputViews.contains(&op)) && failed(emitOp(op)))
        return failure();
    streamExpr = "stream";
  }
  bool joined = sideBranch.empty();
  for (Operation &op : function.getBody().front()) {
    if (sideBranch.contains(&op) || inputViews.contains(&op))
      continue;
    if (!joined && isa<moe::CombineOp, func::ReturnOp>(op)) {
      line("MOEC_RETURN_IF_ERROR(state.model.joinSide());");
      joined = true;
    }
    if (failed(emitOp(op)))
      return failure();
  }

  // Assemble the translation unit.
  llvm::raw_string_ostream os(source);
  if (cuda) {
    assembleCuda(os);
    return success();
  }
  os << "// Generated by `moec compile --target=cpu`: the grouped phase of @"
     << function.getSymName() << " as calls of moec's CPU kernels. Do not edit.\n"
     << "#include \"moec/runtime/ArtifactABI.h\"\n"
     << "#include \"moec/runtime/cpu/MoEKernels.h\"\n\n"
     << "#include <cstdint>\n#include <cstring>\n#include <limits>\n#include <new>\n\n"
     << "#define MOEC_EXPORT extern \"C\" __attribute__((visibility(\"default\")))\n\n"
     << "using namespace moec::rt::cpu;\n\n"
     << "namespace {\n"
     << "struct State {\n  explicit State(unsigned threads) : pool(threads) {}\n"
     << "  ThreadPool pool;\n};\n";
  if (needsIdsToI32)
    os << "\n/// i64 expert ids as i32; ids outside i32's range become -1, a sentinel.\n"
       << "void idsToI32(const int64_t *ids, int64_t count, int32_t *out) {\n"
       << "  for (int64_t i = 0; i < count; ++i)\n"
       << "    out[i] = ids[i] >= std::numeric_limits<int32_t>::min() &&\n"
       << "                     ids[i] <= std::numeric_limits<int32_t>::max()\n"
       << "                 ? static_cast<int32_t>(ids[i]) : -1;\n}\n";
  os << "} // namespace\n\n"
     << "MOEC_EXPORT int moec_artifact_abi_version() { return MOEC_ARTIFACT_ABI_VERSION; }\n\n"
     << "MOEC_EXPORT int moec_artifact_create(unsigned threads, const unsigned char *, uint64_t,\n"
     << "                                     void **state, char *error, size_t errorBytes) {\n"
     << "  try {\n    *state = new State(threads);\n    return 0;\n  } catch (...) {\n"
     << "    if (error && errorBytes)\n"
     << "      std::strncpy(error, \"cannot create the thread pool\", errorBytes - 1)[errorBytes - 1] = 0;\n"
     << "    return 1;\n  }\n}\n\n"
     << "MOEC_EXPORT void moec_artifact_destroy(void *state) { delete static_cast<State *>(state); }\n\n"
     << "// Planned for " << maxTokens << " tokens: workspace " << workspaceBytes
     << " bytes, weights " << weightsBytes << " bytes.\n"
     << "MOEC_EXPORT int moec_artifact_run(void *state, const unsigned char *weights,\n"
     << "                                  const void *const *inputs, void *const *outputs,\n"
     << "                                  int64_t tokens, unsigned char *workspace,\n"
     << "                                  const void *, char *, size_t) {\n"
     << "  ThreadPool &pool = static_cast<State *>(state)->pool;\n"
     << "  const int64_t T = tokens;\n"
     << "  (void)pool;\n  (void)T;\n  (void)weights;\n  (void)workspace;\n"
     << body << "  return 0;\n}\n";
  return success();
}

/// Writes `bytes` to `path`; false with `error` set on failure.
bool writeFile(const std::string &path, llvm::function_ref<void(llvm::raw_ostream &)> write,
               std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = path + ": " + ec.message();
    return false;
  }
  write(os);
  os.close();
  if (os.has_error()) {
    error = path + ": " + os.error().message();
    os.clear_error();
    return false;
  }
  return true;
}

std::string envOr(const char *name, const std::string &fallback) {
  if (std::optional<std::string> value = llvm::sys::Process::GetEnv(name); value && !value->empty())
    return *value;
  return fallback;
}

/// Files an artifact directory may hold; only these are removed when an
/// existing artifact is replaced.
/// --emit=exe: `program` (moec-run), zeros to a page boundary, then the
/// artifact's weights.bin, manifest.txt and model.so from `dir`, then the
/// trailer that locates them (moec/runtime/Bundle.h), written to `file` and
/// made executable.
LogicalResult writeExecutable(StringRef program, StringRef dir, StringRef file,
                              std::string &error) {
  SmallVector<std::unique_ptr<llvm::MemoryBuffer>, 4> parts;
  for (std::string path : {program.str(), (dir + "/weights.bin").str(),
                           (dir + "/manifest.txt").str(), (dir + "/model.so").str()}) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!buffer) {
      error = "cannot read '" + path + "': " + buffer.getError().message();
      return failure();
    }
    parts.push_back(std::move(*buffer));
  }
  rt::BundleTrailer trailer = {};
  std::memcpy(trailer.magic, rt::kBundleMagic, sizeof(trailer.magic));
  trailer.version = rt::kBundleVersion;
  uint64_t programBytes = parts[0]->getBufferSize();
  trailer.weightsOffset = llvm::alignTo(programBytes, rt::kBundleAlignment);
  trailer.weightsBytes = parts[1]->getBufferSize();
  trailer.manifestOffset = trailer.weightsOffset + trailer.weightsBytes;
  trailer.manifestBytes = parts[2]->getBufferSize();
  trailer.libraryOffset = trailer.manifestOffset + trailer.manifestBytes;
  trailer.libraryBytes = parts[3]->getBufferSize();
  bool written = writeFile(
      file.str(),
      [&](llvm::raw_ostream &os) {
        os << parts[0]->getBuffer();
        os.write_zeros(trailer.weightsOffset - programBytes);
        for (int i = 1; i < 4; ++i)
          os << parts[i]->getBuffer();
        os.write(reinterpret_cast<const char *>(&trailer), sizeof(trailer));
      },
      error);
  if (!written)
    return failure();
  if (std::error_code ec = llvm::sys::fs::setPermissions(
          file, llvm::sys::fs::all_read | llvm::sys::fs::all_exe | llvm::sys::fs::owner_write)) {
    error = "cannot make '" + file.str() + "' executable: " + ec.message();
    return failure();
  }
  return success();
}

constexpr const char *kArtifactFiles[] = {"manifest.txt", "weights.bin", "model.so", "model.cpp",
                                          "model.cu", "compile.log"};

} // namespace

LogicalResult emitArtifact(ModuleOp module, const ArtifactOptions &options) {
  bool cuda = options.target == Target::CUDA;
  StringRef targetName = cuda ? "cuda" : "cpu";
  MLIRContext *context = module.getContext();
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
  (void)context;

  Emitter emitter(function, options.maxTokens, options.target, options.externalWeights,
                  options.bf16ExpertWeights, options.bf16ExpertOutputs);
  if (failed(emitter.run()))
    return failure();

  // The CUDA target's tools are checked once the code is known to be
  // generable, before anything is written: without nvcc (or a CUDA runtime in
  // this build) it cannot work.
  std::string nvccPath, cudaLibrary;
  if (cuda) {
    cudaLibrary = options.runtimeCudaLibrary.empty()
                      ? envOr("MOEC_RUNTIME_CUDA_LIBRARY", MOEC_RUNTIME_CUDA_LIBRARY)
                      : options.runtimeCudaLibrary;
    if (cudaLibrary.empty() || !llvm::sys::fs::exists(cudaLibrary))
      return fail("--target=cuda needs the runtime's CUDA library" +
                  (cudaLibrary.empty() ? Twine(", and this moec was built without CUDA")
                                       : " (not at '" + cudaLibrary + "')") +
                  " (set MOEC_RUNTIME_CUDA_LIBRARY)");
    std::string nvccName = options.nvcc;
    if (nvccName.empty())
      nvccName = envOr("MOEC_NVCC", std::string(MOEC_NVCC).empty() ? "nvcc" : MOEC_NVCC);
    llvm::ErrorOr<std::string> found = llvm::sys::path::is_absolute(nvccName)
                                           ? (llvm::sys::fs::can_execute(nvccName)
                                                  ? llvm::ErrorOr<std::string>(nvccName)
                                                  : std::errc::no_such_file_or_directory)
                                           : llvm::sys::findProgramByName(nvccName);
    if (!found)
      return fail("--target=cuda needs CUDA's compiler, but there is no nvcc at '" + nvccName +
                  "' (install the CUDA toolkit or set MOEC_NVCC)");
    nvccPath = *found;
  }


  // Everything is written into a fresh directory beside the target, which
  // replaces the target only once model.so has compiled: a failed compile
  // leaves no artifact behind, and a previous one intact.
  std::string target = options.outputDir;
  while (target.size() > 1 && target.back() == '/')
    target.pop_back();
  // Only an earlier artifact (or an empty directory; with --emit=exe, an
  // earlier moec executable) may be overwritten; checked before anything is
  // written.
  std::string runProgram;
  if (options.executable) {
    if (options.externalWeights)
      return fail("--emit=exe needs the weights (drop --weights=external)");
    runProgram = options.runProgram.empty() ? envOr("MOEC_RUN", MOEC_RUN_PROGRAM)
                                            : options.runProgram;
    if (runProgram.empty() || !llvm::sys::fs::can_execute(runProgram))
      return fail("--emit=exe copies moec-run, which is not at '" + runProgram +
                  "' (set MOEC_RUN)");
    if (llvm::sys::fs::exists(target)) {
      rt::BundleTrailer trailer;
      bool present = false;
      if (llvm::sys::fs::is_directory(target) ||
          !rt::readBundleTrailer(target, trailer, present).isOk() || !present)
        return fail("'" + target + "' exists and is not an executable written by moec compile "
                    "--emit=exe; not overwriting it");
    }
  } else if (llvm::sys::fs::is_directory(target)) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(target, ec), end; it != end && !ec;
         it.increment(ec)) {
      StringRef name = llvm::sys::path::filename(it->path());
      if (!llvm::is_contained(kArtifactFiles, name))
        return fail("'" + target + "' holds '" + name +
                    "', which is not part of a moec artifact; not overwriting it");
    }
    if (ec)
      return fail("cannot list '" + target + "': " + ec.message());
  } else if (llvm::sys::fs::exists(target)) {
    return fail("'" + target + "' exists and is not an artifact directory");
  }
  std::string staging = target + ".tmp-" + std::to_string(::getpid());
  llvm::sys::fs::remove_directories(staging);
  if (std::error_code ec = llvm::sys::fs::create_directories(staging))
    return fail("cannot create " + staging + ": " + ec.message());
  llvm::scope_exit cleanup([&] { llvm::sys::fs::remove_directories(staging); });

  std::string error;
  std::string sourceName = cuda ? "model.cu" : "model.cpp";
  if (!writeFile(staging + "/" + sourceName, [&](llvm::raw_ostream &os) { os << emitter.source; },
                 error))
    return fail(error);

  uint64_t total = emitter.weightsBytes;
  if (!options.externalWeights &&
      !writeFile(
          staging + "/" + rt::artifact::kWeightsFile,
          [&](llvm::raw_ostream &os) {
            char header[rt::artifact::kWeightsHeaderBytes];
            rt::artifact::writeWeightsHeader(emitter.weights.size(), total, header);
            os.write(header, sizeof(header));
            uint64_t at = rt::artifact::kWeightsHeaderBytes;
            for (const WeightEntry &weight : emitter.weights) {
              os.write_zeros(weight.offset - at);
              os.write(weight.bytes.data(), weight.bytes.size());
              at = weight.offset + weight.size;
            }
          },
          error))
    return fail(error);

  rt::artifact::Manifest manifest;
  manifest.target = targetName.str();
  manifest.weightsBytes = total;
  manifest.workspaceBytes = emitter.workspaceBytes;
  manifest.maxTokens = options.maxTokens;
  manifest.externalWeights = options.externalWeights;
  for (auto [decls, entries] : {std::pair{&emitter.inputs, &manifest.inputs},
                                std::pair{&emitter.outputs, &manifest.outputs}})
    for (const TensorDecl &decl : *decls) {
      rt::artifact::TensorEntry entry{decl.name, manifestDType(decl.elementType), {}};
      for (Dim dim : decl.dims) {
        // The manifest's one dynamic dimension is the token count itself.
        if (dim.perToken && dim.size != 1)
          return fail("cannot generate code: " + Twine(decl.name) + "'s dimension of " +
                      Twine(dim.size) + " rows per token has no manifest spelling");
        entry.shape.push_back(dim.perToken ? -1 : dim.size);
      }
      entries->push_back(std::move(entry));
    }
  for (const WeightEntry &weight : emitter.weights)
    manifest.weights.push_back({weight.name,
                                weight.bf16 ? "bf16" : manifestDType(weight.elementType),
                                std::vector<int64_t>(weight.shape.begin(), weight.shape.end()),
                                weight.offset, weight.size});
  if (!writeFile(
          staging + "/" + rt::artifact::kManifestFile,
          [&](llvm::raw_ostream &os) { os << rt::artifact::printManifest(manifest); }, error))
    return fail(error);

  // Compile: the runtime's archive is linked statically and its symbols kept
  // local, so model.so needs nothing of moec and two artifacts never clash.
  std::string includeDir = options.runtimeIncludeDir.empty()
                               ? envOr("MOEC_RUNTIME_INCLUDE_DIR", MOEC_RUNTIME_INCLUDE_DIR)
                               : options.runtimeIncludeDir;
  std::string library = options.runtimeLibrary.empty()
                            ? envOr("MOEC_RUNTIME_LIBRARY", MOEC_RUNTIME_LIBRARY)
                            : options.runtimeLibrary;
  if (!llvm::sys::fs::exists(includeDir + "/moec/runtime/cpu/MoEKernels.h"))
    return fail("the runtime's headers are not at '" + includeDir +
                "' (set MOEC_RUNTIME_INCLUDE_DIR)");
  if (!llvm::sys::fs::exists(library))
    return fail("the runtime library is not at '" + library + "' (set MOEC_RUNTIME_LIBRARY)");
  std::string source = staging + "/" + sourceName, output = staging + "/model.so",
              log = staging + "/compile.log";
  std::string compiler;
  SmallVector<StringRef> args;
  if (cuda) {
    // CUDA's runtime is linked statically too (-cudart static): model.so
    // needs the driver, nothing of the toolkit.
    compiler = nvccPath;
    args = {compiler, "-O2", "-std=c++20", "-Xcompiler", "-fPIC,-fvisibility=hidden", "-shared",
            "-gencode=arch=compute_90a,code=sm_90a", "-I", includeDir, source, cudaLibrary,
            library, "-o", output, "-cudart", "static", "-Xlinker", "--exclude-libs,ALL",
            "-Xlinker", "-z,defs", "-lpthread", "-ldl", "-lrt"};
  } else {
    std::string cxxName = options.cxx.empty() ? envOr("MOEC_CXX", "c++") : options.cxx;
    llvm::ErrorOr<std::string> cxx = llvm::sys::findProgramByName(cxxName);
    if (!cxx)
      return fail("no C++ compiler '" + cxxName + "' on PATH (set MOEC_CXX)");
    compiler = *cxx;
    args = {compiler,   "-O2",      "-std=c++20", "-fPIC",
            "-shared",  "-fvisibility=hidden",    "-I",
            includeDir, source,     library,      "-o",
            output,     "-pthread", "-Wl,--exclude-libs,ALL",
            "-Wl,-z,defs"};
  }
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log), StringRef(log)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(compiler, args, std::nullopt, redirects, 0, 0, &execError);
  if (rc != 0) {
    std::string text;
    if (auto buffer = llvm::MemoryBuffer::getFile(log))
      text = (*buffer)->getBuffer().take_back(4000).str();
    return fail("compiling the generated code failed (" +
                (execError.empty() ? "exit status " + std::to_string(rc) : execError) +
                "): " + llvm::join(args, " ") + "\n" + text);
  }
  llvm::sys::fs::remove(log);

  if (options.executable) {
    std::string file = staging + ".exe";
    if (failed(writeExecutable(runProgram, staging, file, error)))
      return fail(error);
    if (std::error_code ec = llvm::sys::fs::rename(file, target)) {
      llvm::sys::fs::remove(file);
      return fail("cannot move the executable into '" + target + "': " + ec.message());
    }
    return success();
  }

  // Replace the target (checked to be an earlier artifact above).
  if (llvm::sys::fs::is_directory(target)) {
    for (const char *file : kArtifactFiles)
      llvm::sys::fs::remove(target + "/" + file);
    if (std::error_code ec = llvm::sys::fs::remove(target))
      return fail("cannot replace '" + target + "': " + ec.message());
  }
  if (std::error_code ec = llvm::sys::fs::rename(staging, target))
    return fail("cannot move the artifact into '" + target + "': " + ec.message());
  cleanup.release();
  return success();
}

} // namespace moec::codegen
