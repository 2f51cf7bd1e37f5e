//===- EmitCpp.h - grouped phase → C++ artifact (CPU, CUDA) ----*- C++ -*-===//
//
// Turns a module in the grouped phase (docs/pipeline.md) into an artifact
// directory (docs/artifact.md): a C++ translation unit that calls the
// runtime's kernels op by op, compiled to model.so with the runtime's static
// archive; weights.bin, every weight constant 64-byte aligned; and
// manifest.txt. The CPU target writes model.cpp calling
// moec/runtime/cpu/MoEKernels.h (system C++ compiler); the CUDA target writes
// model.cu calling moec/runtime/cuda/MoEKernels.h on one stream (nvcc). The
// two differ only in the kernel calls and where the buffers live.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CODEGEN_EMITCPP_H
#define MOEC_CODEGEN_EMITCPP_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace moec::codegen {

enum class Target { CPU, CUDA };

struct ArtifactOptions {
  Target target = Target::CPU;
  /// The artifact directory to write (replaced as a whole on success).
  std::string outputDir;
  /// Upper bound of the dynamic token count; buffers are planned for it.
  int64_t maxTokens = 8192;
  /// Lay weights.bin out in the manifest but do not write it (splats are not
  /// expanded): the weights are filled in elsewhere (bench/write_weights.py).
  bool externalWeights = false;
  /// CUDA: store moe.grouped_matmul's f32 weights as bf16 (rounded to nearest
  /// even) and multiply them with the bf16-weight kernel: half the bytes to
  /// stream, f32 rows and accumulation.
  bool bf16ExpertWeights = false;
  /// CUDA, with bf16ExpertWeights: round the experts' results (the down
  /// projection's rows, which only moe.combine reads) to bf16, as transformers'
  /// bf16 block holds them: half the bytes the combine reads and the GEMM
  /// writes. A precision choice: the combine's sum stays f32, its terms are
  /// rounded (docs/design.md, "bf16 expert outputs").
  bool bf16ExpertOutputs = false;
  /// The C++ compiler ("c++" from PATH unless set; $MOEC_CXX overrides).
  std::string cxx;
  /// CUDA's compiler driver ($MOEC_NVCC, else the one moec was built with,
  /// else "nvcc" from PATH).
  std::string nvcc;
  /// The runtime's headers and static library; defaults are the build tree's
  /// (MOEC_RUNTIME_INCLUDE_DIR / MOEC_RUNTIME_LIBRARY), overridable by the
  /// environment variables of the same names.
  std::string runtimeIncludeDir, runtimeLibrary;
  /// The CUDA runtime archive (MOEC_RUNTIME_CUDA_LIBRARY), CUDA target only.
  std::string runtimeCudaLibrary;
  /// --emit=exe: write `outputDir` as one executable file instead, a copy of
  /// moec-run with the artifact appended (moec/runtime/Bundle.h).
  bool executable = false;
  /// The moec-run to copy (MOEC_RUN, else the build tree's).
  std::string runProgram;
};
using CpuArtifactOptions = ArtifactOptions;

/// Writes the artifact for the module's one function. Problems are reported
/// as diagnostics at the op at fault ("cannot generate code for ...").
mlir::LogicalResult emitArtifact(mlir::ModuleOp module, const ArtifactOptions &options);

inline mlir::LogicalResult emitCpuArtifact(mlir::ModuleOp module, ArtifactOptions options) {
  options.target = Target::CPU;
  return emitArtifact(module, options);
}

} // namespace moec::codegen

#endif // MOEC_CODEGEN_EMITCPP_H
