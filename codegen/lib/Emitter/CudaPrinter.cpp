//===- CudaPrinter.cpp - the grouped phase as calls of the CUDA kernels ---===//
//
// The CUDA target's printer: model.cu, calling moec/runtime/cuda/MoEKernels.h
// on the State's stream with device pointers. The pointer declarations, the
// input and the output copies are kept apart from the kernel calls, which run
// eagerly or as the CUDA graph captured for each token count; the inputs and
// outputs are used in place when the caller's buffers are device memory
// (inPlaceSetup, graphRun), and the ops moe-plan-streams put on the side
// stream (a shared expert) run there beside the routed chain. Counts the kernels compute (num_valid,
// the offsets) stay on the device: kernels take pointers to them and the row
// count as their launch bound. Past the generic walk, this printer fuses a
// permute or an FP8 grouped matmul into the moe.quantize that reads it. A
// whole model's step keeps its KV cache on the device (DeviceKVCache in the
// State), checks its token ids, positions and sequences on the host before
// queuing anything where the host can read them, and reuses workspace slots
// as the CPU does when no op runs on the side stream. A program for every
// expert-parallel rank reads its rank from the loader's communicator
// (State::comm) and queues moe.all_reduce through it on the model's stream,
// inside the run's CUDA graph.
//
//===----------------------------------------------------------------------===//

#include "EmitterBase.h"
#include "moec/runtime/MXFP4.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <set>

using namespace mlir;

namespace moec::codegen {
namespace {

class CudaPrinter final : public Emitter {
public:
  using Emitter::Emitter;

private:
  std::string targetPhrase() const override { return "the CUDA target"; }
  bool hasBF16Kernels() const override { return true; }
  bool hasMXFP4Kernels() const override { return true; }
  /// groupedMatmulMXFP4 loads 16 bytes of each row at a time.
  int64_t mxfp4KMultiple() const override { return 8; }
  bool hasModelKernels() const override { return true; }
  /// A whole model's step reuses slots (first fit, as on the CPU: it has
  /// thousands of values) when every kernel runs in order on one stream: no
  /// op of the side stream. A block keeps one slot per value.
  bool reusesWorkspace() const override { return cacheMaxBatch > 0 && !hasSideStreamOps(); }
  bool hasSideStreamOps() const;
  /// The kernel, and where its data is a function input, the step's host check
  /// of it (checkStep in run()).
  void printCheckedKernel(Operation *op, StringRef name, std::vector<std::string> args) override;

  /// With the stream last and its Status checked.
  void printKernel(StringRef name, std::vector<std::string> args, bool) override {
    args.push_back(streamExpr);
    line("MOEC_RETURN_IF_ERROR(" + name.str() + "(" + llvm::join(args, ", ") + "));");
  }

  void decl(const Twine &text) override { decls += "  " + text.str() + "\n"; }
  void copyInLine(const Twine &text) { copyIn += "  " + text.str() + "\n"; }
  void copyOutLine(const Twine &text) { copyOut += "  " + text.str() + "\n"; }

  void declareInput(unsigned index, ValueInfo &info, const std::string &cppType) override;
  void declareResult(ValueInfo &info, const std::string &cppType, uint64_t bytes,
                     std::optional<unsigned> output) override;
  void planOutputs(func::ReturnOp returnOp) override;
  LogicalResult emitOps(llvm::function_ref<LogicalResult(Operation &)> emitOp) override;

  void narrowIds(const ValueInfo &ids, Dim slots, const std::string &out) override {
    kernel("narrowIds", {ids.var, dimExpr(slots), out});
  }
  void addSortArgs(moe::SortOp op, Dim slots, std::vector<std::string> &args) override;

  /// A permute whose rows only a moe.quantize reads is done by that quantize
  /// (permuteQuantizeE4M3): the f32 rows are never written.
  bool fusedIntoQuantize(moe::PermuteOp op) const override {
    return op.getResult().hasOneUse() && isa<moe::QuantizeOp>(*op.getResult().getUsers().begin());
  }
  /// An FP8 grouped matmul whose result only a moe.quantize reads is done by
  /// that quantize (groupedMatmulFP8Quantized): on the CUTLASS tiles its
  /// epilogue pass writes the codes, and the f32 result is never written.
  bool fusedIntoQuantize(moe::GroupedMatmulOp op) const override {
    return op.getLhsScales() && op.getWeightScales() && op.getResult().hasOneUse() &&
           isa<moe::QuantizeOp>(*op.getResult().getUsers().begin());
  }

  /// The row count bounds the launch; offsets[E-1] (on the device) the rows.
  bool launchTakesRowCount() const override { return true; }
  bool offsetsSettled(moe::GroupedMatmulOp op) override;
  std::optional<moe::GateUpLayout>
  interleaveOnDevice(moe::GroupedMatmulOp op, const ValueInfo &weights,
                     std::optional<moe::GateUpLayout> layout) override;
  void relayoutMXFP4OnDevice(moe::GroupedMatmulOp op, const ValueInfo &weights) override;
  LogicalResult checkFP8Rows(moe::GroupedMatmulOp op, bool fp8Rows) override {
    if (fp8Rows)
      return success();
    return unsupported(op, "FP8 weights with f32 rows; the CUDA target multiplies FP8 weights "
                           "with FP8 rows (moe.quantize) only: compile with --fp8, which "
                           "quantises the rows");
  }

  std::string writtenRows(Value value, Dim rows) override;
  void printPermute(moe::PermuteOp op, const ValueInfo &hidden, const ValueInfo &permutation,
                    const ValueInfo &numValid, const ValueInfo &rows) override;
  void printQuantize(const ValueInfo &input, Dim rows, const std::string &k,
                     const std::string &written, const ValueInfo &q,
                     const ValueInfo &scales) override;
  void printPermuteQuantize(moe::PermuteOp permute, const ValueInfo &input,
                            const ValueInfo &permutation, const ValueInfo &numValid,
                            const ValueInfo &q, const ValueInfo &scales) override;
  LogicalResult emitMatmulQuantize(moe::QuantizeOp op, moe::GroupedMatmulOp matmul) override;
  void printCombine(moe::CombineOp op, const ValueInfo &rows, const ValueInfo &permutation,
                    const ValueInfo &weights, const ValueInfo &numValid,
                    const std::string &addend, const std::string &gate,
                    const ValueInfo &out) override;
  void printConcat(const ValueInfo &out, ArrayRef<ValueInfo *> parts, int64_t dim,
                   int64_t outer) override;
  /// One program for every expert-parallel rank: the rank and the all-reduce
  /// are the loader's communicator's (State::comm), whose all-reduce is queued
  /// on the model's stream, so it is a node of the run's CUDA graph.
  bool hasExpertParallelism() const override { return true; }
  std::string rankExpr() const override { return "comm->rank"; }
  void printAllReduce(const ValueInfo &in, const ValueInfo &out,
                      const std::string &count) override;
  void printResult(unsigned index, Value value, const ValueInfo &info, Dim count) override;
  void assemble(llvm::raw_ostream &os) override;

  /// The inverse of `permutation` if a moe.sort wrote one, else "nullptr".
  std::string inverseOrNull(Value permutation) const {
    auto it = inverseOf.find(permutation);
    return it == inverseOf.end() ? "nullptr" : it->second;
  }
  std::string inPlaceSetup() const;
  /// A whole model's host check of the step (DeviceKVCache::checkStep).
  std::string modelChecks() const;
  /// The graph's run: keyed by the caller's addresses when in place.
  std::string graphRun() const;

  std::string decls, copyIn, copyOut;
  /// Slot counts (at max tokens) of each moe.sort, whose CUB workspace is
  /// sized when the model is created.
  std::vector<uint64_t> sortSlots;
  /// Statements create() runs once the weights are on the device.
  std::vector<std::string> createSteps;
  /// The offsets of the MXFP4 weights whose codes createSteps re-lays out.
  std::set<uint64_t> relaidOut;
  /// Every output is written by a kernel (no copies between results), so a
  /// run may use the caller's device buffers in place (inPlaceSetup).
  bool inPlaceCapable = false;
  /// The caller's buffers as CallerBuffer initialisers, and whether the run
  /// uses them in place (GraphCache::inPlace).
  std::vector<std::string> callerInputs, callerOutputs;
  /// A moe.sort's permutation -> its inverse (rowOfSlot), which the sort
  /// writes and permute and combine read instead of inverting it again.
  llvm::DenseMap<Value, std::string> inverseOf;
  /// The stream the next kernel call is queued on.
  std::string streamExpr = "stream";
  /// The host checks of a whole model's step, as DeviceKVCache::IdsCheck and
  /// TokensCheck initialisers.
  std::vector<std::string> idsChecks, tokensChecks;
};

/// An op that moe-plan-streams put on the side stream (or a view of an input
/// that both streams read).
bool onSideStream(Operation &op) {
  auto stream = op.getAttrOfType<IntegerAttr>(moe::kStreamAttr);
  return (stream && stream.getInt() == 1) || op.hasAttr(moe::kStreamInputViewAttr);
}

bool CudaPrinter::hasSideStreamOps() const {
  return llvm::any_of(const_cast<func::FuncOp &>(function).getBody().front(), onSideStream);
}

void CudaPrinter::printCheckedKernel(Operation *op, StringRef name,
                                     std::vector<std::string> args) {
  auto input = [&](Value value) -> std::string {
    if (auto argument = dyn_cast<BlockArgument>(viewRoot(value)))
      return "view[" + std::to_string(argument.getArgNumber()) + "]";
    return ""; // computed on the device: only the kernels' own guards
  };
  if (auto embedding = dyn_cast<moe::EmbeddingOp>(op)) {
    if (std::string ids = input(embedding.getIds()); !ids.empty())
      idsChecks.push_back("{" + ids + ", " + args[3] + "}");
  } else if (auto attention = dyn_cast<moe::AttentionOp>(op)) {
    std::string positions = input(attention.getPositions());
    std::string sequences = input(attention.getSequences());
    if (!positions.empty() && !sequences.empty())
      tokensChecks.push_back("{" + positions + ", " + sequences + ", " + args[1] + "}");
  }
  kernel(name, std::move(args));
}

// The caller's buffer itself when the run is in place, else copied into its
// own workspace slot, on the stream, from host or device memory
// (cudaMemcpyDefault).
void CudaPrinter::declareInput(unsigned i, ValueInfo &info, const std::string &cppType) {
  std::optional<Dim> count = countOf(info.dims);
  uint64_t offset =
      reserve(bytesAtMaxTokens(*count, info.elementType.getIntOrFloatBitWidth() / 8));
  decl(cppType + " *" + info.var + " = inPlace ? static_cast<" + cppType +
       " *>(const_cast<void *>(inputs[" + std::to_string(i) + "])) : reinterpret_cast<" +
       cppType + " *>(workspace + " + std::to_string(offset) + ");");
  callerInputs.push_back("{inputs[" + std::to_string(i) + "], sizeof(" + cppType + ") * (" +
                         dimExpr(*count) + ")}");
  copyInLine(llvm::formatv("if (!inPlace)\n    MOEC_CUDA_TRY(cudaMemcpyAsync({0}, inputs[{1}], "
                           "sizeof(*{0}) * ({2}), cudaMemcpyDefault, stream));",
                           info.var, i, dimExpr(*count))
                 .str());
}

// In its own workspace slot (copied out at the end), or, in place, in the
// caller's device buffer.
void CudaPrinter::declareResult(ValueInfo &info, const std::string &cppType, uint64_t bytes,
                                std::optional<unsigned> output) {
  std::string slot = "reinterpret_cast<" + cppType + " *>(workspace + " +
                     std::to_string(reserveValue(bytes)) + ")";
  if (inPlaceCapable && output)
    slot = "inPlace ? static_cast<" + cppType + " *>(outputs[" + std::to_string(*output) +
           "]) : " + slot;
  decl(cppType + " *" + info.var + " = " + slot + ";");
}

void CudaPrinter::planOutputs(func::ReturnOp returnOp) {
  inPlaceCapable = !result.inputs.empty() && !result.outputs.empty() &&
                   llvm::all_of(llvm::enumerate(returnOp.getOperands()), [&](auto operand) {
                     auto it = outputOf.find(viewRoot(operand.value()));
                     return it != outputOf.end() && it->second == operand.index();
                   });
  for (const TensorDecl &output : result.outputs)
    callerOutputs.push_back("{outputs[" + std::to_string(callerOutputs.size()) + "], sizeof(" +
                            *cppElementType(output.elementType) + ") * (" +
                            dimExpr(*countOf(output.dims)) + ")}");
}

/// The side branch that moe-plan-streams marked (`moe.stream = 1`: a shared
/// expert, which nothing of the routed chain reads) is emitted first, on the
/// side stream, so that it runs beside the routed chain; the views of inputs it
/// reads (`moe.stream_input_view`, aliases without a kernel) come with it. The
/// main stream joins it before the first combine.
LogicalResult CudaPrinter::emitOps(llvm::function_ref<LogicalResult(Operation &)> emitOp) {
  auto onSide = [](Operation &op) { return onSideStream(op); };
  Block &body = function.getBody().front();
  for (Operation &op : body)
    if (Attribute stream = op.getAttr(moe::kStreamAttr)) {
      auto index = dyn_cast<IntegerAttr>(stream);
      if (!index || index.getInt() < 0 || index.getInt() > 1)
        return unsupported(&op, "moe.stream must be 0 (the main stream) or 1 (the side "
                                "stream)");
    }
  bool side = llvm::any_of(body, onSide);
  if (side) {
    line("// The shared expert, on the side stream beside the routed chain (joined at the "
         "combine).");
    line("MOEC_RETURN_IF_ERROR(state.model.forkSide());");
    line("cudaStream_t side = state.model.sideStream();");
    // In a program for every expert-parallel rank, a side branch that only
    // combines with ep_size read (their addend counts on rank 0) runs on rank 0
    // alone: the other ranks would compute it for nothing.
    // (The views of inputs that both streams read have no kernel.)
    bool rankZeroOnly = llvm::all_of(body, [&](Operation &op) {
      if (!onSide(op) || op.hasAttr(moe::kStreamInputViewAttr))
        return true;
      return llvm::all_of(op.getUsers(), [&](Operation *user) {
        auto combine = dyn_cast<moe::CombineOp>(user);
        return onSide(*user) ||
               (combine && combine.getEpSize() &&
                llvm::none_of(op.getResults(), [&](Value v) { return v == combine.getRows(); }));
      });
    });
    rankZeroOnly = rankZeroOnly && llvm::any_of(body, [](Operation &op) {
                     auto combine = dyn_cast<moe::CombineOp>(op);
                     return combine && combine.getEpSize();
                   });
    if (rankZeroOnly)
      line("if (comm->rank == 0) { // the shared expert counts on rank 0 alone");
    streamExpr = "side";
    for (Operation &op : body)
      if (onSide(op) && failed(emitOp(op)))
        return failure();
    streamExpr = "stream";
    if (rankZeroOnly)
      line("}");
  }
  bool joined = !side;
  for (Operation &op : body) {
    if (onSide(op))
      continue;
    if (!joined && isa<moe::CombineOp, func::ReturnOp>(op)) {
      line("MOEC_RETURN_IF_ERROR(state.model.joinSide());");
      joined = true;
    }
    if (failed(emitOp(op)))
      return failure();
  }
  return success();
}

void CudaPrinter::addSortArgs(moe::SortOp op, Dim slots, std::vector<std::string> &args) {
  // The inverse permutation, one int32 per slot (sortByExpert).
  std::string rowOfSlot = workspaceInt32(slots);
  inverseOf[op.getPermutation()] = rowOfSlot;
  args.push_back(rowOfSlot);
  // CUB's workspace, sized for max tokens when the model is created.
  size_t index = sortSlots.size();
  sortSlots.push_back(bytesAtMaxTokens(slots, 1));
  args.push_back("sortWorkspace + state.sortOffset[" + std::to_string(index) + "]");
  args.push_back("state.sortBytes[" + std::to_string(index) + "]");
}

std::optional<moe::GateUpLayout>
CudaPrinter::interleaveOnDevice(moe::GroupedMatmulOp op, const ValueInfo &weights,
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

void CudaPrinter::relayoutMXFP4OnDevice(moe::GroupedMatmulOp, const ValueInfo &weights) {
  // (The caller has checked that the weights are [E, N, K]; every MXFP4
  // weight is a constant placed in the image.) Once per weight, however many
  // matmuls read it.
  if (!weights.weightOffset || !relaidOut.insert(*weights.weightOffset).second)
    return;
  int64_t rows = weights.dims[0].size * weights.dims[1].size;
  int64_t bytes = rows * rt::mxfp4::packedRowBytes(weights.dims[2].size);
  createSteps.push_back(llvm::formatv("MOEC_RETURN_IF_ERROR(relayoutMXFP4(state.model."
                                      "mutableWeights() + {0}, {1}, state.model.stream())); "
                                      "// MXFP4 codes",
                                      *weights.weightOffset, bytes)
                            .str());
}

/// After the sort that wrote `op`'s offsets, a kernel of its own produced
/// `op`'s rows: the permute of that sort's permutation (fused into a quantize
/// or not) or a grouped matmul on the same offsets (quantized or not). So the
/// sort ran at least two launches before `op`, which may stream its first
/// weights while its predecessor still runs (groupedMatmul*SettledOffsets).
/// Any sort would not do: a second one emitted right before `op` would be its
/// predecessor.
bool CudaPrinter::offsetsSettled(moe::GroupedMatmulOp op) {
  auto sort = op.getOffsets().getDefiningOp<moe::SortOp>();
  if (!sort)
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

// A pointer to the count on the device (nullptr: all rows).
std::string CudaPrinter::writtenRows(Value value, Dim) {
  if (auto permute = value.getDefiningOp<moe::PermuteOp>())
    if (auto it = values.find(permute.getNumValid()); it != values.end())
      return it->second.var;
  if (auto matmul = value.getDefiningOp<moe::GroupedMatmulOp>())
    if (auto it = values.find(matmul.getOffsets()); it != values.end())
      return it->second.var + " + (" + dimExpr(it->second.dims[0]) + " - 1)";
  return "nullptr";
}

// num_valid is read on the device, the slot count is the bound.
void CudaPrinter::printPermute(moe::PermuteOp op, const ValueInfo &hidden,
                               const ValueInfo &permutation, const ValueInfo &numValid,
                               const ValueInfo &rows) {
  kernel("permute",
         {hidden.var, dimExpr(hidden.dims[1]), permutation.var, numValid.var,
          inverseOrNull(op.getPermutation()), dimExpr(permutation.dims[0]),
          std::to_string(op.getTopK()), rows.var});
}

// Only rows that hold data: the sentinel tail of the permuted rows is never
// written, and so never read.
void CudaPrinter::printQuantize(const ValueInfo &input, Dim rows, const std::string &k,
                                const std::string &written, const ValueInfo &q,
                                const ValueInfo &scales) {
  kernel("quantizeE4M3", {input.var, dimExpr(rows), k, written, q.var, scales.var});
}

void CudaPrinter::printPermuteQuantize(moe::PermuteOp permute, const ValueInfo &input,
                                       const ValueInfo &permutation, const ValueInfo &numValid,
                                       const ValueInfo &q, const ValueInfo &scales) {
  kernel("permuteQuantizeE4M3",
         {input.var, dimExpr(input.dims[1]), permutation.var, numValid.var,
          inverseOrNull(permute.getPermutation()), dimExpr(permutation.dims[0]),
          std::to_string(permute.getTopK()), q.var, scales.var});
}

LogicalResult CudaPrinter::emitMatmulQuantize(moe::QuantizeOp op, moe::GroupedMatmulOp matmul) {
  FailureOr<std::vector<std::string>> args = fp8MatmulArgs(matmul);
  if (failed(args))
    return failure();
  FailureOr<std::pair<ValueInfo *, ValueInfo *>> codes =
      defineCodes(op, fp8MatmulRows(matmul));
  if (failed(codes))
    return failure();
  // Decode's f32 gate/up result (the decode tiles', up to kDecodeSlots rows)
  // in the workspace: an allocation in the captured graph would keep this
  // kernel and the next from launching under their predecessors.
  constexpr uint64_t kDecodeSlots = 128; // runtime: kFP8DecodeMaxSlots
  Dim rows = fp8MatmulRows(matmul);
  uint64_t maxRows = bytesAtMaxTokens(rows, 1);
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

void CudaPrinter::printCombine(moe::CombineOp op, const ValueInfo &rows,
                               const ValueInfo &permutation, const ValueInfo &weights,
                               const ValueInfo &numValid, const std::string &addend,
                               const std::string &gate, const ValueInfo &out) {
  Dim tokens = weights.dims[0];
  if (std::string inverse = inverseOrNull(op.getPermutation()); inverse != "nullptr") {
    // The sort's inverse permutation, already on the device.
    kernel("combineRows",
           {rows.var, inverse, dimExpr(rows.dims[1]), weights.var, dimExpr(tokens),
            dimExpr(weights.dims[1]), addend, gate, out.var});
    return;
  }
  // The inverse permutation: one int32 per slot.
  std::string inverse = workspaceInt32(permutation.dims[0]);
  kernel("combine",
         {rows.var, permutation.var, dimExpr(permutation.dims[0]), dimExpr(rows.dims[1]),
          weights.var, dimExpr(tokens), dimExpr(weights.dims[1]), numValid.var, addend, gate,
          inverse, out.var});
}

// One strided device-to-device copy per operand.
void CudaPrinter::printConcat(const ValueInfo &out, ArrayRef<ValueInfo *> parts, int64_t dim,
                              int64_t outer) {
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
                       out.var, at, total, part->var, chunk, outer)
             .str());
    at += chunk;
  }
}

// The partial sum copied to the result's slot, then summed there in place by
// the communicator on the same stream (NCCL's all-reduce is captured into the
// graph as any kernel is).
void CudaPrinter::printAllReduce(const ValueInfo &in, const ValueInfo &out,
                                 const std::string &count) {
  line(llvm::formatv("MOEC_CUDA_TRY(cudaMemcpyAsync({0}, {1}, sizeof(float) * ({2}), "
                     "cudaMemcpyDeviceToDevice, {3}));",
                     out.var, in.var, count, streamExpr)
           .str());
  line(llvm::formatv("MOEC_RETURN_IF_ERROR(allReduceSum(*comm, {0}, {1}, {2}));", out.var, count,
                     streamExpr)
           .str());
}

// cudaMemcpyDefault: the caller's buffer may be host or device memory
// (unified addressing tells which), moec.h says so.
void CudaPrinter::printResult(unsigned index, Value, const ValueInfo &info, Dim count) {
  copyOutLine(llvm::formatv("{3}MOEC_CUDA_TRY(cudaMemcpyAsync(outputs[{0}], {1}, "
                            "sizeof(*{1}) * ({2}), cudaMemcpyDefault, stream));",
                            index, info.var, dimExpr(count),
                            inPlaceCapable ? "if (!inPlace)\n    " : "")
                  .str());
}

/// The CUDA translation unit: the same body, run on the State's stream with
/// device pointers; inputs are copied in and outputs out within it, and the
/// host waits once, at the end.
void CudaPrinter::assemble(llvm::raw_ostream &os) {
  uint64_t sorts = sortSlots.size();
  bool model = cacheMaxBatch > 0;
  os << "// Generated by `moec compile --target=cuda`: "
     << (model ? "a whole model's step, @" : "the grouped phase of @") << function.getSymName()
     << (model ? "," : "") << " as calls of moec's CUDA kernels on one stream. Do not edit.\n"
     << "#include \"moec/runtime/ArtifactABI.h\"\n"
     << "#include \"moec/runtime/Cuda.h\"\n"
     << "#include \"moec/runtime/cuda/Artifact.h\"\n"
     << "#include \"moec/runtime/cuda/MoEKernels.h\"\n";
  if (model)
    os << "#include \"moec/runtime/cuda/DeviceGenerate.h\"\n"
       << "#include \"moec/runtime/cuda/ModelKernels.h\"\n";
  os << "\n"
     << "#include <array>\n#include <cstdint>\n#include <limits>\n#include <new>\n#include <string>\n\n"
     << "#define MOEC_EXPORT extern \"C\" __attribute__((visibility(\"default\")))\n\n"
     << "using namespace moec::rt;\nusing namespace moec::rt::cuda;\n"
     << "using moec::rt::cpu::ActivationKind;\nusing moec::rt::cpu::GateUpLayout;\n"
     << "using moec::rt::cpu::RoutingKind;\n\n"
     << "namespace {\n"
     << "// Planned for " << maxTokens << " tokens: device workspace " << result.workspaceBytes
     << " bytes plus CUB's sort workspace, weights " << result.weightsBytes << " bytes.\n"
     << "constexpr uint64_t kPlannedBytes = " << result.workspaceBytes << ";\n"
     << "constexpr int64_t kSortSlots[] = {";
  for (uint64_t i = 0; i < sorts; ++i)
    os << (i ? ", " : "") << sortSlots[i];
  os << (sorts ? "" : "0") << "};\n\n"
     << "struct State {\n  DeviceModel model;\n  GraphCache graphs;\n"
     << (model ? "  DeviceKVCache cache;\n  DeviceGenerator generator;\n" : "")
     << (result.epSize ? "  /// The expert-parallel group (the loader's): the rank, the all-reduce.\n"
                         "  const moec_communicator *comm = nullptr;\n"
                       : "")
     << "  size_t sortOffset[" << std::max<uint64_t>(sorts, 1) << "] = {}, sortBytes["
     << std::max<uint64_t>(sorts, 1) << "] = {};\n};\n\n"
     << "Status create(State &state, const unsigned char *weights, uint64_t weightsBytes,\n"
     << "              const moec_weight_plan *plan) {\n"
     << "  MOEC_RETURN_IF_ERROR(requireDevice());\n"
     << "  uint64_t total = kPlannedBytes;\n"
     << "  for (uint64_t i = 0; i < " << sorts << "; ++i) {\n"
     << "    MOEC_RETURN_IF_ERROR(sortWorkspaceBytes(kSortSlots[i], state.sortBytes[i]));\n"
     << "    state.sortOffset[i] = total - kPlannedBytes;\n"
     << "    total += (state.sortBytes[i] + 255) / 256 * 256;\n  }\n"
     << "  MOEC_RETURN_IF_ERROR(state.model.create(weights, weightsBytes, total, plan));\n";
  if (model) {
    // The KV cache: moe-plan-kv-cache's size, one slot per attention op, its
    // rows in the element type moe-cast-model-bf16 chose.
    os << "  MOEC_RETURN_IF_ERROR(state.cache.create(" << cacheMaxBatch << ", " << cacheMaxSeq
       << ", {";
    for (auto [i, slot] : llvm::enumerate(cacheSlots))
      os << (i ? ", " : "") << "{" << slot.first << ", " << slot.second << "}";
    os << "}" << (cacheBF16 ? ", KVCacheType::BF16" : "") << "));\n";
  }
  if (!createSteps.empty()) {
    os << "  // Weights re-laid out once on the device: concatenated gate/up rows interleaved\n"
       << "  // (the kernels below are given GateUpLayout::Interleaved; docs/design.md, \"Gate/up\n"
       << "  // rows on the GPU\"), MXFP4 codes put in the order the GPU's kernels read.\n";
    for (const std::string &step : createSteps)
      os << "  " << step << "\n";
    os << "  MOEC_CUDA_TRY(cudaStreamSynchronize(state.model.stream()));\n";
  }
  os << "  return Status::ok();\n}\n\n";
  if (result.epSize)
    os << "/// The ranks' partial sums in `data` summed in place on every rank, queued on\n"
       << "/// `stream` (moec_communicator: the stream's cudaStream_t value).\n"
       << "Status allReduceSum(const moec_communicator &comm, float *data, int64_t count,\n"
       << "                    cudaStream_t stream) {\n"
       << "  char why[1024] = \"\";\n"
       << "  if (comm.all_reduce_sum_f32(comm.context, data, static_cast<uint64_t>(count),\n"
       << "                              static_cast<void *>(stream), why, sizeof(why)) != 0)\n"
       << "    return Status::error(std::string(\"the all-reduce of rank \") + "
          "std::to_string(comm.rank) +\n"
       << "                         \" of \" + std::to_string(comm.size) + \" failed: \" + why);\n"
       << "  return Status::ok();\n}\n\n"
       << "/// Waits for `stream` through the group (moec_communicator::wait), which ends\n"
       << "/// within its timeout where a peer died inside a collective.\n"
       << "Status waitForGroup(const moec_communicator &comm, cudaStream_t stream) {\n"
       << "  char why[1024] = \"\";\n"
       << "  if (comm.wait && comm.wait(comm.context, static_cast<void *>(stream), why, "
          "sizeof(why)) != 0)\n"
       << "    return Status::error(std::string(\"rank \") + std::to_string(comm.rank) + \" of \" +\n"
       << "                         std::to_string(comm.size) + \": waiting for the group failed: \" "
          "+ why);\n"
       << "  return Status::ok();\n}\n\n";
  os << "/// `caller`: null (moec_run: the host waits), or the stream of moec_run_async.\n"
     << "/// `checked`: null, or the inputs as the host knows them, for a whole model's checks\n"
     << "/// (moec_artifact_generate's steps on device buffers).\n"
     << "Status run(State &state, const void *const *inputs, void *const *outputs, int64_t T,\n"
     << "           const cudaStream_t *caller, const void *const *checked = nullptr) {\n"
     << "  (void)checked;\n"
     << "  // The buffers are planned for " << maxTokens << " tokens at most.\n"
     << "  if (T < 0 || T > " << maxTokens << ")\n"
     << "    return Status::error(\"the token count \" + std::to_string(T) +\n"
     << "                         \" is outside the plan of this library (0 to " << maxTokens << ")\");\n"
     << modelChecks()
     << "  cudaStream_t stream = state.model.stream();\n"
     << (result.epSize ? "  const moec_communicator *comm = state.comm;\n" : "")
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
     << (result.epSize ? "  // Through the group: a peer that died inside a collective ends the wait.\n"
                         "  MOEC_RETURN_IF_ERROR(waitForGroup(*comm, stream));\n"
                       : "")
     << "  MOEC_CUDA_TRY(cudaStreamSynchronize(stream));\n"
     << "  return Status::ok();\n}\n"
     << "} // namespace\n\n"
     << "MOEC_EXPORT int moec_artifact_abi_version() { return MOEC_ARTIFACT_ABI_VERSION; }\n\n"
     << "MOEC_EXPORT int moec_artifact_create(unsigned, const unsigned char *weights,\n"
     << "                                     uint64_t weightsBytes, const moec_weight_plan *plan,\n"
     << "                                     const moec_communicator *comm, void **state,\n"
     << "                                     char *error, size_t errorBytes) {\n";
  if (result.epSize)
    os << "  if (!comm || comm->size != " << result.epSize
       << " || comm->rank < 0 || comm->rank >= comm->size || !comm->all_reduce_sum_f32)\n"
       << "    return reportStatus(Status::error(\"this model runs on " << result.epSize
       << " expert-parallel ranks and needs their communicator\"), error, errorBytes);\n";
  else
    os << "  (void)comm;\n";
  os << "  auto *created = new (std::nothrow) State;\n"
     << "  if (!created)\n"
     << "    return reportStatus(Status::error(\"out of memory\"), error, errorBytes);\n"
     << (result.epSize ? "  created->comm = comm;\n" : "")
     << "  Status status = create(*created, weights, weightsBytes, plan);\n"
     << "  if (!status) {\n    delete created;\n"
     << "    return reportStatus(status.withContext(\"creating the CUDA model\"), error, errorBytes);\n"
     << "  }\n  *state = created;\n  return 0;\n}\n\n"
     << "MOEC_EXPORT void moec_artifact_destroy(void *state) { delete static_cast<State *>(state); }\n\n"
     << (model ? "// Host state only: the lengths that the checks count.\n"
                 "MOEC_EXPORT void moec_artifact_reset(void *state, int64_t sequence) {\n"
                 "  static_cast<State *>(state)->cache.reset(sequence < 0 ? -1 : sequence);\n}\n\n"
               : "// A block has no KV cache.\n"
                 "MOEC_EXPORT void moec_artifact_reset(void *, int64_t) {}\n\n")
     << "MOEC_EXPORT int moec_artifact_run(void *state, const unsigned char *,\n"
     << "                                  const void *const *inputs, void *const *outputs,\n"
     << "                                  int64_t tokens, unsigned char *, const void *stream,\n"
     << "                                  char *error, size_t errorBytes) {\n"
     << "  State &model = *static_cast<State *>(state);\n"
     << "  Status status = model.model.beginRun();\n"
     << "  if (status)\n"
     << "    status = run(model, inputs, outputs, tokens, static_cast<const cudaStream_t *>(stream));\n"
     << "  return reportStatus(model.model.endRun(std::move(status)), error, errorBytes);\n}\n";
  if (model)
    os << "\n// moec_generate on the device: each step is run() on the generator's stream.\n"
       << "MOEC_EXPORT int moec_artifact_generate(void *state, moec_artifact_generate_args *args,\n"
       << "                                       char *error, size_t errorBytes) {\n"
       << "  State &model = *static_cast<State *>(state);\n"
       << "  auto step = [&](const void *const *inputs, const void *const *checked,\n"
       << "                  void *const *outputs, int64_t T, cudaStream_t stream) {\n"
       << "    Status status = model.model.beginRun();\n"
       << "    if (status)\n"
       << "      status = run(model, inputs, outputs, T, &stream, checked);\n"
       << "    return model.model.endRun(std::move(status));\n  };\n"
       << "  return reportStatus(model.generator.generate(*args, step), error, errorBytes);\n}\n";
}

std::string CudaPrinter::modelChecks() const {
  if (!cacheMaxBatch)
    return "";
  auto list = [](const char *type, const char *name, const std::vector<std::string> &items) {
    if (items.empty())
      return std::string();
    return std::string("  const DeviceKVCache::") + type + " " + name + "[] = {" +
           llvm::join(items, ", ") + "};\n";
  };
  auto pointer = [](const char *name, const std::vector<std::string> &items) {
    return items.empty() ? std::string("nullptr, 0")
                         : std::string(name) + ", " + std::to_string(items.size());
  };
  return "  // The step's token ids, positions and sequences checked on the host before anything\n"
         "  // is queued, where it can read them: host memory passed to moec_run, or the host's\n"
         "  // copy of a device generation's step (`checked`). Otherwise the kernels skip what is\n"
         "  // out of range (docs/artifact.md).\n"
         "  const void *const *view = checked ? checked : inputs;\n  (void)view;\n" +
         list("IdsCheck", "idsChecks", idsChecks) +
         list("TokensCheck", "tokensChecks", tokensChecks) +
         "  MOEC_RETURN_IF_ERROR(state.cache.checkStep(checked || caller == nullptr, T, " +
         pointer("idsChecks", idsChecks) + ", " + pointer("tokensChecks", tokensChecks) +
         "));\n  DeviceKVCache &cache = state.cache;\n  (void)cache;\n";
}

std::string CudaPrinter::inPlaceSetup() const {
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

std::string CudaPrinter::graphRun() const {
  if (!inPlaceCapable)
    return "  MOEC_RETURN_IF_ERROR(state.graphs.run(T, stream, compute));\n";
  return "  MOEC_RETURN_IF_ERROR(inPlace ? state.graphs.run(T, stream, compute, callerInputs, " +
         std::to_string(callerInputs.size()) + ", callerOutputs, " +
         std::to_string(callerOutputs.size()) +
         ")\n                               : state.graphs.run(T, stream, compute));\n";
}

} // namespace

std::unique_ptr<Emitter> createCudaPrinter(func::FuncOp function, const EmitterOptions &options) {
  return std::make_unique<CudaPrinter>(function, options);
}

} // namespace moec::codegen
