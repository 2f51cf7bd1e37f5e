//===- PersistentSmLimit.cpp - SMs a persistent GEMM may take -------------===//
//
// CUTLASS's persistent grouped GEMM launches one CTA per SM (clusters of one)
// and keeps each for its whole run, so a second persistent GEMM queued beside
// it on another stream waits for SMs instead of sharing them. A limit sizes
// the grids of the GEMMs launched on this thread to fewer SMs, so that two of
// them can run side by side on disjoint SMs (docs/design.md, "The shared
// expert beside the routed experts").
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/cuda/MoEKernels.h"

#include "GridSize.h"

#include <algorithm>
#include <cmath>

namespace moec::rt::cuda {
namespace {
thread_local int smLimit = 0;
} // namespace

PersistentSmLimit::PersistentSmLimit(int sms) : previous_(smLimit) { smLimit = sms; }
PersistentSmLimit::~PersistentSmLimit() { release(); }
void PersistentSmLimit::release() {
  if (!released_)
    smLimit = previous_;
  released_ = true;
}

int sharedExpertSms(double sharedFlops, double routedWeightBytes) {
  // The routed GEMM streams its weights at about the copy rate; the shared
  // expert's GEMMs run at about 70 % of an SM's share of the bf16 rate and
  // should end within half of that time, so that a slower start or clock
  // still leaves them done before the routed down projection wants every SM.
  double routedSeconds = routedWeightBytes / 4.0e12;
  double flopsPerSm = 0.7 * 685e12 / static_cast<double>(detail::kSMs);
  double sms = std::ceil(sharedFlops / (flopsPerSm * routedSeconds / 2));
  // Beyond a quarter of the SMs the routed GEMM would lose bandwidth, and the
  // shared expert is better run in line (T of several thousand).
  if (!(sms <= static_cast<double>(detail::kSMs / 4)))
    return 0;
  return std::max(1, static_cast<int>(sms));
}

namespace detail {
int persistentSmLimit() { return smLimit; }
} // namespace detail
} // namespace moec::rt::cuda
