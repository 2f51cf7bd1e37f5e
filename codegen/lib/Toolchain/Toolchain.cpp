//===- Toolchain.cpp - finding the runtime and the compilers --------------===//

#include "moec/Codegen/Toolchain.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

#include <optional>

#ifndef MOEC_NVCC
#define MOEC_NVCC ""
#endif

namespace moec::codegen {

static std::string envOr(const char *name, const std::string &fallback) {
  if (std::optional<std::string> value = llvm::sys::Process::GetEnv(name); value && !value->empty())
    return *value;
  return fallback;
}

static std::string join(llvm::StringRef a, llvm::StringRef b, llvm::StringRef c = "",
                        llvm::StringRef d = "") {
  llvm::SmallString<256> path(a);
  for (llvm::StringRef part : {b, c, d})
    if (!part.empty()) // (an empty component would append a trailing '/')
      llvm::sys::path::append(path, part);
  return std::string(path);
}

std::string defaultRuntimeDir() {
  static int anchor;
  std::string executable = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
  if (executable.empty())
    return "";
  // <prefix>/bin/moec -> <prefix>
  return std::string(llvm::sys::path::parent_path(llvm::sys::path::parent_path(executable)));
}

RuntimeLayout findRuntime(llvm::StringRef runtimeDir) {
  RuntimeLayout layout;
  layout.prefix = runtimeDir.empty() ? defaultRuntimeDir() : runtimeDir.str();
  llvm::StringRef prefix = layout.prefix;
  layout.includeDir = join(prefix, "include");
  layout.cpuKernels = join(prefix, "lib", "libmoec_kernels.a");
  layout.cudaKernels = join(prefix, "lib", "libmoec_kernels_cuda.a");
  layout.runProgram = join(prefix, "bin", "moec-run");
  return layout;
}

static llvm::Error missing(const RuntimeLayout &runtime, const llvm::Twine &what) {
  return llvm::createStringError(what + " (looked under '" + runtime.prefix +
                                 "': --runtime-dir, by default the prefix of the moec "
                                 "executable)");
}

llvm::Error checkCudaKernels(const RuntimeLayout &runtime) {
  if (!llvm::sys::fs::exists(runtime.cudaKernels))
    return missing(runtime, "--target=cuda needs the runtime's CUDA kernels, which are not at '" +
                                runtime.cudaKernels + "'");
  return llvm::Error::success();
}

llvm::Error checkRuntime(const RuntimeLayout &runtime) {
  if (!llvm::sys::fs::exists(join(runtime.includeDir, "moec", "runtime", "cpu/MoEKernels.h")))
    return missing(runtime, "the runtime's headers are not at '" + runtime.includeDir + "'");
  if (!llvm::sys::fs::exists(runtime.cpuKernels))
    return missing(runtime, "the runtime's kernels are not at '" + runtime.cpuKernels + "'");
  return llvm::Error::success();
}

llvm::Expected<std::string> findNvcc(llvm::StringRef requested) {
  std::string name = requested.str();
  if (name.empty())
    name = envOr("MOEC_NVCC", std::string(MOEC_NVCC).empty() ? "nvcc" : MOEC_NVCC);
  llvm::ErrorOr<std::string> found = llvm::sys::path::is_absolute(name)
                                         ? (llvm::sys::fs::can_execute(name)
                                                ? llvm::ErrorOr<std::string>(name)
                                                : std::errc::no_such_file_or_directory)
                                         : llvm::sys::findProgramByName(name);
  if (!found)
    return llvm::createStringError("--target=cuda needs CUDA's compiler, but there is no nvcc "
                                   "at '" +
                                   name + "' (install the CUDA toolkit or set MOEC_NVCC)");
  return *found;
}

llvm::Expected<std::string> findCxx(llvm::StringRef requested) {
  std::string name = requested.empty() ? envOr("MOEC_CXX", "c++") : requested.str();
  llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(name);
  if (!found)
    return llvm::createStringError("no C++ compiler '" + name + "' on PATH (set MOEC_CXX)");
  return *found;
}

llvm::Error compileModel(Target target, llvm::StringRef compiler, const RuntimeLayout &runtime,
                         llvm::StringRef source, llvm::StringRef output, llvm::StringRef log) {
  llvm::SmallVector<llvm::StringRef> args;
  if (target == Target::CUDA) {
    // CUDA's runtime is linked statically too (-cudart static): model.so
    // needs the driver, nothing of the toolkit.
    args = {compiler, "-O2", "-std=c++20", "-Xcompiler", "-fPIC,-fvisibility=hidden", "-shared",
            "-gencode=arch=compute_90a,code=sm_90a", "-I", runtime.includeDir, source,
            runtime.cudaKernels, runtime.cpuKernels, "-o", output, "-cudart", "static",
            "-Xlinker", "--exclude-libs,ALL", "-Xlinker", "-z,defs", "-lpthread", "-ldl", "-lrt"};
  } else {
    args = {compiler,   "-O2",      "-std=c++20",          "-fPIC",
            "-shared",  "-fvisibility=hidden",             "-I",
            runtime.includeDir, source, runtime.cpuKernels, "-o",
            output,     "-pthread", "-Wl,--exclude-libs,ALL",
            "-Wl,-z,defs"};
  }
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(compiler, args, std::nullopt, redirects, 0, 0, &execError);
  if (rc == 0)
    return llvm::Error::success();
  std::string text;
  if (auto buffer = llvm::MemoryBuffer::getFile(log))
    text = (*buffer)->getBuffer().take_back(4000).str();
  return llvm::createStringError(
      "compiling the generated code failed (" +
      (execError.empty() ? "exit status " + std::to_string(rc) : execError) +
      "): " + llvm::join(args, " ") + "\n" + text);
}

} // namespace moec::codegen
