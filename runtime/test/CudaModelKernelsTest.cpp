//===- CudaModelKernelsTest.cpp - CUDA whole-model kernels against float64 -===//
//
// The device twins of ModelKernelsTest.cpp: every kernel on random inputs into
// device outputs poisoned with NaN, against the same float64 references
// (ModelReference.h), every CUDA call checked. Attention runs whole
// generations through a DeviceKVCache, eagerly and replayed from a CUDA graph
// captured once with the positions and sequences in device buffers; the host
// checks (DeviceKVCache::checkStep) give the CPU kernels' messages and leave
// the lengths as they were; out-of-range data on the device gives zero rows
// and leaves the cache as it was.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cpu/ModelKernels.h"
#include "moec/runtime/cpu/ThreadPool.h"
#include "moec/runtime/cuda/ModelKernels.h"

#include "CudaTestUtil.h"
#include "ModelReference.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace moec::rt;
using namespace moec::rt::test;
using cuda::DeviceKVCache;

namespace {

Status queueAttention(DeviceKVCache &cache, int64_t slot, const AttentionShape &s,
                      const DeviceCall &call, const DeviceBuffer &sinks, cudaStream_t stream) {
  return cuda::attention(
      cache, slot, call.query.dataAs<float>(), call.key.dataAs<float>(), call.value.dataAs<float>(),
      s.sharedDim ? call.keyShared.dataAs<float>() : nullptr,
      s.sinks ? sinks.dataAs<float>() : nullptr, call.positions.dataAs<int64_t>(),
      call.rows.dataAs<int64_t>(), call.n, s.heads, s.kvHeads, s.keyDim, s.sharedDim, s.valueDim,
      static_cast<float>(s.scale()), s.window, call.out.dataAs<float>(), stream);
}

void checkOutputs(const AttentionShape &s, const std::vector<Sequence> &seqs,
                  const std::vector<float> &sinks, const std::vector<Token> &tokens,
                  const std::vector<float> &out, const std::string &what) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token &t = tokens[i];
    ASSERT_NO_FATAL_FAILURE(expectClose(refAttention(s, seqs[t.sequence], sinks, t.position),
                                        out.data() + i * s.heads * s.valueDim, 1e-4, 2e-5,
                                        what + ", token " + std::to_string(i)));
  }
}

/// Runs the calls (the host check first, as generated code does) and checks
/// every output row against the cache-free reference.
void runAndCheck(DeviceKVCache &cache, int64_t slot, const AttentionShape &s,
                 const std::vector<Sequence> &seqs, const std::vector<float> &sinks,
                 const std::vector<std::vector<Token>> &calls) {
  DeviceBuffer dSinks = upload(sinks.empty() ? std::vector<float>{0.0f} : sinks);
  for (size_t c = 0; c < calls.size(); ++c) {
    Call call(s, seqs, calls[c]);
    DeviceCall device(s, call);
    DeviceKVCache::TokensCheck check{call.positions.data(), call.rows.data(), slot};
    ASSERT_OK(cache.checkStep(true, device.n, nullptr, 0, &check, 1));
    ASSERT_OK(queueAttention(cache, slot, s, device, dSinks, nullptr));
    ASSERT_OK(synchronize());
    std::vector<float> out = download<float>(device.out, device.n * s.heads * s.valueDim);
    ASSERT_NO_FATAL_FAILURE(
        checkOutputs(s, seqs, sinks, calls[c], out, s.name() + ", call " + std::to_string(c)));
  }
}

Status makeCache(DeviceKVCache &cache, const AttentionShape &s, int64_t maxBatch = kMaxBatch,
                 int64_t maxSeq = kMaxSeq) {
  return cache.create(maxBatch, maxSeq, {{24, 12}, {s.slotKeyColumns(), s.valueColumns()}});
}

class CudaModelKernels : public ::testing::Test {
protected:
  std::mt19937 rng{4321};
};

//===----------------------------------------------------------------------===//
// embedding, rmsNorm, rotary, add
//===----------------------------------------------------------------------===//

TEST_F(CudaModelKernels, EmbeddingCopiesRowsAndZerosIdsOutsideTheTable) {
  int64_t vocab = 37, hidden = 300, n = 11;
  std::vector<float> table = randomVector(vocab * hidden, rng);
  std::vector<int64_t> ids = randomIds(n, vocab, rng);
  ids[4] = vocab;            // outside: zeros on the device
  ids[7] = -1;               // likewise
  ids[8] = int64_t(1) << 40; // likewise
  DeviceBuffer dTable = upload(table), dIds = upload(ids), out = poisoned(4 * n * hidden);
  ASSERT_OK(cuda::embedding(dIds.dataAs<int64_t>(), n, dTable.dataAs<float>(), vocab, hidden,
                            out.dataAs<float>(), nullptr));
  ASSERT_OK(synchronize());
  std::vector<float> got = download<float>(out, n * hidden);
  for (int64_t t = 0; t < n; ++t) {
    bool valid = ids[t] >= 0 && ids[t] < vocab;
    for (int64_t j = 0; j < hidden; ++j)
      ASSERT_EQ(got[t * hidden + j], valid ? table[ids[t] * hidden + j] : 0.0f) << "token " << t;
  }
}

// A bf16 table (its bits) gives f32 rows: each element the bf16 value, exactly
// (the f32 whose top 16 bits are the bf16's, low 16 zero).
TEST_F(CudaModelKernels, EmbeddingBF16WidensRowsExactly) {
  int64_t vocab = 37, hidden = 301, n = 11;
  std::vector<float> values = randomVector(vocab * hidden, rng);
  std::vector<uint16_t> table(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    table[i] = static_cast<uint16_t>(bits >> 16); // any finite bf16 will do
  }
  std::vector<int64_t> ids = randomIds(n, vocab, rng);
  ids[2] = vocab; // outside: zeros
  ids[9] = -3;
  DeviceBuffer dTable = upload(table), dIds = upload(ids), out = poisoned(4 * n * hidden);
  ASSERT_OK(cuda::embeddingBF16(dIds.dataAs<int64_t>(), n, dTable.dataAs<uint16_t>(), vocab,
                                hidden, out.dataAs<float>(), nullptr));
  ASSERT_OK(synchronize());
  std::vector<float> got = download<float>(out, n * hidden);
  for (int64_t t = 0; t < n; ++t) {
    bool valid = ids[t] >= 0 && ids[t] < vocab;
    for (int64_t j = 0; j < hidden; ++j) {
      float expected = 0.0f;
      if (valid) {
        uint32_t bits = static_cast<uint32_t>(table[ids[t] * hidden + j]) << 16;
        std::memcpy(&expected, &bits, 4);
      }
      ASSERT_EQ(got[t * hidden + j], expected) << "token " << t << ", column " << j;
    }
  }
}

TEST_F(CudaModelKernels, RmsNormPerRowAndPerHeadGroup) {
  struct Case {
    int64_t m, k, group;
    float eps, offset;
  };
  for (Case c :
       {Case{7, 48, 48, 1e-6f, 0.0f}, Case{5, 64, 16, 1e-5f, 1.0f}, Case{1, 12, 3, 1e-2f, 0.5f},
        Case{3, 4096, 4096, 1e-6f, 0.0f}, Case{70, 1536, 128, 1e-6f, 0.0f}}) {
    std::string what = "rms_norm " + std::to_string(c.k) + " / group " + std::to_string(c.group);
    std::vector<float> x = randomVector(c.m * c.k, rng, 2.0f), w = randomVector(c.group, rng);
    DeviceBuffer dX = upload(x), dW = upload(w), y = poisoned(4 * c.m * c.k);
    ASSERT_OK(cuda::rmsNorm(dX.dataAs<float>(), c.m, c.k, dW.dataAs<float>(), c.group, c.eps,
                            c.offset, y.dataAs<float>(), nullptr));
    ASSERT_OK(synchronize());
    std::vector<float> got = download<float>(y, c.m * c.k);
    ASSERT_NO_FATAL_FAILURE(expectClose(refRmsNorm(x, c.m, c.k, w, c.group, c.eps, c.offset),
                                        got.data(), 1e-5, 1e-6, what));
    // In place: the same bits.
    ASSERT_OK(cuda::rmsNorm(dX.dataAs<float>(), c.m, c.k, dW.dataAs<float>(), c.group, c.eps,
                            c.offset, dX.dataAs<float>(), nullptr));
    ASSERT_OK(synchronize());
    ASSERT_NO_FATAL_FAILURE(
        expectBitwiseEqual(download<float>(dX, c.m * c.k), got, what + " in place"));
  }
}

TEST_F(CudaModelKernels, RotaryHalvesAndInterleavedPairsAtLargePositions) {
  struct Case {
    int64_t heads, headDim, half, offset;
  };
  std::vector<int64_t> pos{0, 1, 17, 4095, 131071, 1000003, 32767};
  auto n = static_cast<int64_t>(pos.size());
  // A partial rotary inside the head; DeepSeek's rope slice after 128 columns;
  // a full rotary of 128 columns (more pairs than threads).
  for (Case c : {Case{3, 40, 12, 8}, Case{4, 192, 32, 128}, Case{32, 128, 64, 0}}) {
    int64_t columns = c.heads * c.headDim;
    std::vector<float> invFreq(c.half);
    for (int64_t i = 0; i < c.half; ++i)
      invFreq[i] = static_cast<float>(std::pow(1e6, -2.0 * i / (2 * c.half)));
    DeviceBuffer dPos = upload(pos), dFreq = upload(invFreq);
    for (bool interleaved : {false, true}) {
      std::string what = std::string(interleaved ? "rotary interleaved" : "rotary half") +
                         ", head " + std::to_string(c.headDim);
      std::vector<float> x = randomVector(n * columns, rng);
      DeviceBuffer dX = upload(x), y = poisoned(4 * n * columns);
      float scale = 1.25f;
      ASSERT_OK(cuda::rotary(dX.dataAs<float>(), n, columns, dPos.dataAs<int64_t>(),
                             dFreq.dataAs<float>(), c.half, c.headDim, c.offset, interleaved, scale,
                             y.dataAs<float>(), nullptr));
      ASSERT_OK(synchronize());
      std::vector<float> got = download<float>(y, n * columns);
      ASSERT_NO_FATAL_FAILURE(expectClose(
          refRotary(x, n, columns, pos, invFreq, c.headDim, c.offset, interleaved, scale),
          got.data(), 1e-5, 1e-5, what));
      // Columns outside the rotated slice pass through unchanged.
      for (int64_t t = 0; t < n; ++t)
        for (int64_t col = 0; col < columns; ++col) {
          int64_t inHead = col % c.headDim;
          if (inHead < c.offset || inHead >= c.offset + 2 * c.half) {
            ASSERT_EQ(got[t * columns + col], x[t * columns + col]) << what << " column " << col;
          }
        }
      ASSERT_OK(cuda::rotary(dX.dataAs<float>(), n, columns, dPos.dataAs<int64_t>(),
                             dFreq.dataAs<float>(), c.half, c.headDim, c.offset, interleaved, scale,
                             dX.dataAs<float>(), nullptr));
      ASSERT_OK(synchronize());
      ASSERT_NO_FATAL_FAILURE(
          expectBitwiseEqual(download<float>(dX, n * columns), got, what + " in place"));
    }
  }
}

/// The model's norm and rotary shapes at decode and prefill token counts:
/// the float64 reference's tolerance, and the CPU kernel's bits (its double
/// sums and rounding rules, which the CUDA kernels follow; a double sum's
/// order moves its float result only at a float rounding boundary, which
/// these fixed inputs do not reach).
TEST_F(CudaModelKernels, RmsNormAtModelShapesMatchesTheCpuKernel) {
  struct Case {
    int64_t k, group;
    int skew; // floats the input, weight and output start past an aligned buffer
  };
  cpu::ThreadPool pool(4);
  for (int64_t m : {1, 3, 64, 4096})
    for (Case c : {Case{4096, 128, 0}, Case{512, 128, 0}, Case{2048, 64, 0}, Case{2048, 2048, 0},
                   Case{2880, 2880, 0}, Case{4096, 4096, 0}, Case{7168, 7168, 0},
                   Case{512, 128, 1}, Case{2048, 2048, 1}, Case{2050, 1025, 0}}) {
      if (m == 4096 && c.k == 7168)
        continue; // 117 MB: the 2048 and 4096 rows cover the block path's prefill
      std::string what = "rms_norm m " + std::to_string(m) + ", k " + std::to_string(c.k) +
                         " / group " + std::to_string(c.group) +
                         (c.skew ? ", unaligned" : "");
      std::vector<float> x = randomVector(m * c.k, rng, 3.0f), w = randomVector(c.group, rng);
      std::vector<float> paddedX(c.skew, 0.0f), paddedW(c.skew, 0.0f);
      paddedX.insert(paddedX.end(), x.begin(), x.end());
      paddedW.insert(paddedW.end(), w.begin(), w.end());
      DeviceBuffer dX = upload(paddedX), dW = upload(paddedW),
                   y = poisoned(4 * (m * c.k + c.skew));
      ASSERT_OK(cuda::rmsNorm(dX.dataAs<float>() + c.skew, m, c.k, dW.dataAs<float>() + c.skew,
                              c.group, 1e-6f, 0.0f, y.dataAs<float>() + c.skew, nullptr));
      ASSERT_OK(synchronize());
      std::vector<float> got = download<float>(y, m * c.k + c.skew);
      got.erase(got.begin(), got.begin() + c.skew);
      ASSERT_NO_FATAL_FAILURE(
          expectClose(refRmsNorm(x, m, c.k, w, c.group, 1e-6, 0.0), got.data(), 1e-5, 1e-6, what));
      std::vector<float> cpu(m * c.k);
      cpu::rmsNorm(pool, x.data(), m, c.k, w.data(), c.group, 1e-6f, 0.0f, cpu.data());
      ASSERT_NO_FATAL_FAILURE(expectBitwiseEqual(got, cpu, what + " vs the CPU kernel"));
    }
}

/// moe.add_rms_norm in one launch: the sum and the norm have the bits of the
/// CPU kernel (add, then rmsNorm), on the warp path (groups of 128), the block
/// path (2048, 2880), unaligned rows, and with the sum written over the first
/// input (the residual stream updated in place). Outputs poisoned first.
TEST_F(CudaModelKernels, AddRmsNormIsAddThenRmsNormBitForBit) {
  struct Case {
    int64_t k, group;
    int skew;
    bool inPlace;
  };
  cpu::ThreadPool pool(4);
  for (int64_t m : {1, 3, 64, 4096})
    for (Case c : {Case{4096, 128, 0, false}, Case{2048, 2048, 0, false},
                   Case{2880, 2880, 0, true}, Case{2048, 2048, 1, false},
                   Case{512, 128, 1, true}}) {
      std::string what = "add_rms_norm m " + std::to_string(m) + ", k " + std::to_string(c.k) +
                         " / group " + std::to_string(c.group) + (c.skew ? ", unaligned" : "") +
                         (c.inPlace ? ", sum in place" : "");
      std::vector<float> a = randomVector(m * c.k, rng, 3.0f), b = randomVector(m * c.k, rng),
                         w = randomVector(c.group, rng);
      auto padded = [&](const std::vector<float> &v) {
        std::vector<float> p(c.skew, 0.0f);
        p.insert(p.end(), v.begin(), v.end());
        return p;
      };
      DeviceBuffer dA = upload(padded(a)), dB = upload(padded(b)), dW = upload(padded(w)),
                   sum = poisoned(4 * (m * c.k + c.skew)), y = poisoned(4 * (m * c.k + c.skew));
      float *sumOut = c.inPlace ? dA.dataAs<float>() + c.skew : sum.dataAs<float>() + c.skew;
      ASSERT_OK(cuda::addRmsNorm(dA.dataAs<float>() + c.skew, dB.dataAs<float>() + c.skew, m, c.k,
                                 dW.dataAs<float>() + c.skew, c.group, 1e-6f, 1.0f, sumOut,
                                 y.dataAs<float>() + c.skew, nullptr));
      ASSERT_OK(synchronize());
      std::vector<float> gotSum = download<float>(c.inPlace ? dA : sum, m * c.k + c.skew),
                         got = download<float>(y, m * c.k + c.skew);
      gotSum.erase(gotSum.begin(), gotSum.begin() + c.skew);
      got.erase(got.begin(), got.begin() + c.skew);
      std::vector<float> cpuSum(m * c.k), cpu(m * c.k);
      cpu::addRmsNorm(pool, a.data(), b.data(), m, c.k, w.data(), c.group, 1e-6f, 1.0f,
                      cpuSum.data(), cpu.data());
      ASSERT_NO_FATAL_FAILURE(expectBitwiseEqual(gotSum, cpuSum, what + ": the sum"));
      ASSERT_NO_FATAL_FAILURE(expectBitwiseEqual(got, cpu, what + ": the norm"));
      ASSERT_NO_FATAL_FAILURE(
          expectClose(refRmsNorm(cpuSum, m, c.k, w, c.group, 1e-6, 1.0), got.data(), 1e-5, 1e-6,
                      what + ": float64"));
    }
}

/// The float64 reference's tolerance (the CPU kernel's sine and cosine are
/// the C library's, not CUDA's: the last bits may differ).
TEST_F(CudaModelKernels, RotaryAtModelShapesAndTokenCounts) {
  struct Case {
    int64_t heads, headDim, half, offset;
  };
  std::uniform_int_distribution<int64_t> anyPosition(0, 200000);
  // Qwen3's q and k (32 and 4 heads of 128), gpt-oss's 64, DeepSeek's rope
  // slice, a partial rotation, and 200 frequencies (more than a block's
  // threads: each thread steps over several).
  for (int64_t n : {1, 3, 64, 4096})
    for (Case c : {Case{32, 128, 64, 0}, Case{4, 128, 64, 0}, Case{64, 64, 32, 0},
                   Case{16, 192, 32, 128}, Case{5, 40, 12, 8}, Case{2, 448, 200, 20}})
      for (bool interleaved : {false, true}) {
        if (n == 4096 && c.heads * c.headDim < 4096 && interleaved)
          continue;
        int64_t columns = c.heads * c.headDim;
        std::string what = std::string(interleaved ? "rotary interleaved" : "rotary half") +
                           ", n " + std::to_string(n) + ", " + std::to_string(c.heads) +
                           " heads of " + std::to_string(c.headDim);
        std::vector<int64_t> pos(n);
        for (int64_t &p : pos)
          p = anyPosition(rng);
        std::vector<float> invFreq(c.half);
        for (int64_t i = 0; i < c.half; ++i)
          invFreq[i] = static_cast<float>(std::pow(1e6, -2.0 * i / (2 * c.half)));
        std::vector<float> x = randomVector(n * columns, rng);
        DeviceBuffer dPos = upload(pos), dFreq = upload(invFreq), dX = upload(x),
                     y = poisoned(4 * n * columns);
        const float scale = 0.875f;
        ASSERT_OK(cuda::rotary(dX.dataAs<float>(), n, columns, dPos.dataAs<int64_t>(),
                               dFreq.dataAs<float>(), c.half, c.headDim, c.offset, interleaved,
                               scale, y.dataAs<float>(), nullptr));
        ASSERT_OK(synchronize());
        std::vector<float> got = download<float>(y, n * columns);
        ASSERT_NO_FATAL_FAILURE(expectClose(
            refRotary(x, n, columns, pos, invFreq, c.headDim, c.offset, interleaved, scale),
            got.data(), 1e-5, 1e-5, what));
        ASSERT_OK(cuda::rotary(dX.dataAs<float>(), n, columns, dPos.dataAs<int64_t>(),
                               dFreq.dataAs<float>(), c.half, c.headDim, c.offset, interleaved,
                               scale, dX.dataAs<float>(), nullptr));
        ASSERT_OK(synchronize());
        ASSERT_NO_FATAL_FAILURE(
            expectBitwiseEqual(download<float>(dX, n * columns), got, what + " in place"));
      }
}

TEST_F(CudaModelKernels, AddInPlaceAndNot) {
  int64_t count = 3 * 4096 + 123;
  std::vector<float> a = randomVector(count, rng), b = randomVector(count, rng);
  DeviceBuffer dA = upload(a), dB = upload(b), out = poisoned(4 * count);
  ASSERT_OK(cuda::add(dA.dataAs<float>(), dB.dataAs<float>(), count, out.dataAs<float>(), nullptr));
  ASSERT_OK(synchronize());
  std::vector<float> got = download<float>(out, count);
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(got[i], a[i] + b[i]) << i;
  ASSERT_OK(cuda::add(dA.dataAs<float>(), dB.dataAs<float>(), count, dA.dataAs<float>(), nullptr));
  ASSERT_OK(synchronize());
  ASSERT_NO_FATAL_FAILURE(expectBitwiseEqual(download<float>(dA, count), got, "add in place"));
}

//===----------------------------------------------------------------------===//
// attention and the device KV cache
//===----------------------------------------------------------------------===//

TEST_F(CudaModelKernels, AttentionPrefillThenDecodeEqualsCacheFreeForward) {
  for (const AttentionShape &s : attentionShapes()) {
    SCOPED_TRACE(s.name());
    DeviceKVCache cache;
    ASSERT_OK(makeCache(cache, s));
    std::vector<Sequence> seqs{Sequence(s, 5 + kSteps, rng), Sequence(s, 3 + kSteps, rng)};
    std::vector<float> sinks = randomVector(s.heads, rng);
    ASSERT_NO_FATAL_FAILURE(runAndCheck(cache, 1, s, seqs, sinks, generation(kSteps)));
    EXPECT_EQ(cache.length(1, 2), 5 + kSteps);
    EXPECT_EQ(cache.length(1, 0), 3 + kSteps);
    EXPECT_EQ(cache.length(1, 1), 0);
    EXPECT_EQ(cache.length(0, 2), 0); // another layer's slot
  }
}

TEST_F(CudaModelKernels, AttentionAtModelSizes) {
  // Heads of 128 (DeepSeek's 128 + 64 query columns), long sequences: each
  // warp takes many positions, each lane several columns.
  std::vector<AttentionShape> shapes(3);
  shapes[0].heads = 8, shapes[0].kvHeads = 2, shapes[0].keyDim = 128, shapes[0].valueDim = 128;
  shapes[1] = shapes[0];
  shapes[1].window = 37, shapes[1].sinks = true;
  shapes[2].heads = shapes[2].kvHeads = 4, shapes[2].keyDim = 128, shapes[2].sharedDim = 64;
  shapes[2].valueDim = 96;
  for (const AttentionShape &s : shapes) {
    SCOPED_TRACE(s.name());
    DeviceKVCache cache;
    ASSERT_OK(makeCache(cache, s, 3, 200));
    std::vector<Sequence> seqs{Sequence(s, 150, rng), Sequence(s, 90, rng)};
    std::vector<float> sinks = randomVector(s.heads, rng);
    // Both prompts packed (A's 140 tokens, B's 80), then a few decode steps.
    std::vector<std::vector<Token>> calls(1);
    for (int64_t p = 0; p < 140; ++p)
      calls[0].push_back({0, 2, p});
    for (int64_t p = 0; p < 80; ++p)
      calls[0].push_back({1, 0, p});
    for (int64_t step = 0; step < 10; ++step)
      calls.push_back({{1, 0, 80 + step}, {0, 2, 140 + step}});
    ASSERT_NO_FATAL_FAILURE(runAndCheck(cache, 1, s, seqs, sinks, calls));
  }
}

TEST_F(CudaModelKernels, AttentionReplaysACapturedGraphWithNewPositions) {
  // One decode step captured once, its positions and sequences in device
  // buffers; each replay reads the values copied there before it.
  AttentionShape s;
  s.window = 4;
  s.sinks = true;
  DeviceKVCache cache;
  ASSERT_OK(makeCache(cache, s));
  std::vector<Sequence> seqs{Sequence(s, 5 + kSteps, rng), Sequence(s, 3 + kSteps, rng)};
  std::vector<float> sinks = randomVector(s.heads, rng);
  auto calls = generation(kSteps);
  ASSERT_NO_FATAL_FAILURE(runAndCheck(cache, 1, s, seqs, sinks, {calls[0], calls[1]}));
  cudaStream_t stream = nullptr;
  ASSERT_OK(cudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream",
                       __FILE__, __LINE__));
  DeviceBuffer dSinks = upload(sinks);
  DeviceCall step(s, Call(s, seqs, calls[2]));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_OK(cudaStatus(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "capture",
                       __FILE__, __LINE__));
  Status queued = queueAttention(cache, 1, s, step, dSinks, stream);
  ASSERT_OK(cudaStatus(cudaStreamEndCapture(stream, &graph), "end capture", __FILE__, __LINE__));
  ASSERT_OK(queued);
  ASSERT_OK(cudaStatus(cudaGraphInstantiate(&exec, graph, 0), "instantiate", __FILE__, __LINE__));
  for (size_t c = 2; c < calls.size(); ++c) {
    Call call(s, seqs, calls[c]);
    auto bytes = [](const auto &v) { return v.size() * sizeof(v[0]); };
    for (auto [to, from] : {std::pair<DeviceBuffer *, const void *>{&step.query, call.query.data()},
                            {&step.key, call.key.data()},
                            {&step.value, call.value.data()}})
      ASSERT_OK(
          cudaStatus(cudaMemcpyAsync(to->data(), from, to->size(), cudaMemcpyHostToDevice, stream),
                     "copy", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaMemcpyAsync(step.positions.data(), call.positions.data(),
                                         bytes(call.positions), cudaMemcpyHostToDevice, stream),
                         "copy", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaMemcpyAsync(step.rows.data(), call.rows.data(), bytes(call.rows),
                                         cudaMemcpyHostToDevice, stream),
                         "copy", __FILE__, __LINE__));
    ASSERT_OK(poisonDeviceMemory(step.out.data(), step.out.size(), stream));
    ASSERT_OK(cudaStatus(cudaGraphLaunch(exec, stream), "replay", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
    ASSERT_NO_FATAL_FAILURE(checkOutputs(s, seqs, sinks, calls[c],
                                         download<float>(step.out, step.n * s.heads * s.valueDim),
                                         "replay " + std::to_string(c)));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_F(CudaModelKernels, HostChecksNameTheValueAndLeaveTheLengths) {
  AttentionShape s;
  s.sharedDim = 2;
  DeviceKVCache cache;
  ASSERT_OK(makeCache(cache, s));
  std::vector<Sequence> seqs{Sequence(s, 7, rng), Sequence(s, 5, rng)};
  std::vector<float> sinks;
  auto calls = generation(2);
  ASSERT_NO_FATAL_FAILURE(runAndCheck(cache, 1, s, seqs, sinks, {calls[0], calls[1]}));
  ASSERT_EQ(cache.length(1, 2), 5);
  ASSERT_EQ(cache.length(1, 0), 3);

  // The CPU kernels' cases and messages.
  std::vector<int64_t> ids{1, 2, 3};
  for (const BadTokens &c : badTokenCases()) {
    Call call(s, seqs, c.tokens);
    // Two attention ops of one step (slots 0 and 1 hold different lengths).
    DeviceKVCache::TokensCheck checks[] = {{call.positions.data(), call.rows.data(), 1},
                                           {call.positions.data(), call.rows.data(), 0}};
    DeviceKVCache::IdsCheck idsCheck{ids.data(), 8};
    Status status =
        cache.checkStep(true, static_cast<int64_t>(c.tokens.size()), &idsCheck, 1, checks, 2);
    ASSERT_FALSE(status.isOk());
    expectMentions(status.message(), {"moe.attention"});
    for (const char *m : c.mentions)
      expectMentions(status.message(), {m});
    EXPECT_EQ(cache.length(1, 2), 5) << status.message();
    EXPECT_EQ(cache.length(1, 0), 3) << status.message();
    EXPECT_EQ(cache.length(0, 2), 0) << status.message();
  }
  // Ids outside the table, before any position is counted.
  {
    Call call(s, seqs, {{0, 2, 5}});
    DeviceKVCache::TokensCheck check{call.positions.data(), call.rows.data(), 1};
    std::vector<int64_t> bad{8};
    DeviceKVCache::IdsCheck idsCheck{bad.data(), 8};
    Status status = cache.checkStep(true, 1, &idsCheck, 1, &check, 1);
    ASSERT_FALSE(status.isOk());
    expectMentions(status.message(), {"moe.embedding", "token 0", "id 8"});
    EXPECT_EQ(cache.length(1, 2), 5);
    DeviceKVCache::TokensCheck noSlot{call.positions.data(), call.rows.data(), 2};
    status = cache.checkStep(true, 1, nullptr, 0, &noSlot, 1);
    ASSERT_FALSE(status.isOk());
    expectMentions(status.message(), {"moe.attention", "layer 2"});
  }
  // A wrong slot, or shapes that do not match the slot: refused before queuing.
  {
    DeviceCall call(s, Call(s, seqs, {{0, 2, 5}}));
    DeviceBuffer dSinks = upload(std::vector<float>{0.0f});
    Status status = queueAttention(cache, 2, s, call, dSinks, nullptr);
    ASSERT_FALSE(status.isOk());
    expectMentions(status.message(), {"moe.attention", "layer 2"});
    status = queueAttention(cache, 0, s, call, dSinks, nullptr);
    ASSERT_FALSE(status.isOk());
    expectMentions(status.message(), {"moe.attention", "slot 0"});
  }
  // The generation goes on as if nothing had happened.
  ASSERT_NO_FATAL_FAILURE(runAndCheck(cache, 1, s, seqs, sinks, {calls[2], calls[3]}));
  EXPECT_EQ(cache.length(1, 2), 7);
  EXPECT_EQ(cache.length(1, 0), 5);
}

TEST_F(CudaModelKernels, DeviceDataOutsideTheCacheWritesNothingAndReadsZeros) {
  // Positions and sequences the host could not read (device memory): not
  // checked, the lengths unknown until a reset; out-of-range tokens give zero
  // rows and leave the cache as it was.
  AttentionShape s;
  s.sinks = true;
  DeviceKVCache cache;
  ASSERT_OK(makeCache(cache, s));
  std::vector<Sequence> seqs{Sequence(s, 7, rng), Sequence(s, 5, rng)};
  std::vector<float> sinks = randomVector(s.heads, rng);
  auto calls = generation(2);
  ASSERT_NO_FATAL_FAILURE(runAndCheck(cache, 1, s, seqs, sinks, {calls[0], calls[1]}));

  // Valid tokens between bad ones: their rows are right, the bad ones zero.
  Sequence poison = seqs[0];
  std::fill(poison.key.begin(), poison.key.end(), kNaN);
  std::fill(poison.value.begin(), poison.value.end(), kNaN);
  std::vector<Token> tokens{{0, 3, 2}, {1, 0, 3}, {0, -1, 2}, {0, 2, 16}, {0, 2, -5}, {0, 2, 5}};
  std::vector<Sequence> mixed{poison, seqs[1]};
  Call call(s, mixed, tokens);
  // The valid tokens' own rows (B's position 3, A's position 5).
  Call good(s, seqs, {{1, 0, 3}, {0, 2, 5}});
  for (int64_t width : {s.keyColumns(), s.valueColumns()}) {
    std::vector<float> &to = width == s.keyColumns() ? call.key : call.value;
    const std::vector<float> &from = width == s.keyColumns() ? good.key : good.value;
    std::copy(from.begin(), from.begin() + width, to.begin() + 1 * width);
    std::copy(from.begin() + width, from.begin() + 2 * width, to.begin() + 5 * width);
  }
  std::copy(good.query.begin(), good.query.begin() + s.queryColumns(),
            call.query.begin() + s.queryColumns());
  std::copy(good.query.begin() + s.queryColumns(), good.query.end(),
            call.query.begin() + 5 * s.queryColumns());
  DeviceCall device(s, call);
  DeviceKVCache::TokensCheck check{device.positions.data(), device.rows.data(), 1};
  ASSERT_OK(cache.checkStep(true, device.n, nullptr, 0, &check, 1)); // device memory: not read
  EXPECT_EQ(cache.length(1, 2), -1);
  EXPECT_EQ(cache.length(1, 0), -1);
  DeviceBuffer dSinks = upload(sinks);
  ASSERT_OK(queueAttention(cache, 1, s, device, dSinks, nullptr));
  ASSERT_OK(synchronize());
  std::vector<float> out = download<float>(device.out, device.n * s.heads * s.valueDim);
  int64_t row = s.heads * s.valueDim;
  for (int64_t t : {0, 2, 3, 4})
    for (int64_t j = 0; j < row; ++j)
      ASSERT_EQ(out[t * row + j], 0.0f) << "token " << t;
  ASSERT_NO_FATAL_FAILURE(
      expectClose(refAttention(s, seqs[1], sinks, 3), out.data() + row, 1e-4, 2e-5, "B at 3"));
  ASSERT_NO_FATAL_FAILURE(
      expectClose(refAttention(s, seqs[0], sinks, 5), out.data() + 5 * row, 1e-4, 2e-5, "A at 5"));
  // Unknown lengths: gaps go unchecked until a reset.
  Call gap(s, seqs, {{1, 0, 9}});
  DeviceKVCache::TokensCheck gapCheck{gap.positions.data(), gap.rows.data(), 1};
  ASSERT_OK(cache.checkStep(true, 1, nullptr, 0, &gapCheck, 1));
  cache.reset(0);
  EXPECT_EQ(cache.length(1, 0), 0);
  EXPECT_EQ(cache.length(1, 2), -1);
  Status status = cache.checkStep(true, 1, nullptr, 0, &gapCheck, 1);
  ASSERT_FALSE(status.isOk());
  expectMentions(status.message(), {"position 9", "sequence 0", "gap"});
  // A's generation goes on from its untouched rows.
  ASSERT_NO_FATAL_FAILURE(runAndCheck(cache, 1, s, seqs, sinks, {{{0, 2, 6}}}));
  cache.reset();
  EXPECT_EQ(cache.length(1, 2), 0);
  ASSERT_NO_FATAL_FAILURE(runAndCheck(cache, 1, s, seqs, sinks, calls));
}

TEST(DeviceKVCacheStorage, CreatesAsGeneratedCodeDoesAndRejectsOverflow) {
  DeviceKVCache none;
  ASSERT_OK(none.create(2, 8, {}));
  EXPECT_EQ(none.slots(), 0u);
  DeviceKVCache one;
  ASSERT_OK(one.create(2, 8, {{6, 4}}));
  ASSERT_EQ(one.slots(), 1u);
  EXPECT_EQ(one.slot(0).keyColumns, 6);
  EXPECT_EQ(one.slot(0).valueColumns, 4);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(one.values(0)) % 256, 0u);
  // Zero-filled.
  std::vector<float> keys(2 * 8 * 6, 1.0f);
  ASSERT_OK(
      cudaStatus(cudaMemcpy(keys.data(), one.keys(0), keys.size() * 4, cudaMemcpyDeviceToHost),
                 "download", __FILE__, __LINE__));
  EXPECT_EQ(keys, std::vector<float>(keys.size(), 0.0f));
  DeviceKVCache overflow;
  EXPECT_FALSE(overflow.create(int64_t(1) << 40, int64_t(1) << 40, {{1, 1}}).isOk());
  EXPECT_FALSE(overflow.create(-1, 8, {{1, 1}}).isOk());
  Status tooLarge = overflow.create(1 << 20, 1 << 20, {{1024, 1024}}); // 8 PiB
  EXPECT_FALSE(tooLarge.isOk());
  expectMentions(tooLarge.message(), {"KV cache"});
}

} // namespace
