//===- FaultInjection.cu - CUDA faults on request, for the fault tests ----===//
//
// MOEC_INJECT_CUDA_FAULT=KIND:N makes the N-th run (1-based) of every CUDA
// model of the process fail at its start, as a kernel of the run would:
//   launch           a launch with an empty grid (refused at launch,
//                    the context stays usable, the next run must work)
//   illegal-address  a kernel that writes to address 8 (cudaErrorIllegalAddress:
//                    sticky, the context is lost, every later run must say so)
// test/Codegen/check-cuda-faults.py drives both. Unset, nothing is injected.
// The variable is read once, when the model is created, not on every run.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/Artifact.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace moec::rt::cuda {
namespace {

__global__ void writeOne(float *target) { *target = 1.0f; }

} // namespace

Status faultPlanFromEnvironment(FaultPlan &plan) {
  plan = FaultPlan{};
  const char *spec = std::getenv("MOEC_INJECT_CUDA_FAULT");
  if (!spec || !*spec)
    return Status::ok();
  const char *colon = std::strchr(spec, ':');
  std::string kind = colon ? std::string(spec, colon) : std::string(spec);
  char *end = nullptr;
  long long at = colon ? std::strtoll(colon + 1, &end, 10) : 0;
  if (!colon || *end != '\0' || at < 1 || (kind != "launch" && kind != "illegal-address"))
    return Status::error(std::string("MOEC_INJECT_CUDA_FAULT='") + spec +
                         "': expected launch:N or illegal-address:N (N >= 1)");
  plan.kind = kind == "launch" ? FaultPlan::Launch : FaultPlan::IllegalAddress;
  plan.run = at;
  return Status::ok();
}

Status injectFault(const FaultPlan &plan, cudaStream_t stream) {
  if (plan.kind == FaultPlan::Launch) {
    writeOne<<<dim3(0), 1, 0, stream>>>(nullptr);
    MOEC_CUDA_TRY(cudaGetLastError());
  } else if (plan.kind == FaultPlan::IllegalAddress) {
    writeOne<<<1, 1, 0, stream>>>(reinterpret_cast<float *>(8));
    MOEC_CUDA_TRY(cudaGetLastError());
    MOEC_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  return Status::error("MOEC_INJECT_CUDA_FAULT: the fault did not happen");
}

} // namespace moec::rt::cuda
