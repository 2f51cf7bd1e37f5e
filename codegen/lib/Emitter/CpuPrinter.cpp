//===- CpuPrinter.cpp - the grouped phase as calls of the CPU kernels -----===//
//
// The CPU target's printer: model.cpp, one exported moec_artifact_run whose
// body calls moec/runtime/cpu/MoEKernels.h op by op with the thread pool.
// Inputs and outputs are the caller's host buffers (a kernel writes an output
// where the caller wants it); counts the kernels compute (num_valid, the
// offsets) are read on the host.
//
//===----------------------------------------------------------------------===//

#include "EmitterBase.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace moec::codegen {
namespace {

class CpuPrinter final : public Emitter {
public:
  CpuPrinter(func::FuncOp function, EmitterOptions options)
      : Emitter(function, options) {}

private:

  std::string targetPhrase() const override { return "the CPU target"; }
  bool hasBF16Kernels() const override { return false; }
  bool hasMXFP4Kernels() const override { return true; }
  bool hasModelKernels() const override { return true; }
  bool hasGenericModelKernels() const override { return true; }
  bool reusesWorkspace() const override { return true; }

  void printCheckedKernel(Operation *, StringRef name, std::vector<std::string> args) override {
    args.insert(args.begin(), "pool");
    args.push_back("why");
    line("if (!" + name.str() + "(" + llvm::join(args, ", ") + "))");
    line("  return fail(why, error, errorBytes);");
    usesChecks = true;
  }

  /// With the thread pool first (`pool`).
  void printKernel(StringRef name, std::vector<std::string> args, bool pool) override {
    if (pool)
      args.insert(args.begin(), "pool");
    line(name.str() + "(" + llvm::join(args, ", ") + ");");
  }

  /// Declarations are lines of the body, in order.
  void decl(const Twine &text) override { line(text); }

  void declareInput(unsigned index, ValueInfo &info, const std::string &cppType) override {
    line("const " + cppType + " *" + info.var + " = static_cast<const " + cppType +
         " *>(inputs[" + std::to_string(index) + "]);");
  }

  /// An output is written where the caller wants it.
  void declareResult(ValueInfo &info, const std::string &cppType, uint64_t bytes,
                     std::optional<unsigned> output) override {
    if (output) {
      line(cppType + " *" + info.var + " = static_cast<" + cppType + " *>(outputs[" +
           std::to_string(*output) + "]);");
      return;
    }
    decl(cppType + " *" + info.var + " = reinterpret_cast<" + cppType + " *>(workspace + " +
         std::to_string(reserveValue(bytes)) + ");");
  }

  void narrowIds(const ValueInfo &ids, Dim slots, const std::string &out) override {
    needsIdsToI32 = true;
    line("idsToI32(" + ids.var + ", " + dimExpr(slots) + ", " + out + ");");
  }

  bool launchTakesRowCount() const override { return false; }

  std::string writtenRows(Value value, Dim rows) override {
    if (auto permute = value.getDefiningOp<moe::PermuteOp>())
      if (auto it = values.find(permute.getNumValid()); it != values.end())
        return "*" + it->second.var;
    if (auto matmul = value.getDefiningOp<moe::GroupedMatmulOp>())
      if (auto it = values.find(matmul.getOffsets()); it != values.end())
        return it->second.var + "[" + dimExpr(it->second.dims[0]) + " - 1]";
    return dimExpr(rows);
  }

  void printPermute(moe::PermuteOp op, const ValueInfo &hidden, const ValueInfo &permutation,
                    const ValueInfo &numValid, const ValueInfo &rows) override {
    kernel("permute", {hidden.var, dimExpr(hidden.dims[1]), permutation.var, "*" + numValid.var,
                       std::to_string(op.getTopK()), rows.var});
  }

  // Only rows that hold data: the sentinel tail of the permuted rows is never
  // written, and so never read.
  void printQuantize(const ValueInfo &input, Dim, const std::string &k,
                     const std::string &written, const ValueInfo &q,
                     const ValueInfo &scales) override {
    kernel("quantizeE4M3", {input.var, written, k, q.var, scales.var});
  }

  bool hasExpertParallelism() const override { return true; }
  std::string rankExpr() const override { return "comm->rank"; }
  void printAllReduce(const ValueInfo &in, const ValueInfo &out,
                      const std::string &count) override {
    line("std::memcpy(" + out.var + ", " + in.var + ", sizeof(float) * " + count + ");");
    line("if (comm->all_reduce_sum_f32(comm->context, " + out.var + ", " + count +
         ", nullptr, error, errorBytes))");
    line("  return 1;");
  }

  void printCombine(moe::CombineOp, const ValueInfo &rows, const ValueInfo &permutation,
                    const ValueInfo &weights, const ValueInfo &numValid,
                    const std::string &addend, const std::string &gate,
                    const ValueInfo &out) override {
    kernel("combine", {rows.var, permutation.var, dimExpr(permutation.dims[0]),
                       dimExpr(rows.dims[1]), weights.var, dimExpr(weights.dims[0]),
                       dimExpr(weights.dims[1]), "*" + numValid.var, addend, gate, out.var});
  }

  void printConcat(const ValueInfo &out, ArrayRef<ValueInfo *> parts, int64_t dim,
                   int64_t outer) override {
    line("for (int64_t o = 0, at = 0; o < " + std::to_string(outer) + "; ++o) {");
    for (ValueInfo *part : parts) {
      int64_t chunk = 1;
      for (size_t i = dim; i < part->dims.size(); ++i)
        chunk *= part->dims[i].size;
      line(llvm::formatv("  std::memcpy({0} + at, {1} + o * {2}, sizeof(float) * {2});", out.var,
                         part->var, chunk)
               .str());
      line("  at += " + std::to_string(chunk) + ";");
    }
    line("}");
  }

  void printResult(unsigned index, Value value, const ValueInfo &info, Dim count) override {
    if (auto it = outputOf.find(viewRoot(value)); it != outputOf.end() && it->second == index)
      return; // computed in place
    line("// result " + std::to_string(index) +
         " is an input, a weight or another result: copied");
    line(llvm::formatv("std::memcpy(outputs[{0}], {1}, sizeof(*{1}) * ({2}));", index, info.var,
                       dimExpr(count))
             .str());
  }

  void assemble(llvm::raw_ostream &os) override;

  bool needsIdsToI32 = false;
  bool usesChecks = false;
};

void CpuPrinter::assemble(llvm::raw_ostream &os) {
  bool model = cacheMaxBatch > 0;
  os << "// Generated by `moec compile --target=cpu`: @" << function.getSymName()
     << (model ? ", a whole model's step," : "'s grouped phase")
     << " as calls of moec's CPU kernels. Do not edit.\n"
     << "#include \"moec/runtime/ArtifactABI.h\"\n"
     << "#include \"moec/runtime/cpu/MoEKernels.h\"\n";
  if (model)
    os << "#include \"moec/runtime/cpu/ModelKernels.h\"\n";
  os << "\n#include <cstdint>\n#include <cstring>\n#include <limits>\n#include <new>\n"
     << "#include <string>\n\n"
     << "#define MOEC_EXPORT extern \"C\" __attribute__((visibility(\"default\")))\n\n"
     << "using namespace moec::rt::cpu;\n\n"
     << "namespace {\n";
  // An expert-parallel program's rank and all-reduce: the loader's group.
  std::string comm = result.epSize ? "  const moec_communicator *comm = nullptr;\n" : "";
  if (model) {
    // The KV cache: moe-plan-kv-cache's size, one slot per attention op.
    os << "struct State {\n  explicit State(unsigned threads)\n"
       << "      : pool(threads), cache(" << cacheMaxBatch << ", " << cacheMaxSeq << ", {";
    for (auto [i, slot] : llvm::enumerate(cacheSlots))
      os << (i ? ", " : "") << "{" << slot.first << ", " << slot.second << "}";
    os << "}) {}\n  ThreadPool pool;\n  KVCache cache;\n" << comm << "};\n";
  } else {
    os << "struct State {\n  explicit State(unsigned threads) : pool(threads) {}\n"
       << "  ThreadPool pool;\n" << comm << "};\n";
  }
  os << "\nint fail(const std::string &why, char *error, size_t errorBytes) {\n"
     << "  if (error && errorBytes)\n"
     << "    std::strncpy(error, why.c_str(), errorBytes - 1)[errorBytes - 1] = 0;\n"
     << "  return 1;\n}\n";
  if (needsIdsToI32)
    os << "\n/// i64 expert ids as i32; ids outside i32's range become -1, a sentinel.\n"
       << "void idsToI32(const int64_t *ids, int64_t count, int32_t *out) {\n"
       << "  for (int64_t i = 0; i < count; ++i)\n"
       << "    out[i] = ids[i] >= std::numeric_limits<int32_t>::min() &&\n"
       << "                     ids[i] <= std::numeric_limits<int32_t>::max()\n"
       << "                 ? static_cast<int32_t>(ids[i]) : -1;\n}\n";
  os << "} // namespace\n\n"
     << "MOEC_EXPORT int moec_artifact_abi_version() { return MOEC_ARTIFACT_ABI_VERSION; }\n\n"
     << "// The loader hands a CPU model its weight image, filled at load or not.\n"
     << "MOEC_EXPORT int moec_artifact_create(unsigned threads, const unsigned char *, uint64_t,\n"
     << "                                     const moec_weight_plan *,\n"
     << "                                     const moec_communicator *comm, void **state,\n"
     << "                                     char *error, size_t errorBytes) {\n";
  if (result.epSize)
    os << "  if (!comm || comm->size != " << result.epSize
       << " || comm->rank < 0 || comm->rank >= comm->size || !comm->all_reduce_sum_f32)\n"
       << "    return fail(\"this model runs on " << result.epSize
       << " expert-parallel ranks and needs their communicator\", error, errorBytes);\n";
  else
    os << "  (void)comm;\n";
  os << "  try {\n    auto *created = new State(threads);\n"
     << (result.epSize ? "    created->comm = comm;\n" : "")
     << "    *state = created;\n    return 0;\n  } catch (...) {\n"
     << "    return fail(\"" << (model ? "cannot create the thread pool and the KV cache"
                                       : "cannot create the thread pool")
     << "\", error, errorBytes);\n  }\n}\n\n"
     << "MOEC_EXPORT void moec_artifact_destroy(void *state) { delete static_cast<State *>(state); }\n\n";
  if (model)
    os << "MOEC_EXPORT void moec_artifact_reset(void *state, int64_t sequence) {\n"
       << "  KVCache &cache = static_cast<State *>(state)->cache;\n"
       << "  if (sequence < 0)\n    cache.reset();\n  else\n    cache.reset(sequence);\n}\n\n";
  else
    os << "MOEC_EXPORT void moec_artifact_reset(void *, int64_t) {}\n\n";
  os << "// Planned for " << maxTokens << " tokens: workspace " << result.workspaceBytes
     << " bytes, weights " << result.weightsBytes << " bytes.\n"
     << "MOEC_EXPORT int moec_artifact_run(void *state, const unsigned char *weights,\n"
     << "                                  const void *const *inputs, void *const *outputs,\n"
     << "                                  int64_t tokens, unsigned char *workspace,\n"
     << "                                  const void *, char *error, size_t errorBytes) {\n"
     << "  // The buffers are planned for " << maxTokens << " tokens at most.\n"
     << "  if (tokens < 0 || tokens > " << maxTokens << ")\n"
     << "    return fail(\"the token count is outside the plan of this library (0 to "
     << maxTokens << ")\", error, errorBytes);\n"
     << "  ThreadPool &pool = static_cast<State *>(state)->pool;\n";
  if (model)
    os << "  KVCache &cache = static_cast<State *>(state)->cache;\n";
  if (result.epSize)
    os << "  const moec_communicator *comm = static_cast<State *>(state)->comm;\n";
  if (usesChecks)
    os << "  std::string why;\n";
  os << "  const int64_t T = tokens;\n"
     << "  (void)pool;\n  (void)T;\n  (void)weights;\n  (void)workspace;\n"
     << body << "  return 0;\n}\n";
}

} // namespace

std::unique_ptr<Emitter> createCpuPrinter(func::FuncOp function, const EmitterOptions &options) {
  return std::make_unique<CpuPrinter>(function, options);
}

} // namespace moec::codegen
