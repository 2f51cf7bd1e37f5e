//===- Handshake.h - the ranks' agreement before they compute ---*- C++ -*-===//
//
// Every rank publishes what it is about to run (the artifact's identity, the
// expert-parallel size, its rank and world size) in the store; each then
// reads the first worldSize records and refuses, with an error naming the
// difference and the ranks concerned, a different artifact, a different EP or
// world size, a rank claimed twice or missing, or more processes than the
// world size. The first rank that finds a mismatch aborts the store, so the
// ranks still waiting fail at once with its message. (A process beyond the
// world size that joins after the others have passed fails alone and aborts
// the store: they see it at their next wait on the store.)
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIST_HANDSHAKE_H
#define MOEC_RUNTIME_DIST_HANDSHAKE_H

#include "moec/runtime/Status.h"
#include "moec/runtime/dist/TcpStore.h"

#include <string>

namespace moec::rt::dist {

struct HandshakeInfo {
  /// What identifies the artifact (e.g. a hash of its manifest.txt): one
  /// line of at most 512 bytes.
  std::string artifact;
  /// The number of ranks that the experts are split over.
  int epSize = 1;
};

/// Publishes this rank's record (rank and world size: the store's) and checks
/// all ranks' records, waiting at most the store's timeout for them.
Status handshake(TcpStore &store, const HandshakeInfo &info);

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_DIST_HANDSHAKE_H
