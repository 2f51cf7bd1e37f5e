//===- Toolchain.h - finding the runtime and the compilers -----*- C++ -*-===//
//
// The toolchain driver of code generation: where the runtime's headers,
// kernel archives and moec-run are (an install layout, or --runtime-dir), which
// nvcc or C++ compiler to run, and the command line that turns the printed
// source into model.so. Its error messages say what is missing and which flag
// or environment variable supplies it.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CODEGEN_TOOLCHAIN_H
#define MOEC_CODEGEN_TOOLCHAIN_H

#include "moec/Codegen/Emitter.h"

#include "llvm/Support/Error.h"

#include <string>

namespace moec::codegen {

/// The runtime's parts under a prefix DIR (docs/artifact.md, "Finding the
/// runtime"): DIR/include/moec/..., DIR/lib/libmoec_kernels.a (CPU kernels),
/// DIR/lib/libmoec_kernels_cuda.a (CUDA kernels), DIR/bin/moec-run.
struct RuntimeLayout {
  std::string prefix;
  std::string includeDir;
  std::string cpuKernels;
  std::string cudaKernels;
  std::string runProgram;
};

/// The prefix of the running executable (`<prefix>/bin/moec` gives
/// `<prefix>`): the install prefix, or the build tree.
std::string defaultRuntimeDir();

/// The runtime's parts under `runtimeDir` (empty: defaultRuntimeDir()). A
/// part that is not there is named where it was looked for, so that messages
/// can say so.
RuntimeLayout findRuntime(llvm::StringRef runtimeDir);

/// CUDA's compiler driver: `requested` if given, else $MOEC_NVCC, else the one
/// moec was built with, else `nvcc` from PATH.
llvm::Expected<std::string> findNvcc(llvm::StringRef requested);

/// The C++ compiler: `requested` if given, else $MOEC_CXX, else `c++` from PATH.
llvm::Expected<std::string> findCxx(llvm::StringRef requested);

/// Checks that `runtime` has the CUDA kernels (--target=cuda).
llvm::Error checkCudaKernels(const RuntimeLayout &runtime);

/// Checks that `runtime` has the headers and the CPU kernels, which every
/// artifact links.
llvm::Error checkRuntime(const RuntimeLayout &runtime);

/// Compiles `source` into the shared library `output` with `compiler`,
/// linking the runtime's kernel archives statically with their symbols kept
/// local, so model.so needs nothing of moec and two artifacts never clash.
/// The compiler's output goes to `log`; on failure the error holds the command
/// and the log's tail.
llvm::Error compileModel(Target target, llvm::StringRef compiler, const RuntimeLayout &runtime,
                         llvm::StringRef source, llvm::StringRef output, llvm::StringRef log);

} // namespace moec::codegen

#endif // MOEC_CODEGEN_TOOLCHAIN_H
