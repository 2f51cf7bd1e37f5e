//===- Model.cpp - the artifact loader behind moec.h ----------------------===//
//
// Reads DIR/manifest.txt, maps DIR/weights.bin, dlopens DIR/model.so and checks
// every tensor handed to moec_run against the manifest before the generated
// code sees it (docs/artifact.md). An executable written by `moec compile
// --emit=exe` carries the same three files (moec/runtime/Bundle.h) and loads
// the same way. Errors carry the file or tensor at fault.
//
// Nothing read is trusted (docs/artifact.md, "What the loader verifies"): the
// manifest's own hash, model.so's hash before dlopen, weights.bin's header and
// sampled hash (all of it with MOEC_VERIFY_WEIGHTS=full), and the plan model.so
// was compiled for against the manifest's, before any kernel runs.
//
//===----------------------------------------------------------------------===//

#include "moec/moec.h"
#include "moec/runtime/ArtifactABI.h"
#include "moec/runtime/ArtifactFormat.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/Status.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

using moec::rt::Status;

namespace {

thread_local std::string lastError;

struct TensorDecl {
  std::string name;
  moec_dtype dtype = MOEC_F32;
  std::vector<int64_t> shape; // -1: the token dimension
};

struct Manifest {
  std::string target, library, weightsFile;
  uint64_t weightsBytes = 0, workspaceBytes = 0;
  int64_t maxTokens = 0;
  /// A whole model's KV cache (0 for a block).
  int64_t maxBatch = 0, maxSeq = 0;
  std::vector<TensorDecl> inputs, outputs;
  /// artifact::printPlan of the manifest, which model.so must return.
  std::string plan;
  std::string libraryHash, weightsSampleHash, weightsHash;
};

namespace artifact = moec::rt::artifact;

bool parseDType(const std::string &text, moec_dtype &dtype) {
  if (text == "f32")
    dtype = MOEC_F32;
  else if (text == "i32")
    dtype = MOEC_I32;
  else if (text == "i64")
    dtype = MOEC_I64;
  else
    return false;
  return true;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + (shape[i] < 0 ? std::string("T") : std::to_string(shape[i]));
  return text + "]";
}

/// Parses manifest text (moec/runtime/ArtifactFormat.h); `path` names it in
/// errors.
Status parseManifest(std::string_view text, const std::string &path, Manifest &manifest) {
  artifact::Manifest format;
  MOEC_RETURN_IF_ERROR(artifact::parseManifest(text, path, format));
  Manifest parsed;
  parsed.target = format.target;
  parsed.library = format.library;
  parsed.weightsFile = format.weightsFile;
  parsed.weightsBytes = format.weightsBytes;
  parsed.workspaceBytes = format.workspaceBytes;
  parsed.maxTokens = format.maxTokens;
  parsed.maxBatch = format.maxBatch;
  parsed.maxSeq = format.maxSeq;
  parsed.plan = artifact::printPlan(format);
  parsed.libraryHash = format.libraryHash;
  parsed.weightsSampleHash = format.weightsSampleHash;
  parsed.weightsHash = format.weightsHash;
  for (auto [entries, decls] : {std::pair{&format.inputs, &parsed.inputs},
                                std::pair{&format.outputs, &parsed.outputs}})
    for (const artifact::TensorEntry &entry : *entries) {
      TensorDecl decl;
      decl.name = entry.name;
      decl.shape = entry.shape;
      if (!parseDType(entry.dtype, decl.dtype))
        return Status::error(path + ": tensor '" + entry.name + "' has dtype '" + entry.dtype +
                             "', which moec_run cannot take");
      decls->push_back(std::move(decl));
    }
  manifest = std::move(parsed);
  return Status::ok();
}

Status parseManifestFile(const std::string &path, Manifest &manifest) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::error(path + ": cannot open (" + std::strerror(errno) +
                         "); is this a moec artifact directory?");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad())
    return Status::error(path + ": cannot read");
  return parseManifest(text.str(), path, manifest);
}

} // namespace

struct moec_model {
  std::string dir;
  Manifest manifest;
  void *library = nullptr;
  // The descriptor dlopen loaded the library through (/proc/PID/fd/N), open
  // while the library is: were it closed, the next model's library could get
  // the same number, and dlopen, which knows loaded objects by name, would hand
  // back this one instead of loading it.
  int libraryFd = -1;
  void *weights = nullptr;
  size_t weightsMapped = 0;
  unsigned char *workspace = nullptr;
  void *state = nullptr;
  moec_artifact_destroy_fn destroy = nullptr;
  moec_artifact_run_fn run = nullptr;
  moec_artifact_reset_fn reset = nullptr;
  moec_artifact_generate_fn generate = nullptr; // CUDA whole models only
  std::mutex runMutex;

  ~moec_model() {
    if (state && destroy)
      destroy(state);
    if (library)
      dlclose(library);
    if (libraryFd >= 0)
      close(libraryFd);
    if (weights)
      munmap(weights, weightsMapped);
    ::operator delete[](workspace, std::align_val_t{64});
  }
};

namespace {

/// Maps `bytes` bytes of weights at `offset` (page-aligned) of file `path`: all
/// of weights.bin, or the weights inside a moec executable (`bundled`).
Status mapWeights(moec_model &model, const std::string &path, uint64_t offset, uint64_t bytes,
                  bool bundled) {
  const Manifest &manifest = model.manifest;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat info;
  if (fstat(fd, &info) != 0) {
    close(fd);
    return Status::error(path + ": cannot stat (" + std::strerror(errno) + ")");
  }
  if (!bundled)
    bytes = static_cast<uint64_t>(info.st_size);
  if (bytes != manifest.weightsBytes || manifest.weightsBytes < artifact::kWeightsHeaderBytes) {
    close(fd);
    return Status::error(path + (bundled ? ": the bundled weights hold " : ": holds ") +
                         std::to_string(bytes) + " bytes, the manifest says " +
                         std::to_string(manifest.weightsBytes) +
                         " (truncated or from another build?)");
  }
  void *mapped = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(offset));
  close(fd);
  if (mapped == MAP_FAILED)
    return Status::error(path + ": mmap failed (" + std::strerror(errno) + ")");
  model.weights = mapped;
  model.weightsMapped = bytes;
  const auto *data = static_cast<const unsigned char *>(mapped);
  MOEC_RETURN_IF_ERROR(artifact::checkWeightsHeader(data, bytes, path));
  // Sampled always (a cost independent of the size), in full on request.
  // Weights laid out by --weights=external and filled elsewhere carry no hash.
  if (manifest.weightsSampleHash.empty())
    return Status::ok();
  if (artifact::hashText(artifact::weightsSampleHash(data, bytes)) != manifest.weightsSampleHash)
    return Status::error(path + ": the weights do not match the manifest's weights_sample_hash "
                                "(damaged, or from another build)");
  const char *verify = std::getenv("MOEC_VERIFY_WEIGHTS");
  if (verify && std::string_view(verify) == "full" &&
      artifact::hashText(artifact::contentHash(data, bytes)) != manifest.weightsHash)
    return Status::error(path + ": the weights do not match the manifest's weights_hash "
                                "(damaged, or from another build)");
  return Status::ok();
}

/// Checks model library bytes against the manifest's hash before dlopen reads
/// them: a truncated, damaged or swapped model.so never reaches the loader.
Status checkLibraryHash(const Manifest &manifest, const unsigned char *bytes, uint64_t size,
                        const std::string &path) {
  if (artifact::hashText(artifact::contentHash(bytes, size)) != manifest.libraryHash)
    return Status::error(path + ": does not match the manifest's library_hash (damaged, "
                                "truncated, or from another build); recompile the model");
  return Status::ok();
}

/// Hashes the file at `file` (mapped, read once) against the manifest; on
/// success `fd` stays open on it, so that what dlopen loads (through
/// /proc/PID/fd) is the file that was hashed, whatever happens to the path.
Status checkLibraryFile(const Manifest &manifest, const std::string &file, int &fd) {
  fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(file + ": cannot open (" + std::strerror(errno) + ")");
  struct stat info;
  uint64_t size = 0;
  void *mapped = nullptr;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    fd = -1;
    return Status::error(file + ": not a regular file");
  }
  size = static_cast<uint64_t>(info.st_size);
  mapped = size ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  if (mapped == MAP_FAILED) {
    close(fd);
    fd = -1;
    return Status::error(file + ": mmap failed (" + std::strerror(errno) + ")");
  }
  Status status = checkLibraryHash(manifest, static_cast<const unsigned char *>(mapped), size, file);
  if (mapped)
    munmap(mapped, size);
  if (!status) {
    close(fd);
    fd = -1;
  }
  return status;
}

/// The name dlopen loads descriptor `fd` by: /proc/PID/fd/N rather than
/// /proc/self/fd/N, because the name stays in the link map, where debuggers
/// and profilers read it in their own process: gdb opened its own descriptor N
/// (a pipe) for /proc/self/fd/N and hung reading it.
std::string descriptorPath(int fd) {
  return "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd);
}

/// dlopens the model library at `file`; `path` names it in errors.
Status openLibrary(moec_model &model, const std::string &file, const std::string &path) {
  // RTLD_LOCAL: two artifacts loaded side by side keep their own kernels.
  model.library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!model.library)
    return Status::error(path + ": cannot load (" + dlerror() + ")");
  auto symbol = [&](const char *name, void *&out) {
    out = dlsym(model.library, name);
    return out ? Status::ok()
               : Status::error(path + ": no symbol '" + name +
                               "' (not a library written by moec compile?)");
  };
  void *version = nullptr, *plan = nullptr, *create = nullptr, *destroy = nullptr,
       *run = nullptr, *reset = nullptr;
  MOEC_RETURN_IF_ERROR(symbol("moec_artifact_abi_version", version));
  MOEC_RETURN_IF_ERROR(symbol("moec_artifact_create", create));
  MOEC_RETURN_IF_ERROR(symbol("moec_artifact_destroy", destroy));
  MOEC_RETURN_IF_ERROR(symbol("moec_artifact_run", run));
  MOEC_RETURN_IF_ERROR(symbol("moec_artifact_reset", reset));
  int abi = reinterpret_cast<moec_artifact_abi_version_fn>(version)();
  if (abi != MOEC_ARTIFACT_ABI_VERSION)
    return Status::error(path + ": written for artifact ABI " + std::to_string(abi) +
                         ", this runtime speaks " + std::to_string(MOEC_ARTIFACT_ABI_VERSION) +
                         "; recompile the model");
  // The plan the library was compiled for (target, sizes, max tokens, the
  // tensor tables) must be the manifest's: no edited or swapped file reaches a
  // kernel.
  MOEC_RETURN_IF_ERROR(symbol("moec_artifact_plan", plan));
  const char *compiled = reinterpret_cast<moec_artifact_plan_fn>(plan)();
  if (!compiled || model.manifest.plan != compiled) {
    // Name the first line that differs.
    std::istringstream stated(model.manifest.plan), built(compiled ? compiled : "");
    std::string a, b;
    while (std::getline(stated, a) && std::getline(built, b) && a == b) {
    }
    return Status::error(path + ": was compiled for another plan than the manifest states "
                                "(the manifest says '" + a + "', the library '" + b +
                         "'); the files belong to different builds");
  }
  model.destroy = reinterpret_cast<moec_artifact_destroy_fn>(destroy);
  model.run = reinterpret_cast<moec_artifact_run_fn>(run);
  model.reset = reinterpret_cast<moec_artifact_reset_fn>(reset);
  // Optional: a CUDA whole model's generation on the device.
  model.generate = reinterpret_cast<moec_artifact_generate_fn>(
      dlsym(model.library, "moec_artifact_generate"));
  // MOEC_NUM_THREADS bounds the model's thread pool (benchmarks, shared hosts);
  // by default it uses the hardware's concurrency.
  unsigned threads = 0;
  if (const char *text = std::getenv("MOEC_NUM_THREADS"); text && *text) {
    char *end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 1 || value > 4096)
      return Status::error(std::string("MOEC_NUM_THREADS='") + text +
                           "' is not a thread count in [1, 4096]");
    threads = static_cast<unsigned>(value);
  }
  char error[2048] = "";
  if (reinterpret_cast<moec_artifact_create_fn>(create)(
          threads, static_cast<const unsigned char *>(model.weights), model.weightsMapped,
          &model.state, error, sizeof(error)) != 0 ||
      !model.state)
    return Status::error(path + ": the model's state could not be created" +
                         (*error ? std::string(": ") + error : std::string()));
  return Status::ok();
}

/// Reads `bytes` bytes at `offset` of `path` into `out`.
Status readPart(const std::string &path, uint64_t offset, uint64_t bytes, std::string &out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  out.resize(bytes);
  uint64_t done = 0;
  while (done < bytes) {
    ssize_t got = pread(fd, out.data() + done, bytes - done, static_cast<off_t>(offset + done));
    if (got <= 0) {
      close(fd);
      return Status::error(path + ": cannot read " + std::to_string(bytes) + " bytes at " +
                           std::to_string(offset));
    }
    done += static_cast<uint64_t>(got);
  }
  close(fd);
  return Status::ok();
}

/// An executable written by `moec compile --emit=exe`: the manifest is parsed
/// from its bytes, the weights mapped in place, model.so loaded from a memory
/// file (dlopen needs a path; nothing is written to disk).
Status loadBundle(const std::string &path, const moec::rt::BundleTrailer &trailer,
                  moec_model &model) {
  std::string manifestText, library;
  MOEC_RETURN_IF_ERROR(readPart(path, trailer.manifestOffset, trailer.manifestBytes, manifestText));
  MOEC_RETURN_IF_ERROR(parseManifest(manifestText, path + " (bundled manifest)", model.manifest));
  MOEC_RETURN_IF_ERROR(
      mapWeights(model, path, trailer.weightsOffset, trailer.weightsBytes, /*bundled=*/true));
  MOEC_RETURN_IF_ERROR(readPart(path, trailer.libraryOffset, trailer.libraryBytes, library));
  MOEC_RETURN_IF_ERROR(checkLibraryHash(model.manifest,
                                        reinterpret_cast<const unsigned char *>(library.data()),
                                        library.size(), path + " (bundled model library)"));
  int fd = static_cast<int>(syscall(SYS_memfd_create, "moec-model.so", 1u /*MFD_CLOEXEC*/));
  if (fd < 0)
    return Status::error(path + ": cannot create a memory file for the bundled model library (" +
                         std::strerror(errno) + ")");
  size_t done = 0;
  while (done < library.size()) {
    ssize_t wrote = write(fd, library.data() + done, library.size() - done);
    if (wrote <= 0) {
      close(fd);
      return Status::error(path + ": cannot write the bundled model library to memory");
    }
    done += static_cast<size_t>(wrote);
  }
  model.libraryFd = fd; // kept open while the library is loaded (moec_model)
  return openLibrary(model, descriptorPath(fd), path + " (bundled model library)");
}

Status load(const char *dir, moec_model &model) {
  if (!dir)
    return Status::error("moec_load: artifact directory is null");
  model.dir = dir;
  struct stat info;
  if (stat(dir, &info) != 0)
    return Status::error(std::string(dir) + ": not an artifact directory (" +
                         std::strerror(errno) + ")");
  if (S_ISDIR(info.st_mode)) {
    MOEC_RETURN_IF_ERROR(parseManifestFile(model.dir + "/" + artifact::kManifestFile, model.manifest));
    MOEC_RETURN_IF_ERROR(mapWeights(model, model.dir + "/" + model.manifest.weightsFile, 0, 0,
                                    /*bundled=*/false));
    std::string library = model.dir + "/" + model.manifest.library;
    int fd = -1;
    MOEC_RETURN_IF_ERROR(checkLibraryFile(model.manifest, library, fd));
    model.libraryFd = fd; // kept open while the library is loaded (moec_model)
    MOEC_RETURN_IF_ERROR(openLibrary(model, descriptorPath(fd), library));
  } else {
    moec::rt::BundleTrailer trailer;
    bool present = false;
    MOEC_RETURN_IF_ERROR(moec::rt::readBundleTrailer(model.dir, trailer, present));
    if (!present)
      return Status::error(std::string(dir) +
                           ": neither an artifact directory nor an executable written by "
                           "`moec compile --emit=exe`");
    MOEC_RETURN_IF_ERROR(loadBundle(model.dir, trailer, model));
  }
  // A CUDA artifact's workspace is on the device (its model.so allocates it).
  if (model.manifest.target != "cpu")
    return Status::ok();
  model.workspace = static_cast<unsigned char *>(
      ::operator new[](std::max<uint64_t>(model.manifest.workspaceBytes, 64), std::align_val_t{64},
                       std::nothrow));
  if (!model.workspace)
    return Status::error(std::string(dir) + ": cannot allocate the workspace of " +
                         std::to_string(model.manifest.workspaceBytes) + " bytes");
  // MOEC_POISON_WORKSPACE=1: NaN bytes before the first run (as the CUDA
  // target's DeviceModel does), so that a read of what nothing wrote shows.
  if (const char *poison = std::getenv("MOEC_POISON_WORKSPACE");
      poison && std::strcmp(poison, "1") == 0)
    std::memset(model.workspace, 0xFF, std::max<uint64_t>(model.manifest.workspaceBytes, 64));
  return Status::ok();
}

/// Matches the given tensors to the declarations by name; fills `ordered` in
/// the manifest's order and checks dtype, rank and static dims. The token
/// count is taken from the first dynamic dim and must agree everywhere.
Status bind(const char *what, const std::vector<TensorDecl> &decls, const moec_tensor *given,
            size_t count, std::vector<const moec_tensor *> &ordered, int64_t &tokens) {
  if (count && !given)
    return Status::error(std::string(what) + "s: null array");
  ordered.assign(decls.size(), nullptr);
  for (size_t i = 0; i < count; ++i) {
    const moec_tensor &tensor = given[i];
    std::string name = tensor.name ? tensor.name : "";
    size_t index = 0;
    while (index < decls.size() && decls[index].name != name)
      ++index;
    if (index == decls.size()) {
      std::string known;
      for (const TensorDecl &decl : decls)
        known += (known.empty() ? "'" : ", '") + decl.name + "'";
      return Status::error(std::string(what) + " '" + name + "' is not one of the model's " +
                           what + "s (" + known + ")");
    }
    if (ordered[index])
      return Status::error(std::string(what) + " '" + name + "' is given twice");
    ordered[index] = &tensor;
    const TensorDecl &decl = decls[index];
    std::string prefix = std::string(what) + " '" + name + "': ";
    if (tensor.dtype != decl.dtype)
      return Status::error(prefix + "dtype " + moec_dtype_name(tensor.dtype) + ", expected " +
                           moec_dtype_name(decl.dtype));
    if (tensor.rank != static_cast<int32_t>(decl.shape.size()) || (tensor.rank && !tensor.shape))
      return Status::error(prefix + "rank " + std::to_string(tensor.rank) + ", expected shape " +
                           formatShape(decl.shape));
    bool empty = false;
    for (int32_t d = 0; d < tensor.rank; ++d) {
      empty |= tensor.shape[d] == 0;
      int64_t size = tensor.shape[d];
      if (decl.shape[d] >= 0 && size != decl.shape[d])
        return Status::error(prefix + "dimension " + std::to_string(d) + " is " +
                             std::to_string(size) + ", expected shape " +
                             formatShape(decl.shape));
      if (decl.shape[d] < 0) {
        if (size < 0)
          return Status::error(prefix + "negative dimension " + std::to_string(d));
        if (tokens >= 0 && size != tokens)
          return Status::error(prefix + "token dimension " + std::to_string(d) + " is " +
                               std::to_string(size) + " but other tensors have " +
                               std::to_string(tokens) + " tokens");
        tokens = size;
      }
    }
    // An empty tensor (0 tokens) may come without storage.
    if (!tensor.data && !empty)
      return Status::error(prefix + "data is null");
  }
  for (size_t i = 0; i < decls.size(); ++i)
    if (!ordered[i])
      return Status::error(std::string(what) + " '" + decls[i].name + "' is missing");
  return Status::ok();
}

/// `stream`: null, or the caller's cudaStream_t for moec_run_async.
Status run(moec_model &model, const moec_tensor *inputs, size_t numInputs,
           moec_tensor *outputs, size_t numOutputs, const void *stream) {
  const Manifest &manifest = model.manifest;
  if (stream && manifest.target != "cuda")
    return Status::error("moec_run_async: a '" + manifest.target +
                         "' artifact runs on the host; call moec_run (only 'cuda' artifacts "
                         "queue on a stream)");
  std::vector<const moec_tensor *> in, out;
  int64_t tokens = -1;
  MOEC_RETURN_IF_ERROR(bind("input", manifest.inputs, inputs, numInputs, in, tokens));
  bool hasTokenDim = tokens >= 0;
  if (tokens > manifest.maxTokens)
    return Status::error(std::to_string(tokens) + " tokens exceed the artifact's max tokens (" +
                         std::to_string(manifest.maxTokens) +
                         "); recompile with a larger --max-tokens");
  MOEC_RETURN_IF_ERROR(bind("output", manifest.outputs, outputs, numOutputs, out, tokens));
  if (!hasTokenDim && tokens >= 0)
    return Status::error("an output has a token dimension but no input has one");
  std::vector<const void *> inputData;
  std::vector<void *> outputData;
  for (const moec_tensor *tensor : in)
    inputData.push_back(tensor->data);
  for (const moec_tensor *tensor : out)
    outputData.push_back(tensor->data);
  std::lock_guard<std::mutex> lock(model.runMutex);
  char error[2048] = "";
  int rc = model.run(model.state, static_cast<const unsigned char *>(model.weights),
                     inputData.data(), outputData.data(), hasTokenDim ? tokens : 0,
                     model.workspace, stream, error, sizeof(error));
  if (rc != 0)
    return Status::error(model.dir + "/" + manifest.library + ": run failed" +
                         (*error ? std::string(": ") + error
                                 : " with code " + std::to_string(rc)));
  return Status::ok();
}

template <typename T> T fail(const Status &status, T value) {
  lastError = status.message();
  return value;
}

const TensorDecl *declAt(const std::vector<TensorDecl> &decls, size_t index) {
  return index < decls.size() ? &decls[index] : nullptr;
}

} // namespace

extern "C" {

moec_model *moec_load(const char *artifact_dir) {
  auto *model = new (std::nothrow) moec_model;
  if (!model)
    return fail<moec_model *>(Status::error("moec_load: out of memory"), nullptr);
  Status status = load(artifact_dir, *model);
  if (!status) {
    delete model;
    return fail<moec_model *>(status, nullptr);
  }
  lastError.clear();
  return model;
}

int moec_run(moec_model *model, const moec_tensor *inputs, size_t num_inputs,
             moec_tensor *outputs, size_t num_outputs) {
  if (!model)
    return fail(Status::error("moec_run: model is null"), -1);
  Status status = run(*model, inputs, num_inputs, outputs, num_outputs, nullptr);
  if (!status)
    return fail(status.withContext(model->dir), -1);
  lastError.clear();
  return 0;
}

int moec_run_async(moec_model *model, const moec_tensor *inputs, size_t num_inputs,
                   moec_tensor *outputs, size_t num_outputs, void *stream) {
  if (!model)
    return fail(Status::error("moec_run_async: model is null"), -1);
  // The generated code takes the stream by address: null there means moec_run,
  // while a null stream here is CUDA's legacy default stream.
  Status status = run(*model, inputs, num_inputs, outputs, num_outputs, &stream);
  if (!status)
    return fail(status.withContext(model->dir), -1);
  lastError.clear();
  return 0;
}

void moec_free(moec_model *model) { delete model; }

const char *moec_last_error(void) { return lastError.c_str(); }

// Generate.cpp's failures (not in moec.h).
__attribute__((visibility("hidden"))) void moec_set_last_error_internal(const char *message) { lastError = message ? message : ""; }

// Generate.cpp's device generation (not in moec.h): 1 where the artifact has
// none (the caller runs its host loop), 0 when done, -1 on error.
__attribute__((visibility("hidden"))) int
moec_generate_on_device_internal(moec_model *model, moec_artifact_generate_args *args) {
  if (!model || !model->generate)
    return 1;
  std::lock_guard<std::mutex> lock(model->runMutex);
  char error[2048] = "";
  if (int rc = model->generate(model->state, args, error, sizeof(error)); rc != 0) {
    lastError = model->dir + "/" + model->manifest.library + ": generation failed" +
                (*error ? std::string(": ") + error : " with code " + std::to_string(rc));
    return -1;
  }
  return 0;
}

const char *moec_target(const moec_model *model) {
  return model ? model->manifest.target.c_str() : nullptr;
}
int64_t moec_max_tokens(const moec_model *model) { return model ? model->manifest.maxTokens : 0; }
int64_t moec_max_batch(const moec_model *model) { return model ? model->manifest.maxBatch : 0; }
int64_t moec_max_seq(const moec_model *model) { return model ? model->manifest.maxSeq : 0; }
int64_t moec_vocab_size(const moec_model *model) {
  return model && model->manifest.maxBatch > 0 ? model->manifest.outputs[0].shape[1] : 0;
}

int moec_reset(moec_model *model, int64_t sequence) {
  if (!model)
    return fail(Status::error("moec_reset: model is null"), -1);
  if (model->manifest.maxBatch == 0)
    return fail(Status::error(model->dir + ": moec_reset: a block has no KV cache"), -1);
  std::lock_guard<std::mutex> lock(model->runMutex);
  model->reset(model->state, sequence < 0 ? -1 : sequence);
  lastError.clear();
  return 0;
}
size_t moec_num_inputs(const moec_model *model) {
  return model ? model->manifest.inputs.size() : 0;
}
size_t moec_num_outputs(const moec_model *model) {
  return model ? model->manifest.outputs.size() : 0;
}

#define MOEC_DECL_ACCESSORS(kind, member)                                                    \
  const char *moec_##kind##_name(const moec_model *model, size_t index) {                   \
    const TensorDecl *decl = model ? declAt(model->manifest.member, index) : nullptr;        \
    return decl ? decl->name.c_str() : nullptr;                                              \
  }                                                                                          \
  moec_dtype moec_##kind##_dtype(const moec_model *model, size_t index) {                   \
    const TensorDecl *decl = model ? declAt(model->manifest.member, index) : nullptr;        \
    return decl ? decl->dtype : MOEC_F32;                                                    \
  }                                                                                          \
  int32_t moec_##kind##_rank(const moec_model *model, size_t index) {                       \
    const TensorDecl *decl = model ? declAt(model->manifest.member, index) : nullptr;        \
    return decl ? static_cast<int32_t>(decl->shape.size()) : -1;                             \
  }                                                                                          \
  const int64_t *moec_##kind##_shape(const moec_model *model, size_t index) {               \
    const TensorDecl *decl = model ? declAt(model->manifest.member, index) : nullptr;        \
    return decl ? decl->shape.data() : nullptr;                                              \
  }
MOEC_DECL_ACCESSORS(input, inputs)
MOEC_DECL_ACCESSORS(output, outputs)
#undef MOEC_DECL_ACCESSORS

const char *moec_dtype_name(moec_dtype dtype) {
  switch (dtype) {
  case MOEC_F32:
    return "f32";
  case MOEC_I32:
    return "i32";
  case MOEC_I64:
    return "i64";
  }
  return "unknown";
}

} // extern "C"
