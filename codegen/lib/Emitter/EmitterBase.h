//===- EmitterBase.h - the printers' shared emitter (private) --*- C++ -*-===//
//
// The part of code generation that does not depend on the target: the value
// table (what C++ variable holds each SSA value, its shape as Dims), the
// workspace plan, the placement of weight constants in weights.bin, the walk
// over the function with the op-by-op checks and their diagnostics. What is
// printed for a kernel call, where inputs, results and outputs live, and how
// the translation unit is assembled are the printers' (CpuPrinter.cpp,
// CudaPrinter.cpp), through the virtual hooks below.
//
// Shapes: every dimension is static except the token dimension, which is
// dynamic up to --max-tokens. A dimension is therefore `n` or `n·T`, a tensor
// has at most one dynamic dimension, and the workspace is planned once for
// T = max tokens (each intermediate at a fixed, 256-byte aligned offset).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CODEGEN_LIB_EMITTERBASE_H
#define MOEC_CODEGEN_LIB_EMITTERBASE_H

#include "moec/Codegen/Emitter.h"
#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/Utils/ConstantData.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

namespace moec::codegen {

/// Weights and workspace slots start at multiples of 256 bytes. At 64 every
/// tensor of the bench artifacts sat at 64 mod 128, so each 128-byte row chunk
/// a kernel loads straddled two of the L2's 128-byte lines: ncu had the decode
/// kernel at 72 % of DRAM bandwidth in the artifact against 92 % on the same
/// data 128-aligned, with the L2 busy at 93 % in both.
constexpr uint64_t kAlignment = 256;
/// weights.bin's header (docs/artifact.md); the first tensor follows it.
constexpr uint64_t kWeightsHeaderBytes = 64;

inline uint64_t alignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
/// The largest workspace or weights file planned (2^48 bytes): far beyond any
/// device, and far from wrapping when offsets are added.
constexpr uint64_t kMaxPlannedBytes = uint64_t{1} << 48;

/// The element count of `dims` as a Dim (at most one may scale with T).
std::optional<Dim> countOf(mlir::ArrayRef<Dim> dims);
/// A Dim as a C++ expression: `n`, `T` or `n * T`.
std::string dimExpr(Dim dim);
/// A float as an exact C++ literal.
std::string floatLiteral(double value);
/// The C++ element type of a tensor element type (FP8 as its uint8_t bits).
std::optional<std::string> cppElementType(mlir::Type type);
/// onnx.Reshape, Squeeze, Unsqueeze, Identity: aliases, no kernel.
bool isView(mlir::Operation *op);

/// What a value lives in and what the generated code calls it.
struct ValueInfo {
  std::string var;             // the C++ pointer variable
  mlir::SmallVector<Dim> dims; // its shape
  /// bf16 (moe-cast-experts-bf16): a value is held as BF16 *, a weight as
  /// its uint16_t bits.
  mlir::Type elementType;
  /// A weight constant: its offset in weights.bin.
  std::optional<uint64_t> weightOffset;
};

class Emitter {
public:
  Emitter(mlir::func::FuncOp function, const EmitterOptions &options)
      : function(function), maxTokens(options.maxTokens),
        externalWeights(options.externalWeights) {
    result.weightsBytes = kWeightsHeaderBytes;
    if (auto module = function->getParentOfType<mlir::ModuleOp>())
      if (auto seed = module->getAttrOfType<mlir::IntegerAttr>(kRandomSeedAttr))
        result.randomSeed = seed.getValue().getZExtValue();
  }
  virtual ~Emitter() = default;

  /// Prints the function into `result.source` and fills in its layout.
  mlir::LogicalResult run();

  EmittedModule result;

protected:
  //===--- Target hooks -------------------------------------------------===//

  /// "the CPU target" / "the CUDA target", for messages.
  virtual std::string targetPhrase() const = 0;
  /// Whether the target has the bf16-weight kernels (and bf16 rows).
  virtual bool hasBF16Kernels() const = 0;
  /// Whether the target multiplies MXFP4 weights (moe.grouped_matmul).
  virtual bool hasMXFP4Kernels() const { return false; }
  /// The multiple of K that the target's MXFP4 kernel needs.
  virtual int64_t mxfp4KMultiple() const { return 1; }
  /// Whether the target runs one program for every expert-parallel rank (the
  /// rank and the all-reduce through the loader's moec_communicator).
  virtual bool hasExpertParallelism() const { return false; }
  /// The C++ expression of the running rank.
  virtual std::string rankExpr() const { return "0"; }
  /// moe.all_reduce: `count` floats of `in` summed over the ranks into `out`
  /// (statements that return the communicator's error).
  virtual void printAllReduce(const ValueInfo &in, const ValueInfo &out,
                              const std::string &count) {}
  /// One kernel call (`pool`: the CPU kernel takes the thread pool).
  virtual void printKernel(mlir::StringRef name, std::vector<std::string> args, bool pool) = 0;
  /// A pointer declaration (CUDA keeps them apart from the kernel calls).
  virtual void decl(const mlir::Twine &text) = 0;
  /// Declares input `index`'s pointer `info.var` of C++ type `cppType *`.
  virtual void declareInput(unsigned index, ValueInfo &info, const std::string &cppType) = 0;
  /// Declares a result's pointer `info.var`: `bytes` of workspace, or the
  /// caller's buffer of function result `output`.
  virtual void declareResult(ValueInfo &info, const std::string &cppType, uint64_t bytes,
                             std::optional<unsigned> output) = 0;
  /// Called once the outputs are declared and `outputOf` is known.
  virtual void planOutputs(mlir::func::ReturnOp) {}
  /// Emits the function's ops (`emitOp` each) in the order the target runs
  /// them; by default in program order.
  virtual mlir::LogicalResult
  emitOps(llvm::function_ref<mlir::LogicalResult(mlir::Operation &)> emitOp);
  /// i64 expert ids as the i32 the sort takes, into `out` (`slots` ids).
  virtual void narrowIds(const ValueInfo &ids, Dim slots, const std::string &out) = 0;
  /// The sort's arguments after its results (CUDA: the inverse, CUB's workspace).
  virtual void addSortArgs(moe::SortOp, Dim, std::vector<std::string> &) {}
  /// Whether moe.quantize computes `op` itself (its result is never written).
  virtual bool fusedIntoQuantize(moe::PermuteOp) const { return false; }
  virtual bool fusedIntoQuantize(moe::GroupedMatmulOp) const { return false; }
  /// Whether grouped matmuls take the row count (the launch bound) after the rows.
  virtual bool launchTakesRowCount() const = 0;
  /// Whether the sort behind `op`'s offsets ran two launches before it.
  virtual bool offsetsSettled(moe::GroupedMatmulOp) { return false; }
  /// The gate/up layout the bf16 grouped matmul `op` is given.
  virtual std::optional<moe::GateUpLayout>
  interleaveOnDevice(moe::GroupedMatmulOp, const ValueInfo &,
                     std::optional<moe::GateUpLayout> layout) {
    return layout;
  }
  /// The MXFP4 grouped matmul `op` reads `weights` (packed codes); a target
  /// whose kernels read them in another layout re-lays them out at load.
  virtual void relayoutMXFP4OnDevice(moe::GroupedMatmulOp, const ValueInfo &) {}
  /// An FP8 grouped matmul's rows: FP8 (with scales) or not.
  virtual mlir::LogicalResult checkFP8Rows(moe::GroupedMatmulOp, bool) { return mlir::success(); }
  /// The number of rows of `value` that hold data, as the kernels take it.
  virtual std::string writtenRows(mlir::Value value, Dim rows) = 0;
  virtual void printPermute(moe::PermuteOp op, const ValueInfo &hidden,
                            const ValueInfo &permutation, const ValueInfo &numValid,
                            const ValueInfo &rows) = 0;
  /// moe.quantize of `rows` rows of `input` (`written` of them hold data).
  virtual void printQuantize(const ValueInfo &input, Dim rows, const std::string &k,
                             const std::string &written, const ValueInfo &q,
                             const ValueInfo &scales) = 0;
  /// moe.quantize of the rows of `permute`, which it computes itself
  /// (fusedIntoQuantize).
  virtual void printPermuteQuantize(moe::PermuteOp, const ValueInfo &, const ValueInfo &,
                                    const ValueInfo &, const ValueInfo &, const ValueInfo &) {
    llvm_unreachable("a printer that fuses permutes into moe.quantize prints them");
  }
  /// moe.quantize of an FP8 grouped matmul's result, which it computes itself
  /// (fusedIntoQuantize), after the quantize's comment.
  virtual mlir::LogicalResult emitMatmulQuantize(moe::QuantizeOp, moe::GroupedMatmulOp) {
    llvm_unreachable("a printer that fuses grouped matmuls into moe.quantize prints them");
  }
  virtual void printCombine(moe::CombineOp op, const ValueInfo &rows,
                            const ValueInfo &permutation, const ValueInfo &weights,
                            const ValueInfo &numValid, const std::string &addend,
                            const std::string &gate, const ValueInfo &out) = 0;
  virtual void printConcat(const ValueInfo &out, mlir::ArrayRef<ValueInfo *> parts,
                           int64_t dim, int64_t outer) = 0;
  /// Result `index` of the function, held in `info`, into the caller's output.
  virtual void printResult(unsigned index, mlir::Value value, const ValueInfo &info,
                           Dim count) = 0;
  /// The translation unit around the printed body.
  virtual void assemble(llvm::raw_ostream &os) = 0;
  /// Whether the target has the whole-model kernels (embedding, RMSNorm,
  /// rotary, attention over the KV cache, sums).
  virtual bool hasModelKernels() const { return false; }
  /// Whether the target prints moe.elementwise and moe.reduce_rows (as C++
  /// loops over the pool).
  virtual bool hasGenericModelKernels() const { return false; }
  /// A kernel of `op` that checks its data (a token id, a cache position): on
  /// the CPU it returns false and a message, and the run fails with it; the
  /// CUDA target checks the step's inputs on the host before queuing it.
  virtual void printCheckedKernel(mlir::Operation *, mlir::StringRef, std::vector<std::string>) {
    llvm_unreachable("only a target with model kernels prints checked kernels");
  }

  //===--- Shared machinery ---------------------------------------------===//

  void kernel(mlir::StringRef name, std::vector<std::string> args, bool pool = true) {
    printKernel(name, std::move(args), pool);
  }
  void checkedKernel(mlir::Operation *op, mlir::StringRef name, std::vector<std::string> args) {
    printCheckedKernel(op, name, std::move(args));
  }
  /// A workspace slot of `bytes` bytes; returns its offset. Sizes are
  /// checked: past kMaxPlannedBytes the plan is refused (run() says so).
  uint64_t reserve(uint64_t bytes) {
    uint64_t offset = result.workspaceBytes;
    if (bytes > kMaxPlannedBytes || offset + bytes > kMaxPlannedBytes)
      sizeOverflow = true;
    else
      result.workspaceBytes = alignUp(offset + bytes);
    return offset;
  }
  /// The workspace slot of the value being defined (define()): with
  /// reusesWorkspace(), a slot freed by a value no op reads any more, else a
  /// new one.
  uint64_t reserveValue(uint64_t bytes);
  /// Frees the slots of the values `op` was the last to read.
  void releaseAfter(mlir::Operation *op);
  /// Whether a value's slot may be reused once no op reads it: the CPU runs
  /// its kernels one after another; the CUDA target overlaps streams where
  /// moe-plan-streams put a shared expert beside the routed chain.
  virtual bool reusesWorkspace() const { return false; }
  /// `count` elements of `elementBytes` each at max tokens, checked: an
  /// overflow is recorded and refused at the end of run().
  uint64_t bytesAtMaxTokens(Dim count, uint64_t elementBytes) {
    uint64_t elements = 0, bytes = 0;
    if (count.size < 0 ||
        __builtin_mul_overflow(static_cast<uint64_t>(count.size),
                               count.perToken ? static_cast<uint64_t>(maxTokens) : 1, &elements) ||
        __builtin_mul_overflow(elements, elementBytes, &bytes) || bytes > kMaxPlannedBytes) {
      sizeOverflow = true;
      return 0;
    }
    return bytes;
  }
  /// A new `int32_t *` variable over `count` int32 of the workspace (`count`
  /// per token: sized for max tokens); returns its name.
  std::string workspaceInt32(const Dim &count);
  mlir::InFlightDiagnostic unsupported(mlir::Operation *op, const mlir::Twine &why);

  /// `fp8`: an f8E4M3FN tensor is acceptable here (moe.quantize's result,
  /// moe.grouped_matmul's FP8 operands); `bf16`: a bf16 one (the rows and
  /// weights of the bf16-weight kernels, on a target that has them).
  /// `mxfp4`: an f4E2M1FN or f8E8M0FNU tensor is acceptable here (MXFP4
  /// weights and their scales, on a target that multiplies them).
  mlir::LogicalResult checkTensor(mlir::Operation *op, mlir::Value value, mlir::StringRef role,
                                  bool floatOnly, bool fp8 = false, bool bf16 = false,
                                  bool mxfp4 = false);
  mlir::FailureOr<mlir::SmallVector<Dim>> resultDims(mlir::Operation *op, mlir::Value result,
                                                     std::optional<Dim> rows);
  mlir::FailureOr<ValueInfo *> operand(mlir::Operation *op, mlir::Value value,
                                       mlir::StringRef role, bool floatOnly = true,
                                       bool fp8 = false, bool bf16 = false, bool mxfp4 = false);
  /// moe.ep_shard of a constant: the whole constant stored (or filled), the
  /// image holding one rank's slice, which the loader picks.
  mlir::FailureOr<ValueInfo *> shardOperand(mlir::Operation *op, moe::EPShardOp shard,
                                            mlir::StringRef role);
  /// Records that `op` belongs to a program for `epSize` ranks; an error on a
  /// target without expert parallelism, or with two sizes in one program.
  mlir::LogicalResult expertParallel(mlir::Operation *op, int64_t epSize);
  mlir::LogicalResult emitAllReduce(moe::AllReduceOp op);
  /// An MXFP4 weight's codes (one a byte) packed into weights.bin's layout
  /// (moec/runtime/MXFP4.h): `entry`'s bytes and size replaced.
  void packMXFP4(mlir::RankedTensorType type, WeightEntry &entry);
  /// Places `entry` (its bytes and size filled in) at weights.bin's next
  /// aligned offset and declares the constant `value`'s pointer into `info`.
  ValueInfo &placeWeight(mlir::Value value, WeightEntry entry, ValueInfo &info);
  /// In a module whose weights are filled at load: how constant `value` is
  /// (a normal, a splat's constant, or stored: Fill::Stored, size unset).
  mlir::FailureOr<WeightEntry> fillOf(mlir::Operation *op, mlir::Value value,
                                      llvm::StringRef role);
  std::string optionalOperand(mlir::Operation *op, mlir::Value value, mlir::StringRef role,
                              bool &failed);
  mlir::FailureOr<ValueInfo *> define(mlir::Operation *op, mlir::Value result,
                                      std::optional<Dim> rows, bool fp8 = false,
                                      bool bf16 = false);
  std::string epilogue(std::optional<moe::ActivationAttr> activation,
                       std::optional<moe::GateUpLayout> layout);
  mlir::Value viewRoot(mlir::Value value);

  mlir::LogicalResult emitView(mlir::Operation *op);
  mlir::LogicalResult emitLinear(moe::LinearOp op);
  mlir::LogicalResult emitMultiLinear(moe::MultiLinearOp op);
  mlir::LogicalResult emitAddRMSNorm(moe::AddRMSNormOp op);
  mlir::LogicalResult emitRoute(moe::RouteOp op);
  mlir::LogicalResult emitSort(moe::SortOp op);
  mlir::LogicalResult emitPermute(moe::PermuteOp op);
  mlir::LogicalResult emitGroupedMatmul(moe::GroupedMatmulOp op);
  mlir::LogicalResult emitGroupedMatmulFP8(moe::GroupedMatmulOp op);
  mlir::LogicalResult emitGroupedMatmulMXFP4(moe::GroupedMatmulOp op);
  mlir::LogicalResult emitQuantize(moe::QuantizeOp op);
  /// moe.quantize's codes and scales, `rows` rows.
  mlir::FailureOr<std::pair<ValueInfo *, ValueInfo *>> defineCodes(moe::QuantizeOp op, Dim rows);
  /// An FP8 grouped matmul's kernel arguments up to its epilogue (the result
  /// pointer, or the codes and scales, follow), after its checks.
  mlir::FailureOr<std::vector<std::string>> fp8MatmulArgs(moe::GroupedMatmulOp op);
  /// Its row count (the lhs's rows).
  Dim fp8MatmulRows(moe::GroupedMatmulOp op) { return values[op.getLhs()].dims[0]; }
  mlir::LogicalResult emitCombine(moe::CombineOp op);
  mlir::LogicalResult emitConcat(mlir::tensor::ConcatOp op);
  mlir::LogicalResult emitReturn(mlir::func::ReturnOp op);
  // Whole models (EmitModelOps.cpp).
  mlir::LogicalResult checkModelTarget(mlir::Operation *op);
  mlir::LogicalResult emitEmbedding(moe::EmbeddingOp op);
  mlir::LogicalResult emitRMSNorm(moe::RMSNormOp op);
  mlir::LogicalResult emitRotary(moe::RotaryOp op);
  mlir::LogicalResult emitAttention(moe::AttentionOp op);
  mlir::LogicalResult emitAdd(mlir::arith::AddFOp op);
  // The generic ops of whole models, printed as loops (EmitGenericOps.cpp).
  mlir::LogicalResult checkGenericTarget(mlir::Operation *op);
  mlir::LogicalResult emitElementwise(moe::ElementwiseOp op);
  mlir::LogicalResult emitReduceRows(moe::ReduceRowsOp op);
  /// moe.kv_cache of the function, when planned; an error for a cache element
  /// type the target does not store.
  mlir::LogicalResult readKVCachePlan();

  void line(const mlir::Twine &text) { body += "  " + text.str() + "\n"; }
  void comment(mlir::Operation *op);

  mlir::func::FuncOp function;
  int64_t maxTokens;
  /// --weights=external: weights.bin is laid out but not written, so a
  /// splat's bytes are never expanded (bench/write_weights.py fills it).
  bool externalWeights;
  /// The kernel calls, in order.
  std::string body;
  /// Node-based: the ValueInfo pointers operand() and define() return stay
  /// valid while later values are added (a DenseMap would move them).
  struct ValueHash {
    size_t operator()(mlir::Value value) const { return mlir::hash_value(value); }
  };
  std::unordered_map<mlir::Value, ValueInfo, ValueHash> values;
  llvm::DenseMap<mlir::Value, unsigned> outputOf; // results written straight into an output
  unsigned nextVar = 0;
  bool usesTokens = false;
  /// A planned size exceeded kMaxPlannedBytes (bytesAtMaxTokens, reserve).
  bool sizeOverflow = false;
  /// The KV cache plan (0: none) and its slots' key and value columns, by
  /// slot (the attention's `layer`).
  int64_t cacheMaxBatch = 0, cacheMaxSeq = 0;
  /// Its rows in bf16 (moe.kv_cache's element_type, moe-cast-model-bf16).
  bool cacheBF16 = false;
  /// Workspace reuse: the value define() is placing, each value's slot, the
  /// last op that reads each value (through views), and the free slots.
  mlir::Value defining;
  llvm::DenseMap<mlir::Value, std::pair<uint64_t, uint64_t>> slotOf;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Value, 4>> lastReaders;
  std::vector<std::pair<uint64_t, uint64_t>> freeSlots;
  std::vector<std::pair<int64_t, int64_t>> cacheSlots;
};

std::unique_ptr<Emitter> createCpuPrinter(mlir::func::FuncOp function,
                                          const EmitterOptions &options);
std::unique_ptr<Emitter> createCudaPrinter(mlir::func::FuncOp function,
                                           const EmitterOptions &options);

} // namespace moec::codegen

#endif // MOEC_CODEGEN_LIB_EMITTERBASE_H
