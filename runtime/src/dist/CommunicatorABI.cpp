//===- CommunicatorABI.cpp - a communicator as a C struct ------------------===//

#include "moec/runtime/dist/CommunicatorABI.h"

#include "moec/runtime/dist/Communicator.h"

#include <algorithm>
#include <cstring>

namespace moec::rt::dist {
namespace {

int report(const Status &status, char *error, size_t errorBytes) {
  if (status.isOk())
    return 0;
  if (error && errorBytes > 0) {
    size_t n = std::min(status.message().size(), errorBytes - 1);
    std::memcpy(error, status.message().data(), n);
    error[n] = '\0';
  }
  return 1;
}

int allReduceF32(void *context, float *data, uint64_t count, void *stream, char *error,
                 size_t errorBytes) {
  auto *communicator = static_cast<Communicator *>(context);
  return report(communicator->allReduceSum(data, static_cast<size_t>(count), stream), error,
                errorBytes);
}

int allReduceBF16(void *context, uint16_t *data, uint64_t count, void *stream, char *error,
                  size_t errorBytes) {
  auto *communicator = static_cast<Communicator *>(context);
  return report(communicator->allReduceSumBF16(data, static_cast<size_t>(count), stream), error,
                errorBytes);
}

int wait(void *context, void *stream, char *error, size_t errorBytes) {
  return report(static_cast<Communicator *>(context)->synchronize(stream), error, errorBytes);
}

} // namespace

void fillCommunicatorABI(Communicator &communicator, moec_communicator &out) {
  out.context = &communicator;
  out.rank = communicator.rank();
  out.size = communicator.size();
  out.all_reduce_sum_f32 = allReduceF32;
  out.all_reduce_sum_bf16 = allReduceBF16;
  out.wait = wait;
}

} // namespace moec::rt::dist
