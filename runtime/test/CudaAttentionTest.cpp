//===- CudaAttentionTest.cpp - attention over the device KV cache at model sizes
//-===//
//
// The attention kernels of Attention.cu at the models' head shapes (Qwen3's
// 32/4/128, gpt-oss's 64/8/64 with sinks and a window of 128, DeepSeek-V3's
// MLA 128 + 64 shared, plain multi-head), on random inputs into outputs
// poisoned with NaN, against the float64 reference of ModelReference.h: long
// decodes (split KV), prefills of about a thousand tokens, two prompts packed
// in one step, chunked prefills continuing a filled cache, tokens outside the
// cache, and a decode step captured in a CUDA graph and replayed. A bf16
// cache is checked against the reference on the bf16-rounded inputs the
// kernels multiply (tight) and on the f32 ones (loose); an f32 cache keeps
// 1e-5. Each case prints its largest error.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/ModelKernels.h"

#include "CudaTestUtil.h"
#include "ModelReference.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace moec::rt;
using namespace moec::rt::test;
using cuda::DeviceKVCache;
using cuda::KVCacheType;

namespace {

/// x rounded to bf16, nearest even (finite x), as a float.
float roundBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

void roundAll(std::vector<float> &v) {
  for (float &x : v)
    x = roundBf16(x);
}

AttentionShape shape(int64_t heads, int64_t kvHeads, int64_t keyDim, int64_t sharedDim,
                     int64_t valueDim, int64_t window = 0, bool sinks = false) {
  AttentionShape s;
  s.heads = heads, s.kvHeads = kvHeads, s.keyDim = keyDim, s.sharedDim = sharedDim;
  s.valueDim = valueDim, s.window = window, s.sinks = sinks;
  return s;
}

AttentionShape qwen3() { return shape(32, 4, 128, 0, 128); }
AttentionShape gptOss() { return shape(64, 8, 64, 0, 64, 128, true); }
AttentionShape deepseek(int64_t heads = 128) { return shape(heads, heads, 128, 64, 128); }

/// Whether a bf16 cache runs the shape on the tensor cores (Attention.cu's
/// head shapes, G dividing 16), which round the query and the weights.
bool onTensorCores(const AttentionShape &s) {
  bool dims = (s.keyDim == 128 && s.sharedDim == 0 && s.valueDim == 128) ||
              (s.keyDim == 64 && s.sharedDim == 0 && s.valueDim == 64) ||
              (s.keyDim == 128 && s.sharedDim == 64 && s.valueDim == 128);
  return dims && 16 % (s.heads / s.kvHeads) == 0;
}

/// A sequence whose query is scaled down: scores of a few units, so that
/// softmax spreads its weight (N(0, 1) rows give scores of ~11 at 128 dims).
Sequence makeSequence(const AttentionShape &s, int64_t length, std::mt19937 &rng) {
  Sequence seq(s, length, rng);
  for (float &x : seq.query)
    x *= 0.25f;
  return seq;
}

/// What the kernels of a bf16 cache multiply: the rows rounded to bf16 (and
/// the query too on the tensor cores).
Sequence rounded(const AttentionShape &s, Sequence seq) {
  roundAll(seq.key);
  roundAll(seq.keyShared);
  roundAll(seq.value);
  if (onTensorCores(s))
    roundAll(seq.query);
  return seq;
}

struct Tolerance {
  double rtol, atol;
};

/// A test's cache type, its sequences and the references it is checked
/// against: exact ones for f32, the rounded (tight) and the f32 (loose) ones
/// for bf16.
struct Case {
  AttentionShape s;
  KVCacheType type;
  std::vector<Sequence> seqs, roundedSeqs;
  std::vector<float> sinks;
  double worstTight = 0, worstLoose = 0;

  Case(const AttentionShape &shape, KVCacheType type, const std::vector<int64_t> &lengths,
       std::mt19937 &rng)
      : s(shape), type(type), sinks(randomVector(shape.heads, rng)) {
    for (int64_t length : lengths)
      seqs.push_back(makeSequence(s, length, rng));
    if (type == KVCacheType::BF16)
      for (const Sequence &seq : seqs)
        roundedSeqs.push_back(rounded(s, seq));
  }

  /// The references of the token at `position` of sequence `index`: on the
  /// f32 inputs, and for bf16 on the rounded ones.
  struct Want {
    std::vector<double> loose, tight;
  };
  Want reference(size_t index, int64_t position) const {
    Want want{refAttention(s, seqs[index], sinks, position), {}};
    if (type == KVCacheType::BF16)
      want.tight = refAttention(s, roundedSeqs[index], sinks, position);
    return want;
  }

  void compare(const Want &want, const float *got, const std::string &what) {
    Tolerance loose = type == KVCacheType::F32 ? Tolerance{1e-5, 1e-5} : Tolerance{2e-2, 2e-2};
    for (size_t i = 0; i < want.loose.size(); ++i)
      worstLoose = std::max(worstLoose, std::abs(got[i] - want.loose[i]));
    ASSERT_NO_FATAL_FAILURE(
        expectClose(want.loose, got, loose.rtol, loose.atol, what + " (f32 inputs)"));
    if (type != KVCacheType::BF16)
      return;
    for (size_t i = 0; i < want.tight.size(); ++i)
      worstTight = std::max(worstTight, std::abs(got[i] - want.tight[i]));
    ASSERT_NO_FATAL_FAILURE(expectClose(want.tight, got, 4e-3, 4e-3, what + " (bf16 inputs)"));
  }

  void check(size_t index, int64_t position, const float *got, const std::string &what) {
    ASSERT_NO_FATAL_FAILURE(compare(reference(index, position), got, what));
  }

  void report(const std::string &what) const {
    std::printf("[ attention ] %-58s %s cache: max |error| %.2e vs f32 inputs", what.c_str(),
                type == KVCacheType::F32 ? "f32 " : "bf16", worstLoose);
    if (type == KVCacheType::BF16)
      std::printf(", %.2e vs bf16 inputs", worstTight);
    std::printf("\n");
  }
};

Status queue(DeviceKVCache &cache, const AttentionShape &s, const DeviceCall &step,
             const DeviceBuffer &sinks, cudaStream_t stream) {
  return cuda::attention(
      cache, 0, step.query.dataAs<float>(), step.key.dataAs<float>(), step.value.dataAs<float>(),
      s.sharedDim ? step.keyShared.dataAs<float>() : nullptr,
      s.sinks ? sinks.dataAs<float>() : nullptr, step.positions.dataAs<int64_t>(),
      step.rows.dataAs<int64_t>(), step.n, s.heads, s.kvHeads, s.keyDim, s.sharedDim, s.valueDim,
      static_cast<float>(s.scale()), s.window, step.out.dataAs<float>(), stream);
}

/// Runs one call of `tokens` and checks every `stride`-th output row and the
/// last 8 (tokens with row < 0 or outside the cache: zero rows).
void runStep(Case &c, DeviceKVCache &cache, const std::vector<Token> &tokens,
             const std::string &what, size_t stride = 1) {
  const AttentionShape &s = c.s;
  Call call(s, c.seqs, tokens);
  DeviceCall step(s, call);
  DeviceBuffer sinks = upload(c.sinks);
  ASSERT_OK(queue(cache, s, step, sinks, nullptr));
  ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
  const int64_t row = s.heads * s.valueDim;
  std::vector<float> out = download<float>(step.out, step.n * row);
  std::vector<size_t> checked;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (i % stride == 0 || i + 8 >= tokens.size())
      checked.push_back(i);
  auto outside = [&](const Token &t) {
    return t.row < 0 || t.row >= cache.maxBatch() || t.position < 0 || t.position >= cache.maxSeq();
  };
  // The float64 references on every core, then the comparisons in order.
  std::vector<Case::Want> wants(checked.size());
  std::vector<std::thread> threads;
  size_t workers = std::max(1u, std::thread::hardware_concurrency());
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (size_t k = w; k < checked.size(); k += workers)
        if (!outside(tokens[checked[k]]))
          wants[k] = c.reference(tokens[checked[k]].sequence, tokens[checked[k]].position);
    });
  for (std::thread &thread : threads)
    thread.join();
  for (size_t k = 0; k < checked.size(); ++k) {
    size_t i = checked[k];
    const Token &t = tokens[i];
    std::string at = what + ", token " + std::to_string(i);
    if (outside(t)) {
      for (int64_t j = 0; j < row; ++j)
        ASSERT_EQ(out[i * row + j], 0.0f) << at << " (outside the cache)";
      continue;
    }
    ASSERT_NO_FATAL_FAILURE(c.compare(wants[k], out.data() + i * row, at));
  }
}

/// Positions [from, to) of sequence `index` in cache row `row`.
std::vector<Token> prompt(size_t index, int64_t row, int64_t from, int64_t to) {
  std::vector<Token> tokens;
  for (int64_t p = from; p < to; ++p)
    tokens.push_back({index, row, p});
  return tokens;
}

std::string label(const AttentionShape &s) {
  return std::to_string(s.heads) + "/" + std::to_string(s.kvHeads) + " heads, " +
         std::to_string(s.keyDim) + (s.sharedDim ? "+" + std::to_string(s.sharedDim) : "") + "/" +
         std::to_string(s.valueDim) + (s.window ? ", window " + std::to_string(s.window) : "") +
         (s.sinks ? ", sinks" : "");
}

class CudaAttention : public ::testing::Test {
protected:
  std::mt19937 rng{2024};
};

//===----------------------------------------------------------------------===//
// Decode over long caches (split KV)
//===----------------------------------------------------------------------===//

/// Fills the sequences' first `lengths[i]` positions (one packed prefill,
/// checked at a stride), then `steps` decode steps of one token each.
void prefillThenDecode(Case &c, const std::vector<int64_t> &filled, int64_t steps, int64_t maxSeq,
                       const std::string &what) {
  DeviceKVCache cache;
  const AttentionShape &s = c.s;
  int64_t batch = static_cast<int64_t>(filled.size());
  ASSERT_OK(cache.create(batch, maxSeq, {{s.slotKeyColumns(), s.valueColumns()}}, c.type));
  std::vector<Token> fill;
  for (size_t i = 0; i < filled.size(); ++i) {
    // Cache rows in reverse: a sequence's row is not its index.
    std::vector<Token> part = prompt(i, batch - 1 - static_cast<int64_t>(i), 0, filled[i]);
    fill.insert(fill.end(), part.begin(), part.end());
  }
  ASSERT_NO_FATAL_FAILURE(runStep(c, cache, fill, what + ", prefill", 61));
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<Token> tokens;
    for (size_t i = 0; i < filled.size(); ++i)
      tokens.push_back({i, batch - 1 - static_cast<int64_t>(i), filled[i] + step});
    ASSERT_NO_FATAL_FAILURE(runStep(c, cache, tokens, what + ", step " + std::to_string(step)));
  }
}

TEST_F(CudaAttention, DecodeBatch1Over4096Positions) {
  for (const AttentionShape &s : {qwen3(), gptOss(), shape(16, 16, 128, 0, 128)}) {
    Case c(s, KVCacheType::BF16, {4096 + 3}, rng);
    ASSERT_NO_FATAL_FAILURE(prefillThenDecode(c, {4096}, 3, 4096 + 64, label(s)));
    c.report("decode, batch 1, 4096 positions, " + label(s));
  }
}

TEST_F(CudaAttention, DecodeBatch16OfRaggedLengths) {
  std::vector<int64_t> lengths;
  for (int i = 0; i < 16; ++i)
    lengths.push_back(200 + 61 * i); // 200..1115
  std::vector<int64_t> full = lengths;
  for (int64_t &l : full)
    l += 2;
  for (const AttentionShape &s : {qwen3(), gptOss(), shape(16, 16, 128, 0, 128), deepseek(16)}) {
    Case c(s, KVCacheType::BF16, full, rng);
    ASSERT_NO_FATAL_FAILURE(prefillThenDecode(c, lengths, 2, 1152, label(s)));
    c.report("decode, batch 16, 200-1115 positions, " + label(s));
  }
}

TEST_F(CudaAttention, DecodeBatch64AndDeepSeekHeads) {
  // 64 tokens: the most the split-KV decode takes; DeepSeek-V3's 128 heads.
  {
    std::vector<int64_t> lengths(64), full(64);
    for (int i = 0; i < 64; ++i)
      lengths[i] = 1 + 13 * i, full[i] = lengths[i] + 1;
    AttentionShape s = qwen3();
    Case c(s, KVCacheType::BF16, full, rng);
    ASSERT_NO_FATAL_FAILURE(prefillThenDecode(c, lengths, 1, 1024, label(s)));
    c.report("decode, batch 64, 1-820 positions, " + label(s));
  }
  AttentionShape s = deepseek();
  Case c(s, KVCacheType::BF16, {300, 101, 7}, rng);
  ASSERT_NO_FATAL_FAILURE(prefillThenDecode(c, {298, 99, 5}, 2, 512, label(s)));
  c.report("decode, batch 3, " + label(s));
}

TEST_F(CudaAttention, DecodeOfEverySequenceOfALargeBatch) {
  // 96 sequences, one token each: more than 64 tokens, but a step of the
  // cache's whole batch still takes the split-KV decode.
  std::vector<int64_t> lengths(96), full(96);
  for (int i = 0; i < 96; ++i)
    lengths[i] = 3 + 7 * i, full[i] = lengths[i] + 1;
  for (const AttentionShape &s : {qwen3(), deepseek(8)}) {
    Case c(s, KVCacheType::BF16, full, rng);
    ASSERT_NO_FATAL_FAILURE(prefillThenDecode(c, lengths, 1, 704, label(s)));
    c.report("decode, batch 96, 3-668 positions, " + label(s));
  }
}

TEST_F(CudaAttention, DecodeClustersOf1To16BlocksAcrossSplitEdges) {
  // A cache of 128·b positions gives a batch-1 step b blocks of 4 splits (a
  // cluster of b, or 8 where the device schedules no cluster of 16). The
  // cache is filled to 64·b - 2 positions (one step: the decode's kernel
  // itself up to 64 tokens, its step's rows taken from its inputs), then
  // steps at 64·b - 2 .. 64·b + 1 move the split size from 16 positions
  // to 32 (the last split partial, then most splits empty), then a step of
  // three tokens of one sequence (each sees the others' new rows) beside
  // another sequence's token. Qwen3, gpt-oss (window, sinks), MLA; an f32
  // cache (the exact kernel) at b = 1 and 16.
  for (int64_t b = 1; b <= 16; ++b)
    for (const AttentionShape &s : {qwen3(), gptOss(), deepseek(2)})
      for (KVCacheType type : {KVCacheType::BF16, KVCacheType::F32}) {
        if (type == KVCacheType::F32 && ((b != 1 && b != 16) || s.sharedDim))
          continue;
        const int64_t maxSeq = 128 * b, filled = 64 * b - 2;
        Case c(s, type, {maxSeq, maxSeq}, rng);
        DeviceKVCache cache;
        ASSERT_OK(cache.create(2, maxSeq, {{s.slotKeyColumns(), s.valueColumns()}}, type));
        std::string what = label(s) + ", " + std::to_string(b) + " blocks";
        ASSERT_NO_FATAL_FAILURE(runStep(c, cache, prompt(0, 1, 0, filled), what + ", fill", 5));
        ASSERT_NO_FATAL_FAILURE(runStep(c, cache, prompt(1, 0, 0, 40), what + ", fill 2", 3));
        for (int64_t p = filled; p < filled + 4; ++p)
          ASSERT_NO_FATAL_FAILURE(
              runStep(c, cache, {{0, 1, p}}, what + ", step at " + std::to_string(p)));
        const int64_t at = filled + 4;
        ASSERT_NO_FATAL_FAILURE(runStep(c, cache, {{0, 1, at}, {1, 0, 40}, {0, 1, at + 1},
                                                   {0, 1, at + 2}},
                                        what + ", three tokens of a sequence"));
        c.report("decode, " + what);
      }
}

//===----------------------------------------------------------------------===//
// Prefill (tensor-core tiles)
//===----------------------------------------------------------------------===//

TEST_F(CudaAttention, PrefillOfAThousandTokensInOneStep) {
  for (const AttentionShape &s : {qwen3(), gptOss(), deepseek(8), shape(8, 1, 128, 0, 128)}) {
    Case c(s, KVCacheType::BF16, {1000}, rng);
    DeviceKVCache cache;
    ASSERT_OK(cache.create(2, 1024, {{s.slotKeyColumns(), s.valueColumns()}}, c.type));
    ASSERT_NO_FATAL_FAILURE(runStep(c, cache, prompt(0, 1, 0, 1000), label(s), 3));
    c.report("prefill, 1000 tokens, " + label(s));
  }
}

TEST_F(CudaAttention, TwoPromptsPackedAndAChunkedPrefill) {
  // 300 + 517 tokens in one step: with G = 8 a tile of 16 tokens straddles
  // the prompts, with G = 1 one of 128. Then the second prompt continues in
  // chunks of 256, 40 (the decode's kernels) and 150 on the filled cache.
  for (const AttentionShape &s : {qwen3(), gptOss(), deepseek(4)}) {
    Case c(s, KVCacheType::BF16, {300, 517 + 446}, rng);
    DeviceKVCache cache;
    ASSERT_OK(cache.create(3, 1024, {{s.slotKeyColumns(), s.valueColumns()}}, c.type));
    std::vector<Token> packed = prompt(0, 2, 0, 300), second = prompt(1, 0, 0, 517);
    packed.insert(packed.end(), second.begin(), second.end());
    ASSERT_NO_FATAL_FAILURE(runStep(c, cache, packed, label(s) + ", packed", 5));
    int64_t at = 517;
    for (int64_t chunk : {256, 40, 150}) {
      ASSERT_NO_FATAL_FAILURE(runStep(c, cache, prompt(1, 0, at, at + chunk),
                                      label(s) + ", chunk at " + std::to_string(at), 3));
      at += chunk;
    }
    c.report("prefill, 300 + 517 packed, then chunks, " + label(s));
  }
}

/// Prompts of `lengths` packed in one step (cache row i for prompt i), with a
/// stride of 1 up to the tile edges: lengths 1, 63, 64, 65, 127 and 129 end
/// inside, at and past the 64-position K/V tiles and the 64- and 128-row
/// blocks of queries.
void packedPrompts(std::mt19937 &rng, const AttentionShape &s, const std::vector<int64_t> &lengths,
                   int64_t stride, const std::string &what) {
  Case c(s, KVCacheType::BF16, lengths, rng);
  DeviceKVCache cache;
  ASSERT_OK(cache.create(static_cast<int64_t>(lengths.size()), 1280,
                         {{s.slotKeyColumns(), s.valueColumns()}}, c.type));
  std::vector<Token> packed;
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::vector<Token> part = prompt(i, static_cast<int64_t>(i), 0, lengths[i]);
    packed.insert(packed.end(), part.begin(), part.end());
  }
  ASSERT_NO_FATAL_FAILURE(runStep(c, cache, packed, label(s) + ", " + what, stride));
  c.report("prefill, " + what + ", " + label(s));
}

TEST_F(CudaAttention, PrefillOfOddLengthsInShortAndLongSteps) {
  // 449 tokens: a grid of 64-row blocks (a short prompt's); with a prompt
  // of 1100 more, 128-row blocks of two m tiles a warp (G = 1 with 32 heads).
  const std::vector<int64_t> odd{1, 63, 64, 65, 127, 129};
  std::vector<int64_t> withLong = odd;
  withLong.push_back(1100);
  for (const AttentionShape &s : {qwen3(), gptOss(), shape(32, 32, 128, 0, 128)}) {
    ASSERT_NO_FATAL_FAILURE(packedPrompts(rng, s, odd, 1, "1..129 packed"));
    ASSERT_NO_FATAL_FAILURE(packedPrompts(rng, s, withLong, 7, "1..129 and 1100 packed"));
  }
}

TEST_F(CudaAttention, PrefillOfSinglePromptsAroundTileEdges) {
  // One prompt a step, longer than the decode's 64 tokens.
  for (const AttentionShape &s : {qwen3(), gptOss()})
    for (int64_t length : {65, 127, 128, 129, 191, 257})
      ASSERT_NO_FATAL_FAILURE(
          packedPrompts(rng, s, {length}, 1, std::to_string(length) + " tokens"));
}

TEST_F(CudaAttention, InterleavedSequencesAndTokensOutsideTheCache) {
  // Tokens of three sequences interleaved one by one (every tile mixed), and
  // tokens whose sequence or position is outside the cache among them: zero
  // rows, nothing written. Both the decode (n <= 64) and the prefill.
  for (const AttentionShape &s : {qwen3(), gptOss(), deepseek(2)}) {
    Case c(s, KVCacheType::BF16, {200, 200, 200}, rng);
    DeviceKVCache cache;
    ASSERT_OK(cache.create(3, 160, {{s.slotKeyColumns(), s.valueColumns()}}, c.type));
    for (int64_t n : {30, 150}) {
      cache.reset();
      std::vector<Token> tokens;
      for (int64_t p = 0; p < n / 3; ++p)
        for (size_t i = 0; i < 3; ++i)
          tokens.push_back({i, static_cast<int64_t>(i), p});
      tokens.insert(tokens.begin() + 7, Token{0, 3, 5});   // sequence outside
      tokens.insert(tokens.begin() + 12, Token{1, -1, 2}); // likewise
      tokens.push_back({2, 2, 160});                       // position outside
      tokens.push_back({2, 2, -4});
      ASSERT_NO_FATAL_FAILURE(runStep(c, cache, tokens, label(s) + ", n " + std::to_string(n)));
    }
    c.report("interleaved sequences, rows outside the cache, " + label(s));
  }
}

TEST_F(CudaAttention, FallbackShapesOnABf16Cache) {
  // Shapes the tensor cores do not take (Dk != Dv without a shared slice, G
  // of 3, small heads): the exact kernel reads the bf16 rows.
  for (const AttentionShape &s : {shape(8, 2, 64, 0, 128, 50, true), shape(12, 4, 32, 0, 32),
                                  shape(4, 2, 8, 4, 6, 3, true)}) {
    Case c(s, KVCacheType::BF16, {180, 60}, rng);
    DeviceKVCache cache;
    ASSERT_OK(cache.create(2, 256, {{s.slotKeyColumns(), s.valueColumns()}}, c.type));
    std::vector<Token> packed = prompt(0, 1, 0, 170), second = prompt(1, 0, 0, 50);
    packed.insert(packed.end(), second.begin(), second.end());
    ASSERT_NO_FATAL_FAILURE(runStep(c, cache, packed, label(s), 3));
    ASSERT_NO_FATAL_FAILURE(runStep(c, cache, {{0, 1, 170}, {1, 0, 50}}, label(s) + ", step"));
    c.report("fallback shapes, " + label(s));
  }
}

TEST_F(CudaAttention, F32CacheStaysWithin1e5) {
  for (const AttentionShape &s : {qwen3(), gptOss(), deepseek(4)}) {
    Case c(s, KVCacheType::F32, {1500 + 2, 700 + 2}, rng);
    ASSERT_NO_FATAL_FAILURE(prefillThenDecode(c, {1500, 700}, 2, 1536, label(s)));
    c.report("f32 cache, prefill 1500 + 700, decode, " + label(s));
  }
}

//===----------------------------------------------------------------------===//
// A captured decode step replayed, and the storage
//===----------------------------------------------------------------------===//

TEST_F(CudaAttention, Bf16DecodeReplaysACapturedGraph) {
  // The split count is the host's (from n and the shapes): one captured step
  // serves every replay, whatever the positions read on the device.
  AttentionShape s = gptOss();
  Case c(s, KVCacheType::BF16, {700, 400}, rng);
  DeviceKVCache cache;
  ASSERT_OK(cache.create(2, 1024, {{s.slotKeyColumns(), s.valueColumns()}}, c.type));
  std::vector<Token> fill = prompt(0, 0, 0, 600), second = prompt(1, 1, 0, 300);
  fill.insert(fill.end(), second.begin(), second.end());
  ASSERT_NO_FATAL_FAILURE(runStep(c, cache, fill, "fill", 97));
  cudaStream_t stream = nullptr;
  ASSERT_OK(cudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream",
                       __FILE__, __LINE__));
  DeviceBuffer sinks = upload(c.sinks);
  std::vector<Token> first{{1, 1, 300}, {0, 0, 600}};
  DeviceCall step(s, Call(s, c.seqs, first));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_OK(cudaStatus(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "capture",
                       __FILE__, __LINE__));
  Status queued = queue(cache, s, step, sinks, stream);
  ASSERT_OK(cudaStatus(cudaStreamEndCapture(stream, &graph), "end capture", __FILE__, __LINE__));
  ASSERT_OK(queued);
  ASSERT_OK(cudaStatus(cudaGraphInstantiate(&exec, graph, 0), "instantiate", __FILE__, __LINE__));
  for (int64_t k = 0; k < 40; ++k) {
    std::vector<Token> tokens{{1, 1, 300 + k}, {0, 0, 600 + k}};
    Call call(s, c.seqs, tokens);
    for (auto [to, from] : {std::pair<DeviceBuffer *, const void *>{&step.query, call.query.data()},
                            {&step.key, call.key.data()},
                            {&step.value, call.value.data()},
                            {&step.positions, call.positions.data()},
                            {&step.rows, call.rows.data()}})
      ASSERT_OK(
          cudaStatus(cudaMemcpyAsync(to->data(), from, to->size(), cudaMemcpyHostToDevice, stream),
                     "copy", __FILE__, __LINE__));
    ASSERT_OK(poisonDeviceMemory(step.out.data(), step.out.size(), stream));
    ASSERT_OK(cudaStatus(cudaGraphLaunch(exec, stream), "replay", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
    std::vector<float> out = download<float>(step.out, 2 * s.heads * s.valueDim);
    for (size_t i = 0; i < 2; ++i)
      ASSERT_NO_FATAL_FAILURE(c.check(tokens[i].sequence, tokens[i].position,
                                      out.data() + i * s.heads * s.valueDim,
                                      "replay " + std::to_string(k)));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  c.report("graph replays, " + label(s));
}

TEST(DeviceKVCacheBf16, RowsRoundToNearestEvenInHalfTheBytes) {
  AttentionShape s = shape(4, 2, 8, 0, 8);
  DeviceKVCache f32, bf16;
  ASSERT_OK(f32.create(2, 8, {{16, 16}, {16, 16}}));
  ASSERT_OK(bf16.create(2, 8, {{16, 16}, {16, 16}}, KVCacheType::BF16));
  EXPECT_EQ(bf16.type(), KVCacheType::BF16);
  EXPECT_EQ(bf16.elementBytes(), 2u);
  // Slot 1 starts 512 bytes (2·8·16 bf16 keys, then as many values) after
  // slot 0 in bf16, twice that in f32; 256-byte aligned both.
  EXPECT_EQ(static_cast<char *>(bf16.keys(1)) - static_cast<char *>(bf16.keys(0)), 1024);
  EXPECT_EQ(static_cast<char *>(f32.keys(1)) - static_cast<char *>(f32.keys(0)), 2048);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bf16.values(1)) % 256, 0u);
  std::vector<uint16_t> zeros(2 * 8 * 16, 1);
  ASSERT_OK(
      cudaStatus(cudaMemcpy(zeros.data(), bf16.values(1), zeros.size() * 2, cudaMemcpyDeviceToHost),
                 "download", __FILE__, __LINE__));
  EXPECT_EQ(zeros, std::vector<uint16_t>(zeros.size(), 0));

  // Values on and around the rounding ties: 1 + 2^-8 (a tie, to even: 1),
  // 1 + 3·2^-8 (a tie, up), just above a tie, negative ones.
  std::mt19937 rng(7);
  std::vector<Sequence> seqs{Sequence(s, 1, rng)};
  const float ties[] = {1.0f + 0x1p-8f,
                        1.0f + 3 * 0x1p-8f,
                        1.0f + 0x1p-8f + 0x1p-20f,
                        -(1.0f + 0x1p-8f),
                        -3.0f - 3 * 0x1p-7f,
                        0x1p-130f,
                        1e30f,
                        -7.1234567f};
  for (size_t j = 0; j < seqs[0].key.size(); ++j)
    seqs[0].key[j] = ties[j % 8] * (j < 8 ? 1.0f : 1.37f);
  Call call(s, seqs, {{0, 1, 3}});
  DeviceCall step(s, call);
  DeviceBuffer sinks = upload(std::vector<float>{0.0f});
  ASSERT_OK(cuda::attention(
      bf16, 0, step.query.dataAs<float>(), step.key.dataAs<float>(), step.value.dataAs<float>(),
      nullptr, nullptr, step.positions.dataAs<int64_t>(), step.rows.dataAs<int64_t>(), 1, s.heads,
      s.kvHeads, s.keyDim, 0, s.valueDim, 0.5f, 0, step.out.dataAs<float>(), nullptr));
  std::vector<uint16_t> row(16);
  ASSERT_OK(cudaStatus(cudaMemcpy(row.data(), static_cast<uint16_t *>(bf16.keys(0)) + (8 + 3) * 16,
                                  32, cudaMemcpyDeviceToHost),
                       "download", __FILE__, __LINE__));
  for (size_t j = 0; j < 16; ++j) {
    float want = roundBf16(call.key[j]), got;
    uint32_t bits = uint32_t(row[j]) << 16;
    std::memcpy(&got, &bits, 4);
    EXPECT_EQ(got, want) << "column " << j << ": " << call.key[j];
  }
  EXPECT_EQ(roundBf16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(roundBf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
}

} // namespace
