/* CommunicatorABI.h is a C header: this file compiles it as C and calls
 * through the struct as generated code in model.so would
 * (HostCommunicatorTest.cpp). */
#include "moec/runtime/dist/CommunicatorABI.h"

int moecSumThroughCommunicatorABI(const struct moec_communicator *communicator, float *data,
                                  uint64_t count, char *error, size_t error_bytes) {
  return communicator->all_reduce_sum_f32(communicator->context, data, count, NULL, error,
                                          error_bytes);
}
