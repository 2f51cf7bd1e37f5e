//===- KernelParams.h - what the CPU and CUDA kernels share ----*- C++ -*-===//
//
// The static parameters of the grouped phase's kernels that both targets take
// alike: `#moe.activation` with its gate/up layout (Epilogue) and moe.route's
// routing (Routing). cpu/MoEKernels.h and cuda/MoEKernels.h declare the kernels
// that take them; generated code spells them `Epilogue{...}`, `Routing{...}`.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_KERNELPARAMS_H
#define MOEC_RUNTIME_KERNELPARAMS_H

#include <cstdint>
#include <limits>

namespace moec::rt {

enum class ActivationKind : uint8_t { SiLU, GELU, ReLU, Identity };
enum class GateUpLayout : uint8_t { None, Concatenated, Interleaved };

/// `#moe.activation` with its layout: gated layouts halve the width.
struct Epilogue {
  bool enabled = false;
  ActivationKind kind = ActivationKind::Identity;
  GateUpLayout layout = GateUpLayout::None;
  float alpha = 1.0f, beta = 0.0f, limit = std::numeric_limits<float>::infinity();
};

enum class RoutingKind : uint8_t { SoftmaxTopK, TopKSoftmax, SigmoidGroupTopK };

struct Routing {
  RoutingKind kind = RoutingKind::SoftmaxTopK;
  int topK = 1;
  bool normalize = false;
  int numGroups = 1, topkGroups = 1;
  float scalingFactor = 1.0f;
};

// Each target's kernels name them as their own (generated code says
// moec::rt::cpu::ActivationKind, cuda::Epilogue, ...).
namespace cpu {
using rt::ActivationKind;
using rt::Epilogue;
using rt::GateUpLayout;
using rt::Routing;
using rt::RoutingKind;
} // namespace cpu
namespace cuda {
using rt::ActivationKind;
using rt::Epilogue;
using rt::GateUpLayout;
using rt::Routing;
using rt::RoutingKind;
} // namespace cuda

} // namespace moec::rt

#endif // MOEC_RUNTIME_KERNELPARAMS_H
