//===- ArtifactWriter.cpp - the artifact directory and --emit=exe ---------===//
//
// Everything of an artifact but the printing (Emitter.h) and the compiler's
// command line (Toolchain.h): the checks that an existing target may be
// replaced, the staging directory beside it, weights.bin, manifest.txt, the
// atomic replace, and the --emit=exe bundle.
//
//===----------------------------------------------------------------------===//

#include "moec/Codegen/ArtifactWriter.h"
#include "moec/Codegen/Toolchain.h"
#include "moec/runtime/Bundle.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Alignment.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "moec/runtime/ArtifactFormat.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <memory>
#include <unistd.h>

using namespace mlir;

namespace moec::codegen {
namespace {


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

/// `text` as a C string literal, a line of it per source line.
std::string planLiteral(llvm::StringRef text) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "\"";
  for (char c : text) {
    if (c == '\n') {
      os << "\\n\"\n         \"";
    } else if (c == '"' || c == '\\') {
      os << '\\' << c;
    } else if (llvm::isPrint(c)) {
      os << c;
    } else {
      os << llvm::format("\\%03o", static_cast<unsigned char>(c));
    }
  }
  os << "\"";
  return out;
}

/// The file just written at `path`, mapped, for its content hashes.
std::unique_ptr<llvm::MemoryBuffer> readBack(const std::string &path, std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "cannot read back " + path + ": " + buffer.getError().message();
    return nullptr;
  }
  return std::move(*buffer);
}

constexpr const char *kArtifactFiles[] = {"manifest.txt", "weights.bin", "model.so", "model.cpp",
                                          "model.cu", "compile.log"};

} // namespace

LogicalResult emitArtifact(ModuleOp module, const ArtifactOptions &options) {
  bool cuda = options.target == Target::CUDA;
  StringRef targetName = cuda ? "cuda" : "cpu";
  auto fail = [&](const Twine &message) {
    emitError(module.getLoc()) << message;
    return failure();
  };
  EmitterOptions emitterOptions;
  emitterOptions.maxTokens = options.maxTokens;
  emitterOptions.externalWeights = options.externalWeights;
  FailureOr<EmittedModule> emitted = emitModule(module, options.target, emitterOptions);
  if (failed(emitted))
    return failure();
  const EmittedModule &emitter = *emitted;

  // The CUDA target's tools are checked once the code is known to be
  // generable, before anything is written: without nvcc (or a CUDA runtime in
  // this build) it cannot work.
  RuntimeLayout runtime = findRuntime(options.runtimeDir);
  std::string compiler;
  if (cuda) {
    if (llvm::Error err = checkCudaKernels(runtime))
      return fail(llvm::toString(std::move(err)));
    llvm::Expected<std::string> nvcc = findNvcc(options.nvcc);
    if (!nvcc)
      return fail(llvm::toString(nvcc.takeError()));
    compiler = *nvcc;
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
    runProgram = options.runProgram.empty() ? envOr("MOEC_RUN", runtime.runProgram)
                                            : options.runProgram;
    if (runProgram.empty() || !llvm::sys::fs::can_execute(runProgram))
      return fail("--emit=exe copies moec-run, which is not at '" + runProgram +
                  "' (set --runtime-dir or MOEC_RUN)");
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


  rt::artifact::Manifest manifest;
  manifest.target = targetName.str();
  manifest.weightsBytes = emitter.weightsBytes;
  manifest.workspaceBytes = emitter.workspaceBytes;
  manifest.maxTokens = options.maxTokens;
  manifest.maxBatch = emitter.maxBatch;
  manifest.maxSeq = emitter.maxSeq;
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
  // Weights filled at load (docs/artifact.md): the generated code addresses an
  // image of emitter.weightsBytes; weights.bin holds only the stored weights,
  // packed at their own 256-byte aligned places.
  // An expert-parallel program's image is one rank's: its shards are picked
  // at load, so it is always filled.
  bool filled = emitter.randomSeed.has_value() || emitter.epSize > 0;
  if (filled && options.externalWeights)
    return fail("--weights=external does not apply to weights filled at load (the module's "
                "moec.random_seed, or one artifact for every expert-parallel rank): their "
                "manifest says how the loader fills them");
  manifest.epSize = emitter.epSize;
  uint64_t fileBytes = filled ? rt::artifact::kWeightsHeaderBytes : emitter.weightsBytes;
  std::vector<uint64_t> stored; // each weight's place in weights.bin
  size_t storedCount = 0;
  for (const WeightEntry &weight : emitter.weights) {
    rt::artifact::WeightEntry entry{weight.name, manifestDType(weight.elementType),
                                    std::vector<int64_t>(weight.shape.begin(), weight.shape.end()),
                                    weight.offset, weight.size};
    uint64_t at = weight.offset;
    if (filled && weight.fill == WeightEntry::Fill::Stored) {
      // A shard's every rank's slice, rank after rank.
      at = llvm::alignTo(fileBytes, rt::artifact::kWeightsAlignment);
      fileBytes = at + weight.size * (weight.shard ? emitter.epSize : 1);
      entry.source = at;
    }
    entry.shard = weight.shard;
    if (weight.fill == WeightEntry::Fill::Stored)
      ++storedCount;
    entry.fill = weight.fill == WeightEntry::Fill::Normal     ? rt::artifact::WeightEntry::Fill::Normal
                 : weight.fill == WeightEntry::Fill::Constant ? rt::artifact::WeightEntry::Fill::Constant
                                                              : rt::artifact::WeightEntry::Fill::Stored;
    entry.value = weight.value;
    manifest.hasRandomSeed |= weight.fill == WeightEntry::Fill::Normal;
    stored.push_back(at);
    manifest.weights.push_back(std::move(entry));
  }
  if (filled) {
    manifest.weightsBytes = fileBytes;
    manifest.imageBytes = emitter.weightsBytes;
    manifest.randomSeed = manifest.hasRandomSeed ? *emitter.randomSeed : 0;
  }

  // model.so carries the plan it is compiled for, which the loader checks
  // against the manifest (moec/runtime/ArtifactABI.h, moec_artifact_plan).
  std::string error;
  std::string sourceName = cuda ? "model.cu" : "model.cpp";
  if (!writeFile(
          staging + "/" + sourceName,
          [&](llvm::raw_ostream &os) {
            os << emitter.source << "\n// The plan this library is compiled for; the loader "
                                    "refuses a manifest that states another.\n"
               << "MOEC_EXPORT const char *moec_artifact_plan() {\n  return "
               << planLiteral(rt::artifact::printPlan(manifest)) << ";\n}\n";
          },
          error))
    return fail(error);

  if (!options.externalWeights &&
      !writeFile(
          staging + "/" + rt::artifact::kWeightsFile,
          [&](llvm::raw_ostream &os) {
            char header[rt::artifact::kWeightsHeaderBytes];
            rt::artifact::writeWeightsHeader(storedCount, fileBytes, header);
            os.write(header, sizeof(header));
            uint64_t at = rt::artifact::kWeightsHeaderBytes;
            for (auto [weight, place] : llvm::zip_equal(emitter.weights, stored)) {
              if (weight.fill != WeightEntry::Fill::Stored)
                continue;
              os.write_zeros(place - at);
              os.write(weight.bytes.data(), weight.bytes.size());
              at = place + weight.bytes.size();
            }
          },
          error))
    return fail(error);


  // Compile: the runtime's kernel archives are linked statically and their
  // symbols kept local, so model.so needs nothing of moec and two artifacts
  // never clash.
  if (llvm::Error err = checkRuntime(runtime))
    return fail(llvm::toString(std::move(err)));
  if (!cuda) {
    llvm::Expected<std::string> cxx = findCxx(options.cxx);
    if (!cxx)
      return fail(llvm::toString(cxx.takeError()));
    compiler = *cxx;
  }
  std::string log = staging + "/compile.log";
  if (llvm::Error err = compileModel(options.target, compiler, runtime,
                                     staging + "/" + sourceName, staging + "/model.so", log))
    return fail(llvm::toString(std::move(err)));
  llvm::sys::fs::remove(log);

  // The content hashes, then the manifest, written last (docs/artifact.md,
  // "What the loader verifies").
  std::unique_ptr<llvm::MemoryBuffer> library = readBack(staging + "/model.so", error);
  if (!library)
    return fail(error);
  manifest.libraryHash = rt::artifact::hashText(
      rt::artifact::contentHash(library->getBufferStart(), library->getBufferSize()));
  if (!options.externalWeights) {
    std::unique_ptr<llvm::MemoryBuffer> weights =
        readBack(staging + "/" + rt::artifact::kWeightsFile, error);
    if (!weights)
      return fail(error);
    const auto *data = reinterpret_cast<const unsigned char *>(weights->getBufferStart());
    uint64_t size = weights->getBufferSize();
    manifest.weightsSampleHash = rt::artifact::hashText(rt::artifact::weightsSampleHash(data, size));
    manifest.weightsHash = rt::artifact::hashText(rt::artifact::contentHash(data, size));
  }
  if (!writeFile(
          staging + "/" + rt::artifact::kManifestFile,
          [&](llvm::raw_ostream &os) { os << rt::artifact::printManifest(manifest); }, error))
    return fail(error);

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
