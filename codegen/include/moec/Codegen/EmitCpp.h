//===- EmitCpp.h - grouped phase → C++ artifact for the CPU -----*- C++ -*-===//
//
// Turns a module in the grouped phase (docs/pipeline.md) into an artifact
// directory (docs/artifact.md): model.cpp, a C++ translation unit that calls
// the runtime's CPU kernels (moec/runtime/cpu/MoEKernels.h) op by op, compiled
// to model.so with the system C++ compiler and the runtime's static archive;
// weights.bin, every weight constant 64-byte aligned; and manifest.txt.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CODEGEN_EMITCPP_H
#define MOEC_CODEGEN_EMITCPP_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace moec::codegen {

struct CpuArtifactOptions {
  /// The artifact directory to write (replaced as a whole on success).
  std::string outputDir;
  /// Upper bound of the dynamic token count; buffers are planned for it.
  int64_t maxTokens = 8192;
  /// The C++ compiler ("c++" from PATH unless set; $MOEC_CXX overrides).
  std::string cxx;
  /// The runtime's headers and static library; defaults are the build tree's
  /// (MOEC_RUNTIME_INCLUDE_DIR / MOEC_RUNTIME_LIBRARY), overridable by the
  /// environment variables of the same names.
  std::string runtimeIncludeDir, runtimeLibrary;
};

/// Writes the artifact for the module's one function. Problems are reported
/// as diagnostics at the op at fault ("cannot generate code for ...").
mlir::LogicalResult emitCpuArtifact(mlir::ModuleOp module, const CpuArtifactOptions &options);

} // namespace moec::codegen

#endif // MOEC_CODEGEN_EMITCPP_H
