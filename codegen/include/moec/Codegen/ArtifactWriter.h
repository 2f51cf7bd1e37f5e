//===- ArtifactWriter.h - grouped phase → artifact (CPU, CUDA) -*- C++ -*-===//
//
// Turns a module in the grouped phase (docs/pipeline.md) into an artifact
// (docs/artifact.md): prints it (Emitter.h), writes model.cpp or model.cu,
// weights.bin (every weight constant 256-byte aligned) and manifest.txt into
// a staging directory, compiles model.so there with the runtime's kernel
// archives (Toolchain.h), and moves the directory into place only then; or,
// with --emit=exe, writes one executable: moec-run with the artifact appended.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CODEGEN_ARTIFACTWRITER_H
#define MOEC_CODEGEN_ARTIFACTWRITER_H

#include "moec/Codegen/Emitter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace moec::codegen {

struct ArtifactOptions {
  Target target = Target::CPU;
  /// The artifact directory to write (replaced as a whole on success).
  std::string outputDir;
  /// Upper bound of the dynamic token count; buffers are planned for it.
  int64_t maxTokens = 8192;
  /// Lay weights.bin out in the manifest but do not write it (splats are not
  /// expanded): the weights are filled in elsewhere (bench/write_weights.py).
  bool externalWeights = false;
  /// The C++ compiler ("c++" from PATH unless set; $MOEC_CXX overrides).
  std::string cxx;
  /// CUDA's compiler driver ($MOEC_NVCC, else the one moec was built with,
  /// else "nvcc" from PATH).
  std::string nvcc;
  /// The prefix the runtime is installed under: DIR/include, DIR/lib/
  /// libmoec_kernels{,_cuda}.a, DIR/bin/moec-run (Toolchain.h). Empty: the
  /// prefix of the running moec executable.
  std::string runtimeDir;
  /// --emit=exe: write `outputDir` as one executable file instead, a copy of
  /// moec-run with the artifact appended (moec/runtime/Bundle.h).
  bool executable = false;
  /// The moec-run to copy (default: $MOEC_RUN, else the runtime dir's).
  std::string runProgram;
};

/// Writes the artifact for the module's one function. Problems are reported
/// as diagnostics at the op at fault ("cannot generate code for ...").
mlir::LogicalResult emitArtifact(mlir::ModuleOp module, const ArtifactOptions &options);

} // namespace moec::codegen

#endif // MOEC_CODEGEN_ARTIFACTWRITER_H
