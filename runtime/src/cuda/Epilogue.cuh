//===- Epilogue.cuh - the grouped matmul's fused activation, on the device ===//
//
// One definition of moe.grouped_matmul's epilogue (docs/dialect.md) for every
// CUDA kernel that fuses it: act(gate) * (up + beta) when gated, with the
// gpt-oss clamp (gate <= limit, |up| <= limit) when limit is finite, or
// act(x) alone when not gated.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_EPILOGUE_CUH
#define MOEC_RUNTIME_SRC_CUDA_EPILOGUE_CUH

#include "moec/runtime/KernelParams.h"

namespace moec::rt::cuda::device {

/// 1 / (1 + e^-x), as the CPU computes it: routers rank experts by it, so it
/// must pick the same ones.
__device__ inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/// 1 / (1 + e^-x) with the hardware's exp2 and reciprocal (each within 2 ulp),
/// for activations: expf's range reduction and an IEEE division's slow-path
/// branch made SiLU about 25 instructions per output, and inside CUTLASS's
/// gate/up epilogue that code runs while the tensor cores wait. The
/// difference is far below the bf16 rounding of the result, and within the
/// CPU reference's tolerance.
__device__ inline float sigmoidApprox(float x) {
  // __expf(-x) is ex2.approx(x * -log2 e) without flushing: three more
  // instructions per call to make results below 2^-126 subnormal, which
  // 1 + e^-x rounds away anyway, so the flushing form gives the same bits.
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * -1.44269504088896341f));
  return __fdividef(1.0f, 1.0f + e);
}

__device__ inline float activate(cpu::ActivationKind kind, float alpha, float x) {
  switch (kind) {
  case cpu::ActivationKind::SiLU:
    return x * sigmoidApprox(alpha * x);
  case cpu::ActivationKind::GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case cpu::ActivationKind::ReLU: return x > 0.0f ? x : 0.0f;
  case cpu::ActivationKind::Identity: return x;
  }
  return x;
}

/// The gated epilogue of one output: gate and up already include their biases.
__device__ inline float gatedEpilogue(const cpu::Epilogue &epilogue, float gate, float up) {
  if (isfinite(epilogue.limit)) {
    gate = fminf(gate, epilogue.limit);
    up = fminf(fmaxf(up, -epilogue.limit), epilogue.limit);
  }
  return activate(epilogue.kind, epilogue.alpha, gate) * (up + epilogue.beta);
}

} // namespace moec::rt::cuda::device

#endif // MOEC_RUNTIME_SRC_CUDA_EPILOGUE_CUH
