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

/* struct moec_communicator is the C API's (moec.h), which the loader hands to
 * model.so. */
#include "moec/moec.h"

#ifdef __cplusplus

namespace moec::rt::dist {

class Communicator;

/// Fills `out` to call `communicator`, which must outlive every use of `out`.
void fillCommunicatorABI(Communicator &communicator, moec_communicator &out);

} // namespace moec::rt::dist
#endif

#endif /* MOEC_RUNTIME_DIST_COMMUNICATORABI_H */
