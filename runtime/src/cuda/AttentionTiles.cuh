//===- AttentionTiles.cuh - the attention kernels' tensor-core pieces -*- C++
//-*-===//
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

/// One warp's 16·M query rows (M m16 tiles): the query as mma A fragments,
/// and the online softmax's state of the 2M rows a thread holds (row r: g +
/// 8(r % 2) of tile r / 2, g = lane / 4): running maximum (base 2), the
/// thread's part of the denominator (summed over the quad at the end) and
/// the unnormalised sums. Each K and V fragment read from shared memory
/// feeds M products. The query's fragments live in registers, or with
/// QueryShared in shared memory (a bf16 [16·M][kKeyStride] tile, read with
/// ldmatrix at each k step), which leaves the registers to M = 2 rows of 128
/// dims.
template <class S, int M = 1, bool QueryShared = false> struct WarpRows {
  static constexpr int kSteps = S::kQuery / 16, kRows = 2 * M;
  uint32_t q[QueryShared ? 1 : M][QueryShared ? 1 : kSteps][4];
  float o[M][S::kValue / 8][4];
  float m[kRows], l[kRows];
  const bf16 *qTile = nullptr;

  /// Row r's query is `row[r]` (null: zeros); with QueryShared it is
  /// rounded into `tile` (the warp's own rows), else into registers.
  __device__ void loadQuery(const float *const (&row)[kRows], bf16 *tile = nullptr) {
    const int lane = threadIdx.x % 32, c = lane % 4;
#pragma unroll
    for (int mt = 0; mt < M; ++mt)
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) {
        float2 a = {0, 0}, b = {0, 0}, a8 = {0, 0}, b8 = {0, 0};
        int d = ks * 16 + 2 * c;
        if (row[2 * mt]) {
          a = *reinterpret_cast<const float2 *>(row[2 * mt] + d);
          a8 = *reinterpret_cast<const float2 *>(row[2 * mt] + d + 8);
        }
        if (row[2 * mt + 1]) {
          b = *reinterpret_cast<const float2 *>(row[2 * mt + 1] + d);
          b8 = *reinterpret_cast<const float2 *>(row[2 * mt + 1] + d + 8);
        }
        if constexpr (QueryShared) {
          bf16 *top = tile + (mt * 16 + lane / 4) * S::kKeyStride + d;
          bf16 *bottom = top + 8 * S::kKeyStride;
          *reinterpret_cast<uint32_t *>(top) = packBf16(a.x, a.y);
          *reinterpret_cast<uint32_t *>(bottom) = packBf16(b.x, b.y);
          *reinterpret_cast<uint32_t *>(top + 8) = packBf16(a8.x, a8.y);
          *reinterpret_cast<uint32_t *>(bottom + 8) = packBf16(b8.x, b8.y);
        } else {
          q[mt][ks][0] = packBf16(a.x, a.y);
          q[mt][ks][1] = packBf16(b.x, b.y);
          q[mt][ks][2] = packBf16(a8.x, a8.y);
          q[mt][ks][3] = packBf16(b8.x, b8.y);
        }
      }
    if constexpr (QueryShared) {
      qTile = tile;
      __syncwarp(); // ldmatrix reads the other lanes' writes
    }
#pragma unroll
    for (int mt = 0; mt < M; ++mt)
#pragma unroll
      for (int j = 0; j < S::kValue / 8; ++j)
        o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.0f;
    }
  }

  /// Attends to a tile of N positions from `first` (K [N][kKeyStride], V
  /// [N][kValueStride] in shared memory). `allowed(r, p)`: whether the
  /// thread's row r sees position p; asked only where `masked`.
  template <int N, class Allowed>
  __device__ __forceinline__ void attend(const bf16 *kTile, const bf16 *vTile, int first,
                                         bool masked, float scaleLog2, Allowed allowed) {
    const int lane = threadIdx.x % 32, c = lane % 4;
    float s[M][N / 8][4];
#pragma unroll
    for (int mt = 0; mt < M; ++mt)
#pragma unroll
      for (int nt = 0; nt < N / 8; ++nt)
        s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
    for (int k0 = 0; k0 < S::kQuery; k0 += 16) {
      // The query's fragments of the k step.
      uint32_t a[M][4];
#pragma unroll
      for (int mt = 0; mt < M; ++mt) {
        if constexpr (QueryShared) {
          ldmatrix4(a[mt], qTile + (mt * 16 + lane % 16) * S::kKeyStride + k0 + (lane / 16) * 8);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            a[mt][e] = q[mt][k0 / 16][e];
        }
      }
#pragma unroll
      for (int nt = 0; nt < N / 8; nt += 2) {
        // Matrices (positions (nt + i / 2)·8.., dims k0 + 8(i % 2)) for i =
        // 0..3.
        uint32_t b[4];
        ldmatrix4(b, kTile + (nt * 8 + (lane / 16) * 8 + lane % 8) * S::kKeyStride + k0 +
                         (lane / 8 % 2) * 8);
#pragma unroll
        for (int mt = 0; mt < M; ++mt) {
          mma(s[mt][nt], a[mt], b[0], b[1]);
          mma(s[mt][nt + 1], a[mt], b[2], b[3]);
        }
      }
    }
    // The maxima of the raw scores (scaleLog2 > 0 keeps the order); each
    // weight is then one FFMA and one MUFU.EX2: 2^(s·scaleLog2 - base).
    float base[kRows];
#pragma unroll
    for (int mt = 0; mt < M; ++mt) {
      float raw[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (masked && !allowed(2 * mt + e / 2, first + nt * 8 + 2 * c + (e % 2)))
            s[mt][nt][e] = -INFINITY;
          raw[e / 2] = fmaxf(raw[e / 2], s[mt][nt][e]);
        }
      float rescale[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = 2 * mt + i;
        raw[i] = fmaxf(raw[i], __shfl_xor_sync(0xffffffffu, raw[i], 1));
        raw[i] = fmaxf(raw[i], __shfl_xor_sync(0xffffffffu, raw[i], 2));
        float top = fmaxf(m[r], raw[i] * scaleLog2);
        // A row that has seen nothing yet keeps -inf: exponents from 0.
        base[r] = top == -INFINITY ? 0.0f : top;
        rescale[i] = exp2Approx(m[r] - base[r]);
        m[r] = top;
        l[r] *= rescale[i];
      }
#pragma unroll
      for (int j = 0; j < S::kValue / 8; ++j) {
        o[mt][j][0] *= rescale[0], o[mt][j][1] *= rescale[0];
        o[mt][j][2] *= rescale[1], o[mt][j][3] *= rescale[1];
      }
    }
#pragma unroll
    for (int kt = 0; kt < N / 16; ++kt) {
      uint32_t p[M][4];
#pragma unroll
      for (int mt = 0; mt < M; ++mt) {
        float e[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          e[i] = exp2Approx(fmaf(s[mt][2 * kt][i], scaleLog2, -base[2 * mt + i / 2]));
          e[4 + i] = exp2Approx(fmaf(s[mt][2 * kt + 1][i], scaleLog2, -base[2 * mt + i / 2]));
        }
        l[2 * mt] += e[0] + e[1] + e[4] + e[5];
        l[2 * mt + 1] += e[2] + e[3] + e[6] + e[7];
        p[mt][0] = packBf16(e[0], e[1]);
        p[mt][1] = packBf16(e[2], e[3]);
        p[mt][2] = packBf16(e[4], e[5]);
        p[mt][3] = packBf16(e[6], e[7]);
      }
      // Matrices (positions kt·16 + 8(i % 2).., dims d0 + 8(i / 2)),
      // transposed.
      const bf16 *row =
          vTile + (kt * 16 + (lane / 8 % 2) * 8 + lane % 8) * S::kValueStride + (lane / 16) * 8;
#pragma unroll
      for (int d0 = 0; d0 < S::kValue; d0 += 16) {
        uint32_t b[4];
        ldmatrix4Trans(b, row + d0);
#pragma unroll
        for (int mt = 0; mt < M; ++mt) {
          mma(o[mt][d0 / 8], p[mt], b[0], b[1]);
          mma(o[mt][d0 / 8 + 1], p[mt], b[2], b[3]);
        }
      }
    }
  }

  /// The denominators summed over the quad (every thread of it holds the sum).
  __device__ void finishDenominators() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
  }

  /// Row r's output (valueDim floats at `out`), normalised, with the sink
  /// (natural log, null: none) taking its share of the denominator.
  __device__ void store(int r, float *out, const float *sink) const {
    const int c = threadIdx.x % 4, mt = r / 2, i = r % 2;
    float top = m[r], total = l[r];
    if (sink) {
      float s = *sink * kLog2e, both = fmaxf(top, s);
      total = total * exp2f(top - both) + exp2f(s - both);
      top = both;
    }
    // A row that saw no position has no sum (o is 0): zeros, not 0 / 0.
    float factor = m[r] == -INFINITY || !(total > 0.0f) ? 0.0f : exp2f(m[r] - top) / total;
#pragma unroll
    for (int j = 0; j < S::kValue / 8; ++j)
      *reinterpret_cast<float2 *>(out + j * 8 + 2 * c) =
          make_float2(o[mt][j][2 * i] * factor, o[mt][j][2 * i + 1] * factor);
  }
};

/// Copies rows [0, N) of positions first.. (clamped to `last`, whose rows are
/// the sequence's) of one KV head into shared memory: keys [N][kKeyStride]
/// (the head's Dk columns, then the shared Dr), values [N][kValueStride].
/// Threads threads from `thread`, 16 bytes each per copy. Where Threads is a
/// multiple of a row's 16-byte chunks, a thread keeps one column and steps
/// over rows (one address to carry across tiles, not one per copy).
template <int Chunks, int N, int Threads, int Stride, class Source>
__device__ __forceinline__ void copyRows(bf16 *tile, int first, int last, int thread,
                                         Source source) {
  if constexpr (Threads % Chunks == 0) {
    constexpr int kStep = Threads / Chunks;
    const int r0 = thread / Chunks, column = thread % Chunks * 8;
#pragma unroll
    for (int r = r0; r < N; r += kStep)
      copyAsync16(tile + r * Stride + column, source(min(first + r, last), column));
  } else {
    for (int i = thread; i < N * Chunks; i += Threads) {
      int r = i / Chunks, column = i % Chunks * 8;
      copyAsync16(tile + r * Stride + column, source(min(first + r, last), column));
    }
  }
}

template <class S, int N, int Dk, int Threads>
__device__ __forceinline__ void
loadTile(bf16 *kTile, bf16 *vTile, const bf16 *keyRows, const bf16 *valueRows, int64_t keyColumns,
         int64_t sharedColumn, int64_t valueColumns, int first, int last, int thread) {
  copyRows<S::kQuery / 8, N, Threads, S::kKeyStride>(
      kTile, first, last, thread, [&](int64_t p, int column) {
        return keyRows + p * keyColumns + (column < Dk ? column : sharedColumn + (column - Dk));
      });
  copyRows<S::kValue / 8, N, Threads, S::kValueStride>(
      vTile, first, last, thread,
      [&](int64_t p, int column) { return valueRows + p * valueColumns + column; });
}

} // namespace moec::rt::cuda::tiles

#endif // MOEC_RUNTIME_SRC_CUDA_ATTENTIONTILES_CUH
