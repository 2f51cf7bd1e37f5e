/*===- CommunicatorABI.h - a communicator as a C struct ---------*- C -*-===//
 *
 * How the loader hands a communicator to model.so: plain C, function pointers
 * and an opaque context, so that model.so links neither NCCL nor the
 * distributed layer. The functions return 0 on success; otherwise non-zero,
 * with a NUL-terminated message (truncated to fit) in `error`.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MOEC_RUNTIME_DIST_COMMUNICATORABI_H
#define MOEC_RUNTIME_DIST_COMMUNICATORABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct moec_communicator {
  void *context;
  int rank;
  int size;
  /* data[i] = the sum over ranks, in place; stream: a cudaStream_t, or null
   * for host memory (as the communicator behind it takes). */
  int (*all_reduce_sum_f32)(void *context, float *data, uint64_t count, void *stream,
                            char *error, size_t error_bytes);
  /* The same for bf16 values (their bits). */
  int (*all_reduce_sum_bf16)(void *context, uint16_t *data, uint64_t count, void *stream,
                             char *error, size_t error_bytes);
};

#ifdef __cplusplus
} /* extern "C" */

namespace moec::rt::dist {

class Communicator;

/// Fills `out` to call `communicator`, which must outlive every use of `out`.
void fillCommunicatorABI(Communicator &communicator, moec_communicator &out);

} // namespace moec::rt::dist
#endif

#endif /* MOEC_RUNTIME_DIST_COMMUNICATORABI_H */
