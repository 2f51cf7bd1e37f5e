//===- RoutingWeights.h - a token's routing weights from its choices ------===//
//
// moe.route's last step (docs/dialect.md): from the scores of a token's top-k
// choices to its weights -- TopKSoftmax's softmax over the chosen logits, the
// optional normalisation, the scaling factor. One definition for the CPU kernel
// and the CUDA route kernels, so that the two cannot drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_ROUTINGWEIGHTS_H
#define MOEC_RUNTIME_SRC_ROUTINGWEIGHTS_H

#include "moec/runtime/cpu/MoEKernels.h"

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define MOEC_HOST_DEVICE __host__ __device__
#else
#define MOEC_HOST_DEVICE
#endif

namespace moec::rt {

/// w[0..k) holds the scores of the token's choices ids[0..k) (TopKSoftmax
/// ignores them: its weights come from the chosen `logits`); on return, the
/// token's routing weights. The softmax sums in double, as the full softmax of
/// SoftmaxTopK does.
MOEC_HOST_DEVICE inline void finishRoutingWeights(const float *logits, const int32_t *ids,
                                                  const cpu::Routing &routing, float *w) {
  const int k = routing.topK;
  if (routing.kind == cpu::RoutingKind::TopKSoftmax) {
    float maxLogit = logits[ids[0]];
    for (int i = 1; i < k; ++i)
      maxLogit = maxLogit < logits[ids[i]] ? logits[ids[i]] : maxLogit;
    double sum = 0;
    for (int i = 0; i < k; ++i)
      sum += w[i] = expf(logits[ids[i]] - maxLogit);
    for (int i = 0; i < k; ++i)
      w[i] = static_cast<float>(w[i] / sum);
  }
  if (routing.normalize) {
    float sum = 0;
    for (int i = 0; i < k; ++i)
      sum += w[i];
    for (int i = 0; i < k; ++i)
      w[i] /= sum + 1e-20f;
  }
  for (int i = 0; i < k; ++i)
    w[i] *= routing.scalingFactor;
}

} // namespace moec::rt

#endif // MOEC_RUNTIME_SRC_ROUTINGWEIGHTS_H
