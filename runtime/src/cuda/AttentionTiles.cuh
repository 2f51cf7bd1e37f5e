//===- AttentionTiles.cuh - the attention kernels' tensor-core pieces -*- C++ -*-===//
//
// What Attention.cu's split-KV decode and FlashAttention-2 prefill share: the
// instructions (mma.sync m16n8k16 bf16 with f32 accumulation, ldmatrix,
// cp.async, ex2.approx), the head shapes they are built for, one warp's 16
// query rows with their online softmax (WarpRows), and the copy of a K/V
// tile into shared memory. Scores are in base 2: scale · log2 e is folded
// into each weight's exponent.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_ATTENTIONTILES_CUH
#define MOEC_RUNTIME_SRC_CUDA_ATTENTIONTILES_CUH

#include <cuda_bf16.h>

#include <cstdint>

namespace moec::rt::cuda::tiles {

using bf16 = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

/// 2^x in one MUFU.EX2 (2 ulp; -inf gives 0), for the softmax's weights.
__device__ __forceinline__ float exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t sharedAddress(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix4(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(sharedAddress(p)));
}

__device__ __forceinline__ void ldmatrix4Trans(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(sharedAddress(p)));
}

__device__ __forceinline__ void copyAsync16(void *shared, const void *global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sharedAddress(shared)),
               "l"(global));
}

__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::); }

template <int Pending> __device__ __forceinline__ void awaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

/// A two-stage pipeline's step at `tile`: the next tile's copies queued
/// (where there is one), then this tile's awaited (the thread's own copies:
/// a barrier makes the others' visible).
template <class Load> __device__ __forceinline__ void nextTile(int tile, int tiles, Load load) {
  if (tile + 1 < tiles) {
    load(tile + 1);
    awaitCopies<1>();
  } else {
    awaitCopies<0>();
  }
}

/// The head shapes the tensor-core kernels are built for: Dk key columns per
/// KV head, Dr shared ones (MLA's rope key), Dv value columns. Shared-memory
/// rows are padded by 16 bytes, so that ldmatrix's 8 rows fall in distinct
/// banks.
template <int Dk, int Dr, int Dv> struct HeadShape {
  static constexpr int kQuery = Dk + Dr, kValue = Dv;
  static constexpr int kKeyStride = kQuery + 8, kValueStride = Dv + 8;
  static_assert(kQuery % 32 == 0 && Dv % 16 == 0 && Dk % 8 == 0 && Dr % 8 == 0);
};

/// One warp's 16 query rows: the query as mma A fragments, and the online
/// softmax's state of the two rows a thread holds (g and g + 8 of the tile,
/// g = lane / 4): running maximum (base 2), the thread's part of the
/// denominator (summed over the quad at the end) and the unnormalised sums.
template <class S> struct WarpRows {
  uint32_t q[S::kQuery / 16][4];
  float o[S::kValue / 8][4];
  float m[2], l[2];

  /// Rows (g, g + 8) of the tile are `query + offset[i]` (null: zeros).
  __device__ void loadQuery(const float *row0, const float *row1) {
    const int c = threadIdx.x % 4;
#pragma unroll
    for (int ks = 0; ks < S::kQuery / 16; ++ks) {
      float2 a = {0, 0}, b = {0, 0}, a8 = {0, 0}, b8 = {0, 0};
      int d = ks * 16 + 2 * c;
      if (row0) {
        a = *reinterpret_cast<const float2 *>(row0 + d);
        a8 = *reinterpret_cast<const float2 *>(row0 + d + 8);
      }
      if (row1) {
        b = *reinterpret_cast<const float2 *>(row1 + d);
        b8 = *reinterpret_cast<const float2 *>(row1 + d + 8);
      }
      q[ks][0] = packBf16(a.x, a.y);
      q[ks][1] = packBf16(b.x, b.y);
      q[ks][2] = packBf16(a8.x, a8.y);
      q[ks][3] = packBf16(b8.x, b8.y);
    }
#pragma unroll
    for (int j = 0; j < S::kValue / 8; ++j)
      o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
  }

  /// Attends to a tile of N positions from `first` (K [N][kKeyStride], V
  /// [N][kValueStride] in shared memory). `allowed(i, p)`: whether row i (0:
  /// g, 1: g + 8) sees position p; asked only where `masked`.
  template <int N, class Allowed>
  __device__ __forceinline__ void attend(const bf16 *kTile, const bf16 *vTile, int first,
                                         bool masked, float scaleLog2, Allowed allowed) {
    const int lane = threadIdx.x % 32, c = lane % 4;
    float s[N / 8][4];
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      // Matrices (positions nt·8.., dims k0 + 8i) for i = 0..3: two k steps.
      const bf16 *row = kTile + (nt * 8 + lane % 8) * S::kKeyStride + (lane / 8) * 8;
#pragma unroll
      for (int k0 = 0; k0 < S::kQuery; k0 += 32) {
        uint32_t b[4];
        ldmatrix4(b, row + k0);
        mma(s[nt], q[k0 / 16], b[0], b[1]);
        mma(s[nt], q[k0 / 16 + 1], b[2], b[3]);
      }
    }
    // The maxima of the raw scores (scaleLog2 > 0 keeps the order); each
    // weight is then one FFMA and one MUFU.EX2: 2^(s·scaleLog2 - base).
    float raw[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (masked && !allowed(e / 2, first + nt * 8 + 2 * c + (e % 2)))
          s[nt][e] = -INFINITY;
        raw[e / 2] = fmaxf(raw[e / 2], s[nt][e]);
      }
    float base[2], rescale[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      raw[i] = fmaxf(raw[i], __shfl_xor_sync(0xffffffffu, raw[i], 1));
      raw[i] = fmaxf(raw[i], __shfl_xor_sync(0xffffffffu, raw[i], 2));
      float top = fmaxf(m[i], raw[i] * scaleLog2);
      // A row that has seen nothing yet keeps -inf: exponents from 0.
      base[i] = top == -INFINITY ? 0.0f : top;
      rescale[i] = exp2Approx(m[i] - base[i]);
      m[i] = top;
      l[i] *= rescale[i];
    }
#pragma unroll
    for (int j = 0; j < S::kValue / 8; ++j) {
      o[j][0] *= rescale[0], o[j][1] *= rescale[0];
      o[j][2] *= rescale[1], o[j][3] *= rescale[1];
    }
#pragma unroll
    for (int kt = 0; kt < N / 16; ++kt) {
      uint32_t p[4];
      float e[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        e[i] = exp2Approx(fmaf(s[2 * kt][i], scaleLog2, -base[i / 2]));
        e[4 + i] = exp2Approx(fmaf(s[2 * kt + 1][i], scaleLog2, -base[i / 2]));
      }
      l[0] += e[0] + e[1] + e[4] + e[5];
      l[1] += e[2] + e[3] + e[6] + e[7];
      p[0] = packBf16(e[0], e[1]);
      p[1] = packBf16(e[2], e[3]);
      p[2] = packBf16(e[4], e[5]);
      p[3] = packBf16(e[6], e[7]);
      // Matrices (positions kt·16 + 8(i % 2).., dims d0 + 8(i / 2)), transposed.
      const bf16 *row =
          vTile + (kt * 16 + (lane / 8 % 2) * 8 + lane % 8) * S::kValueStride + (lane / 16) * 8;
#pragma unroll
      for (int d0 = 0; d0 < S::kValue; d0 += 16) {
        uint32_t b[4];
        ldmatrix4Trans(b, row + d0);
        mma(o[d0 / 8], p, b[0], b[1]);
        mma(o[d0 / 8 + 1], p, b[2], b[3]);
      }
    }
  }

  /// The denominators summed over the quad (every thread of it holds the sum).
  __device__ void finishDenominators() {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
  }

  /// Row i's output (valueDim floats at `out`), normalised, with the sink
  /// (natural log, null: none) taking its share of the denominator.
  __device__ void store(int i, float *out, const float *sink) const {
    const int c = threadIdx.x % 4;
    float top = m[i], total = l[i];
    if (sink) {
      float s = *sink * kLog2e, both = fmaxf(top, s);
      total = total * exp2f(top - both) + exp2f(s - both);
      top = both;
    }
    // A row that saw no position has no sum (o is 0): zeros, not 0 / 0.
    float factor = m[i] == -INFINITY || !(total > 0.0f) ? 0.0f : exp2f(m[i] - top) / total;
#pragma unroll
    for (int j = 0; j < S::kValue / 8; ++j)
      *reinterpret_cast<float2 *>(out + j * 8 + 2 * c) =
          make_float2(o[j][2 * i] * factor, o[j][2 * i + 1] * factor);
  }
};

/// Copies rows [0, N) of positions first.. (clamped to `last`, whose rows are
/// the sequence's) of one KV head into shared memory: keys [N][kKeyStride]
/// (the head's Dk columns, then the shared Dr), values [N][kValueStride].
/// `threads` threads from `thread`, 16 bytes each per copy.
template <class S, int N, int Dk>
__device__ __forceinline__ void
loadTile(bf16 *kTile, bf16 *vTile, const bf16 *keyRows, const bf16 *valueRows, int64_t keyColumns,
         int64_t sharedColumn, int64_t valueColumns, int first, int last, int thread, int threads) {
  constexpr int kKeyChunks = S::kQuery / 8, kValueChunks = S::kValue / 8;
  for (int i = thread; i < N * kKeyChunks; i += threads) {
    int r = i / kKeyChunks, chunk = i % kKeyChunks;
    int64_t p = min(first + r, last);
    int column = chunk * 8;
    const bf16 *from =
        keyRows + p * keyColumns + (column < Dk ? column : sharedColumn + (column - Dk));
    copyAsync16(kTile + r * S::kKeyStride + column, from);
  }
  for (int i = thread; i < N * kValueChunks; i += threads) {
    int r = i / kValueChunks, chunk = i % kValueChunks;
    int64_t p = min(first + r, last);
    copyAsync16(vTile + r * S::kValueStride + chunk * 8, valueRows + p * valueColumns + chunk * 8);
  }
}

} // namespace moec::rt::cuda::tiles

#endif // MOEC_RUNTIME_SRC_CUDA_ATTENTIONTILES_CUH
