//===- NcclCommunicator.cpp - all-reduce of device memory with NCCL --------===//
//
// NCCL and the CUDA driver are opened at run time (dlopen), never linked: a
// host without them (or a CPU artifact's run) needs neither, and a missing
// library is an error that says where it was looked for. The CUDA runtime is
// not used either: each model.so carries its own static copy, whose streams
// are driver streams, which NCCL and the driver calls below take as they are.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/dist/NcclCommunicator.h"

#include "Socket.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifdef MOEC_HAVE_NCCL
#include <cuda.h>
#include <nccl.h>

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>
#endif

namespace moec::rt::dist {

#ifndef MOEC_HAVE_NCCL

struct NcclCommunicator::State {};

Status NcclCommunicator::create(TcpStore &store, const NcclOptions &,
                                std::unique_ptr<NcclCommunicator> &) {
  Status status = Status::error("this moec runtime was built without NCCL's header (nccl.h): it "
                                "has no NCCL communicator for CUDA artifacts");
  store.abort(status.message());
  return status;
}
NcclCommunicator::~NcclCommunicator() = default;
Status NcclCommunicator::allReduceSum(float *, size_t, void *) {
  return Status::error("no NCCL communicator");
}
Status NcclCommunicator::allReduceSumBF16(uint16_t *, size_t, void *) {
  return Status::error("no NCCL communicator");
}
Status NcclCommunicator::synchronize(void *) { return Status::error("no NCCL communicator"); }
std::string NcclCommunicator::library() const { return ""; }

#else

namespace {

/// The NCCL and CUDA driver entry points this communicator calls, resolved
/// once per process.
struct Api {
  std::string ncclPath;
  ncclResult_t (*getVersion)(int *);
  ncclResult_t (*getUniqueId)(ncclUniqueId *);
  ncclResult_t (*commInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t *);
  ncclResult_t (*commAbort)(ncclComm_t);
  ncclResult_t (*commFinalize)(ncclComm_t);
  ncclResult_t (*commDestroy)(ncclComm_t);
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                            ncclComm_t, cudaStream_t);
  const char *(*getErrorString)(ncclResult_t);
  const char *(*getLastError)(ncclComm_t);

  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuGetErrorString)(CUresult, const char **);
};

template <typename F> bool resolve(void *library, const char *name, F &out) {
  out = reinterpret_cast<F>(dlsym(library, name));
  return out != nullptr;
}

/// Where pip's NCCL (nvidia-nccl-cu*) lies under a Python prefix.
void addSitePackages(const std::string &prefix, std::vector<std::string> &out) {
  std::string lib = prefix + "/lib";
  DIR *dir = opendir(lib.c_str());
  if (!dir)
    return;
  while (dirent *entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name.rfind("python3", 0) != 0)
      continue;
    for (const char *packages : {"site-packages", "dist-packages"})
      out.push_back(lib + "/" + name + "/" + packages + "/nvidia/nccl/lib/libnccl.so.2");
  }
  closedir(dir);
}

/// The places NCCL is looked for after the loader's own search: pip's
/// package beside the Python environments in sight (a virtual or conda
/// environment, each python3 on PATH), then CUDA toolkits.
std::vector<std::string> ncclCandidates() {
  std::vector<std::string> out, prefixes;
  for (const char *variable : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char *value = std::getenv(variable); value && *value)
      prefixes.push_back(value);
  if (const char *path = std::getenv("PATH")) {
    std::string all = path;
    for (size_t at = 0; at <= all.size();) {
      size_t end = all.find(':', at);
      if (end == std::string::npos)
        end = all.size();
      std::string dir = all.substr(at, end - at);
      if (!dir.empty() && access((dir + "/python3").c_str(), X_OK) == 0) {
        size_t slash = dir.find_last_of('/');
        prefixes.push_back(slash == std::string::npos || slash == 0 ? "/" : dir.substr(0, slash));
      }
      at = end + 1;
    }
  }
  if (const char *home = std::getenv("HOME"))
    prefixes.push_back(std::string(home) + "/.local");
  prefixes.insert(prefixes.end(), {"/usr/local", "/usr"});
  for (const std::string &prefix : prefixes)
    addSitePackages(prefix, out);
  std::vector<std::string> toolkits;
  if (const char *cuda = std::getenv("CUDA_HOME"))
    toolkits.push_back(cuda);
  toolkits.push_back("/usr/local/cuda");
  for (const std::string &toolkit : toolkits)
    for (const char *lib : {"/lib/libnccl.so.2", "/lib64/libnccl.so.2"})
      out.push_back(toolkit + lib);
  return out;
}

/// Opens NCCL: MOEC_NCCL_LIBRARY when set (that file alone), else
/// libnccl.so.2 through the loader's search (LD_LIBRARY_PATH, the cache, a
/// copy already loaded, say by torch), else the candidates above.
Status openNccl(void *&library, std::string &path) {
  if (const char *given = std::getenv("MOEC_NCCL_LIBRARY"); given && *given) {
    library = dlopen(given, RTLD_NOW | RTLD_LOCAL);
    if (!library)
      return Status::error(std::string("cannot load NCCL from MOEC_NCCL_LIBRARY=") + given + ": " +
                           dlerror());
    path = given;
    return Status::ok();
  }
  library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (library) {
    path = "libnccl.so.2";
    return Status::ok();
  }
  std::string searched = "libnccl.so.2 on the loader's path";
  for (const std::string &candidate : ncclCandidates()) {
    if (access(candidate.c_str(), R_OK) != 0)
      continue;
    searched += ", " + candidate;
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) {
      path = candidate;
      return Status::ok();
    }
    searched += std::string(" (") + dlerror() + ")";
  }
  return Status::error("NCCL (libnccl.so.2) not found: looked for " + searched +
                       ", and in pip's nvidia-nccl package beside each python3 on PATH and "
                       "CUDA toolkits; set MOEC_NCCL_LIBRARY to its path");
}

Status loadApi(Api &api) {
  void *nccl = nullptr;
  MOEC_RETURN_IF_ERROR(openNccl(nccl, api.ncclPath));
  bool ok = resolve(nccl, "ncclGetVersion", api.getVersion) &&
            resolve(nccl, "ncclGetUniqueId", api.getUniqueId) &&
            resolve(nccl, "ncclCommInitRankConfig", api.commInitRankConfig) &&
            resolve(nccl, "ncclCommGetAsyncError", api.commGetAsyncError) &&
            resolve(nccl, "ncclCommAbort", api.commAbort) &&
            resolve(nccl, "ncclCommFinalize", api.commFinalize) &&
            resolve(nccl, "ncclCommDestroy", api.commDestroy) &&
            resolve(nccl, "ncclAllReduce", api.allReduce) &&
            resolve(nccl, "ncclGetErrorString", api.getErrorString) &&
            resolve(nccl, "ncclGetLastError", api.getLastError);
  if (!ok)
    return Status::error(api.ncclPath + " lacks NCCL's " + dlerror() +
                         " (NCCL 2.18 or later is needed)");
  int version = 0;
  if (api.getVersion(&version) != ncclSuccess || version < 21800)
    return Status::error(api.ncclPath + " is NCCL " + std::to_string(version) +
                         "; NCCL 2.18 or later is needed");
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda)
    return Status::error(std::string("no CUDA driver (libcuda.so.1): ") + dlerror());
  ok = resolve(cuda, "cuInit", api.cuInit) && resolve(cuda, "cuDeviceGet", api.cuDeviceGet) &&
       resolve(cuda, "cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain) &&
       resolve(cuda, "cuDevicePrimaryCtxRelease_v2", api.cuDevicePrimaryCtxRelease) &&
       resolve(cuda, "cuCtxSetCurrent", api.cuCtxSetCurrent) &&
       resolve(cuda, "cuEventCreate", api.cuEventCreate) &&
       resolve(cuda, "cuEventDestroy_v2", api.cuEventDestroy) &&
       resolve(cuda, "cuEventRecord", api.cuEventRecord) &&
       resolve(cuda, "cuEventQuery", api.cuEventQuery) &&
       resolve(cuda, "cuStreamIsCapturing", api.cuStreamIsCapturing) &&
       resolve(cuda, "cuStreamCreate", api.cuStreamCreate) &&
       resolve(cuda, "cuStreamDestroy_v2", api.cuStreamDestroy) &&
       resolve(cuda, "cuMemAlloc_v2", api.cuMemAlloc) &&
       resolve(cuda, "cuMemFree_v2", api.cuMemFree) &&
       resolve(cuda, "cuMemsetD32Async", api.cuMemsetD32Async) &&
       resolve(cuda, "cuGetErrorString", api.cuGetErrorString);
  if (!ok)
    return Status::error(std::string("the CUDA driver lacks ") + dlerror());
  return Status::ok();
}

/// The process's API, loaded on first use; the same error every time after a
/// failure.
const Api *api(Status &status) {
  static Api loaded{};
  static Status outcome = loadApi(loaded);
  status = outcome;
  return outcome.isOk() ? &loaded : nullptr;
}

} // namespace

struct NcclCommunicator::State {
  const Api *api = nullptr;
  ncclComm_t comm = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUevent done = nullptr;
  NcclOptions options;
  std::string broken; // the first error; "" while healthy
  uint64_t calls = 0;
};

namespace {

std::string ncclText(const Api &api, ncclResult_t result, ncclComm_t comm) {
  std::string text = api.getErrorString(result);
  const char *last = api.getLastError(comm);
  if (last && *last)
    text += std::string(" (") + last + ")";
  return text;
}

Status cuCheck(const Api &api, CUresult result, const char *what) {
  if (result == CUDA_SUCCESS)
    return Status::ok();
  const char *text = nullptr;
  api.cuGetErrorString(result, &text);
  return Status::error(std::string(what) + " failed: CUDA driver error " + std::to_string(result) +
                       (text ? std::string(": ") + text : std::string()));
}

/// Polls the communicator until it leaves ncclInProgress (and, if `event`,
/// until the event completes), or an error, or the deadline.
Status poll(const Api &api, ncclComm_t comm, CUevent event, const Deadline &deadline,
            std::chrono::milliseconds timeout, const char *what) {
  for (unsigned spins = 0;; ++spins) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = api.commGetAsyncError(comm, &state);
    if (rc != ncclSuccess)
      return Status::error(std::string("ncclCommGetAsyncError failed: ") + ncclText(api, rc, comm));
    if (state != ncclSuccess && state != ncclInProgress)
      return Status::error(std::string(what) + ": NCCL error: " + ncclText(api, state, comm));
    bool finished = state == ncclSuccess;
    if (finished && event) {
      CUresult query = api.cuEventQuery(event);
      if (query != CUDA_SUCCESS && query != CUDA_ERROR_NOT_READY)
        return cuCheck(api, query, "cuEventQuery");
      finished = query == CUDA_SUCCESS;
    }
    if (finished)
      return Status::ok();
    if (deadline.expired())
      return Status::error(std::string(what) + ": not complete after " + formatSeconds(timeout) +
                           " (a peer stalled or died)");
    // Spin briefly (all-reduces of a decode step take microseconds), then yield.
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

} // namespace

/// A failed call leaves the ranks out of step: the communicator is aborted
/// (which also ends a collective that waits for a dead peer) and stays failed.
static Status abortOnError(NcclCommunicator::State &state, Status status,
                           const std::string &where) {
  if (status.isOk())
    return status;
  state.broken = status.message();
  if (state.comm)
    (void)state.api->commAbort(state.comm);
  state.comm = nullptr;
  return status.withContext(where);
}

Status NcclCommunicator::create(TcpStore &store, const NcclOptions &options,
                                std::unique_ptr<NcclCommunicator> &out) {
  const int rank = store.rank(), size = store.worldSize();
  std::string where = "NCCL communicator setup (rank " + std::to_string(rank) + " of " +
                      std::to_string(size) + ", device " + std::to_string(options.device) + ")";
  std::unique_ptr<NcclCommunicator> result(new NcclCommunicator());
  result->rank_ = rank;
  result->size_ = size;
  result->state_ = std::make_unique<State>();
  State &state = *result->state_;
  state.options = options;
  std::string prefix = store.nextPrefix("nccl");

  auto setUp = [&]() -> Status {
    Deadline deadline(options.timeout);
    // NVLink multicast (NVLS) stays off unless the user set it.
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    Status loaded = Status::ok();
    state.api = api(loaded);
    MOEC_RETURN_IF_ERROR(loaded);
    const Api &a = *state.api;
    // The device's primary context, current on this thread: the one the
    // CUDA runtimes (NCCL's, each model.so's) use for that device too.
    MOEC_RETURN_IF_ERROR(cuCheck(a, a.cuInit(0), "cuInit"));
    MOEC_RETURN_IF_ERROR(cuCheck(a, a.cuDeviceGet(&state.device, options.device), "cuDeviceGet"));
    MOEC_RETURN_IF_ERROR(cuCheck(a, a.cuDevicePrimaryCtxRetain(&state.context, state.device),
                                 "cuDevicePrimaryCtxRetain"));
    MOEC_RETURN_IF_ERROR(cuCheck(a, a.cuCtxSetCurrent(state.context), "cuCtxSetCurrent"));
    MOEC_RETURN_IF_ERROR(
        cuCheck(a, a.cuEventCreate(&state.done, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    ncclUniqueId id;
    if (rank == 0) {
      ncclResult_t rc = a.getUniqueId(&id);
      if (rc != ncclSuccess)
        return Status::error("ncclGetUniqueId failed: " + ncclText(a, rc, nullptr));
      MOEC_RETURN_IF_ERROR(
          store.set(prefix + "unique-id", std::string(reinterpret_cast<char *>(&id), sizeof(id))));
    } else {
      std::string bytes;
      MOEC_RETURN_IF_ERROR(store.get(prefix + "unique-id", bytes,
                                     std::chrono::milliseconds(deadline.remainingMs())));
      if (bytes.size() != sizeof(id))
        return Status::error("NCCL's unique id in the store has " + std::to_string(bytes.size()) +
                             " bytes, not " + std::to_string(sizeof(id)));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t rc = a.commInitRankConfig(&state.comm, size, id, rank, &config);
    if (rc != ncclSuccess && rc != ncclInProgress)
      return Status::error("ncclCommInitRankConfig failed: " + ncclText(a, rc, state.comm));
    MOEC_RETURN_IF_ERROR(
        poll(a, state.comm, nullptr, deadline, options.timeout, "ncclCommInitRankConfig"));
    // One all-reduce of one value now, eagerly: NCCL connects the ranks and
    // sets up its buffers on the first collective, which must not happen
    // while a model's CUDA graph is captured; and every rank has then come.
    CUstream stream = nullptr;
    CUdeviceptr one = 0;
    MOEC_RETURN_IF_ERROR(cuCheck(a, a.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                                 "cuStreamCreate"));
    Status warm = cuCheck(a, a.cuMemAlloc(&one, sizeof(float)), "cuMemAlloc");
    if (warm)
      warm = cuCheck(a, a.cuMemsetD32Async(one, 0, 1, stream), "cuMemsetD32Async");
    if (warm) {
      void *data = reinterpret_cast<void *>(one);
      ncclResult_t sum = a.allReduce(data, data, 1, ncclFloat, ncclSum, state.comm,
                                     reinterpret_cast<cudaStream_t>(stream));
      if (sum != ncclSuccess && sum != ncclInProgress)
        warm = Status::error("the first ncclAllReduce failed: " + ncclText(a, sum, state.comm));
    }
    if (warm)
      warm = cuCheck(a, a.cuEventRecord(state.done, stream), "cuEventRecord");
    if (warm)
      warm = poll(a, state.comm, state.done, deadline, options.timeout, "the first ncclAllReduce");
    if (one)
      (void)a.cuMemFree(one);
    (void)a.cuStreamDestroy(stream);
    return warm;
  };
  Status status = setUp();
  if (!status.isOk()) {
    state.broken = status.message();
    status = status.withContext(where);
    store.abort(status.message());
    return status; // the destructor aborts what was made
  }
  out = std::move(result);
  return Status::ok();
}

NcclCommunicator::~NcclCommunicator() {
  if (!state_ || !state_->api)
    return;
  State &state = *state_;
  const Api &a = *state.api;
  if (state.comm) {
    bool clean = false;
    if (state.broken.empty() && a.commFinalize(state.comm) == ncclSuccess)
      clean = poll(a, state.comm, nullptr, Deadline(state.options.timeout), state.options.timeout,
                   "ncclCommFinalize")
                  .isOk();
    if (clean)
      (void)a.commDestroy(state.comm);
    else
      (void)a.commAbort(state.comm);
  }
  if (state.done)
    (void)a.cuEventDestroy(state.done);
  if (state.context)
    (void)a.cuDevicePrimaryCtxRelease(state.device);
}

Status NcclCommunicator::allReduce(void *data, size_t count, int dtype, void *stream) {
  State &state = *state_;
  uint64_t call = state.calls++;
  std::string where = "NCCL all-reduce #" + std::to_string(call) + " of " +
                      std::to_string(count) + (dtype == 0 ? " f32" : " bf16") + " values (rank " +
                      std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  if (!state.broken.empty())
    return Status::error(where + ": the communicator failed earlier: " + state.broken);
  const Api &a = *state.api;
  auto s = static_cast<CUstream>(stream);
  auto run = [&]() -> Status {
    Deadline deadline(state.options.timeout);
    // The caller's thread may not have made the device's context current.
    MOEC_RETURN_IF_ERROR(cuCheck(a, a.cuCtxSetCurrent(state.context), "cuCtxSetCurrent"));
    ncclResult_t rc = a.allReduce(data, data, count, dtype == 0 ? ncclFloat : ncclBfloat16,
                                  ncclSum, state.comm, reinterpret_cast<cudaStream_t>(s));
    if (rc != ncclSuccess && rc != ncclInProgress)
      return Status::error("ncclAllReduce failed: " + ncclText(a, rc, state.comm));
    MOEC_RETURN_IF_ERROR(
        poll(a, state.comm, nullptr, deadline, state.options.timeout, "ncclAllReduce (enqueue)"));
    if (!state.options.watch)
      return Status::ok();
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    MOEC_RETURN_IF_ERROR(cuCheck(a, a.cuStreamIsCapturing(s, &capture), "cuStreamIsCapturing"));
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
      return Status::ok(); // a graph's node: synchronize() watches its replay
    MOEC_RETURN_IF_ERROR(cuCheck(a, a.cuEventRecord(state.done, s), "cuEventRecord"));
    return poll(a, state.comm, state.done, deadline, state.options.timeout, "ncclAllReduce");
  };
  return abortOnError(state, run(), where);
}

Status NcclCommunicator::allReduceSum(float *data, size_t count, void *stream) {
  return allReduce(data, count, 0, stream);
}

Status NcclCommunicator::allReduceSumBF16(uint16_t *data, size_t count, void *stream) {
  return allReduce(data, count, 1, stream);
}

Status NcclCommunicator::synchronize(void *stream) {
  State &state = *state_;
  std::string where = "NCCL synchronize (rank " + std::to_string(rank_) + ")";
  if (!state.broken.empty())
    return Status::error(where + ": the communicator failed earlier: " + state.broken);
  const Api &a = *state.api;
  auto s = static_cast<CUstream>(stream);
  Status status = cuCheck(a, a.cuCtxSetCurrent(state.context), "cuCtxSetCurrent");
  if (status)
    status = cuCheck(a, a.cuEventRecord(state.done, s), "cuEventRecord");
  if (status)
    status = poll(a, state.comm, state.done, Deadline(state.options.timeout),
                  state.options.timeout, "the stream's work");
  return abortOnError(state, status, where);
}

std::string NcclCommunicator::library() const { return state_->api->ncclPath; }

#endif // MOEC_HAVE_NCCL

} // namespace moec::rt::dist
