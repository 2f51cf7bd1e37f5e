//===- MoEKernels.cpp - CPU kernels for the lowered moe ops -----------------===//

#include "moec/runtime/cpu/MoEKernels.h"
#include "moec/runtime/Float8.h"
#include "moec/runtime/MXFP4.h"

#include "../RoutingWeights.h"
#include "Gemm.h"

#include <algorithm>
#include <array>
#include <memory>
#include <numeric>
#include <vector>

namespace moec::rt::cpu {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float activate(ActivationKind kind, float alpha, float x) {
  switch (kind) {
  case ActivationKind::SiLU: return x * sigmoid(alpha * x);
  case ActivationKind::GELU: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
  case ActivationKind::ReLU: return x > 0.0f ? x : 0.0f;
  case ActivationKind::Identity: return x;
  }
  return x;
}

/// The width an epilogue leaves of `n` pre-activation columns.
int64_t outputWidth(const Epilogue &e, int64_t n) {
  return e.enabled && e.layout != GateUpLayout::None ? n / 2 : n;
}

/// Applies the epilogue to one row of `n` accumulators, writing outputWidth values.
void applyEpilogue(const Epilogue &e, const float *acc, int64_t n, float *out) {
  if (!e.enabled) {
    std::copy(acc, acc + n, out);
    return;
  }
  if (e.kind == ActivationKind::SiLU) { // vectorised, moec's own exp (Gemm.h)
    detail::siluEpilogue(acc, n, e.layout != GateUpLayout::None,
                         e.layout == GateUpLayout::Interleaved, e.alpha, e.beta, e.limit, out);
    return;
  }
  if (e.layout == GateUpLayout::None) {
    for (int64_t j = 0; j < n; ++j)
      out[j] = activate(e.kind, e.alpha, acc[j]);
    return;
  }
  int64_t half = n / 2;
  bool interleaved = e.layout == GateUpLayout::Interleaved;
  for (int64_t j = 0; j < half; ++j) {
    float g = interleaved ? acc[2 * j] : acc[j];
    float u = interleaved ? acc[2 * j + 1] : acc[half + j];
    if (std::isfinite(e.limit)) {
      g = std::min(g, e.limit);
      u = std::clamp(u, -e.limit, e.limit);
    }
    out[j] = activate(e.kind, e.alpha, g) * (u + e.beta);
  }
}

/// Rows of a product computed at once before their epilogue.
constexpr int64_t kRowBlock = 16;

/// Scratch floats of one chunk: on the stack up to kInline, else on the heap.
/// (Not thread_local: a thread_local with a destructor pins model.so in
/// memory after dlclose.)
class Scratch {
public:
  explicit Scratch(size_t count) {
    if (count > kInline)
      heap_.reset(new float[count]);
  }
  float *data() { return heap_ ? heap_.get() : inline_; }

private:
  static constexpr size_t kInline = 4096;
  float inline_[kInline];
  std::unique_ptr<float[]> heap_;
};

/// Rows [0, m) of epilogue(x · wᵀ + bias) for w [n, k] into out (row stride
/// `ldo`): straight into out without an epilogue, else through scratch.
void project(const float *x, int64_t m, int64_t k, const float *w, int64_t n, const float *bias,
             const Epilogue &epilogue, float *out, int64_t ldo) {
  if (!epilogue.enabled) {
    detail::gemmNT(x, k, w, k, bias, out, ldo, m, n, k);
    return;
  }
  Scratch buffer(static_cast<size_t>(std::min(kRowBlock, m) * n));
  float *sums = buffer.data();
  for (int64_t r = 0; r < m; r += kRowBlock) {
    int64_t rows = std::min(kRowBlock, m - r);
    detail::gemmNT(x + r * k, k, w, k, bias, sums, n, rows, n, k);
    for (int64_t i = 0; i < rows; ++i)
      applyEpilogue(epilogue, sums + i * n, n, out + (r + i) * ldo);
  }
}

/// Indices of the k largest scores, descending, ties to the lower index: an
/// insertion into the k best so far (k is small).
void topK(const float *scores, int64_t count, int64_t k, int32_t *out) {
  int64_t held = 0;
  for (int64_t e = 0; e < count; ++e) {
    float s = scores[e];
    if (held == k && !(s > scores[out[k - 1]]))
      continue; // ties keep the earlier index
    int64_t at = held < k ? held++ : k - 1;
    while (at > 0 && s > scores[out[at - 1]]) {
      out[at] = out[at - 1];
      --at;
    }
    out[at] = static_cast<int32_t>(e);
  }
}

} // namespace

void linear(ThreadPool &pool, const float *x, int64_t m, int64_t k, const float *w, int64_t n,
            const float *bias, const Epilogue &epilogue, float *y) {
  int64_t width = outputWidth(epilogue, n);
  double work = static_cast<double>(m) * n * k;
  if (!epilogue.enabled && m < 4 * static_cast<int64_t>(pool.size()) &&
      pool.chunksFor(n, work) > 1) {
    // Few rows (decode) of a wide product: the columns split instead.
    constexpr int64_t kColumns = 16;
    pool.parallelFor((n + kColumns - 1) / kColumns, work, [&](int64_t begin, int64_t end) {
      int64_t first = begin * kColumns, last = std::min(n, end * kColumns);
      detail::gemmNT(x, k, w + first * k, k, bias ? bias + first : nullptr, y + first, width, m,
                     last - first, k);
    });
    return;
  }
  pool.parallelFor(m, work, [&](int64_t begin, int64_t end) {
    project(x + begin * k, end - begin, k, w, n, bias, epilogue, y + begin * width, width);
  });
}

void route(ThreadPool &pool, const float *logits, int64_t tokens, int64_t experts,
           const float *correctionBias, const Routing &routing, int32_t *ids, float *weights) {
  int64_t k = routing.topK;
  pool.parallelFor(tokens, static_cast<double>(tokens) * experts * 32, [&](int64_t begin,
                                                                          int64_t end) {
    Scratch buffer(static_cast<size_t>(2 * experts));
    float *scores = buffer.data(), *selection = scores + experts;
    // Group scores and the kept groups, once per chunk.
    std::vector<float> groupScores(static_cast<size_t>(std::max(routing.numGroups, 1)));
    std::vector<int32_t> kept(static_cast<size_t>(std::max(routing.topkGroups, 1)));
    for (int64_t t = begin; t < end; ++t) {
      const float *l = logits + t * experts;
      int32_t *tokenIds = ids + t * k;
      float *w = weights + t * k;
      // Scores, and the values selection ranks (scores + correction bias).
      if (routing.kind == RoutingKind::SoftmaxTopK) {
        float maxLogit = *std::max_element(l, l + experts);
        double sum = 0;
        for (int64_t e = 0; e < experts; ++e)
          sum += scores[e] = std::exp(l[e] - maxLogit);
        for (int64_t e = 0; e < experts; ++e)
          scores[e] = static_cast<float>(scores[e] / sum);
      } else if (routing.kind == RoutingKind::TopKSoftmax) {
        std::copy(l, l + experts, scores);
      } else {
        for (int64_t e = 0; e < experts; ++e)
          scores[e] = sigmoid(l[e]);
      }
      for (int64_t e = 0; e < experts; ++e)
        selection[e] = scores[e] + (correctionBias ? correctionBias[e] : 0.0f);

      if (routing.kind == RoutingKind::SigmoidGroupTopK && routing.numGroups > 1) {
        // A group scores the sum of its two best experts; only the topkGroups
        // best groups stay, the others are masked to -inf (not 0).
        int64_t groups = routing.numGroups, size = experts / groups;
        for (int64_t g = 0; g < groups; ++g) {
          int32_t best[2];
          topK(selection + g * size, size, 2, best);
          groupScores[g] = selection[g * size + best[0]] + selection[g * size + best[1]];
        }
        topK(groupScores.data(), groups, routing.topkGroups, kept.data());
        // Masked: every expert of a group not kept (kept groups are few).
        for (int64_t g = 0; g < groups; ++g) {
          bool keep = false;
          for (int64_t i = 0; i < routing.topkGroups; ++i)
            keep |= kept[i] == g;
          if (!keep)
            std::fill(selection + g * size, selection + (g + 1) * size,
                      -std::numeric_limits<float>::infinity());
        }
      }
      topK(selection, experts, k, tokenIds);

      if (routing.kind != RoutingKind::TopKSoftmax)
        for (int64_t i = 0; i < k; ++i)
          w[i] = scores[tokenIds[i]];
      finishRoutingWeights(l, tokenIds, routing, w);
    }
  });
}

void sortByExpert(const int32_t *ids, int64_t slots, int64_t numExperts, int64_t firstExpert,
                  int32_t *permutation, int32_t *offsets, int32_t *numValid) {
  // A counting sort: stable by construction, linear in the slots.
  auto localId = [&](int64_t s) -> int64_t {
    int64_t id = static_cast<int64_t>(ids[s]) - firstExpert;
    return id >= 0 && id < numExperts ? id : numExperts; // the sentinel
  };
  std::vector<int64_t> next(numExperts + 1, 0);
  for (int64_t s = 0; s < slots; ++s)
    ++next[localId(s)];
  int64_t running = 0;
  for (int64_t e = 0; e <= numExperts; ++e) {
    int64_t count = next[e];
    next[e] = running;
    running += count;
    if (e < numExperts)
      offsets[e] = static_cast<int32_t>(running);
  }
  for (int64_t s = 0; s < slots; ++s)
    permutation[next[localId(s)]++] = static_cast<int32_t>(s);
  *numValid = offsets[numExperts - 1];
}

void permute(ThreadPool &pool, const float *hidden, int64_t hiddenSize,
             const int32_t *permutation, int64_t numValid, int64_t topK, float *rows) {
  pool.parallelFor(numValid, static_cast<double>(numValid) * hiddenSize / 4, [&](int64_t begin,
                                                                                int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *source = hidden + (permutation[r] / topK) * hiddenSize;
      std::copy(source, source + hiddenSize, rows + r * hiddenSize);
    }
  });
}

void groupedMatmul(ThreadPool &pool, const float *lhs, int64_t k, const float *weights,
                   int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                   const Epilogue &epilogue, float *out) {
  int64_t validRows = offsets[experts - 1];
  int64_t width = outputWidth(epilogue, n);
  pool.parallelFor(validRows, static_cast<double>(validRows) * n * k, [&](int64_t begin,
                                                                           int64_t end) {
    // The expert of the first row, then each expert's rows of the chunk at once.
    int64_t e = std::upper_bound(offsets, offsets + experts, static_cast<int32_t>(begin)) - offsets;
    for (int64_t r = begin; r < end; ++e) {
      int64_t last = std::min<int64_t>(end, offsets[e]);
      if (last > r)
        project(lhs + r * k, last - r, k, weights + e * n * k, n, bias ? bias + e * n : nullptr,
                epilogue, out + r * width, width);
      r = std::max(r, last);
    }
  });
}

void combine(ThreadPool &pool, const float *rows, const int32_t *permutation, int64_t slots,
             int64_t hiddenSize, const float *weights, int64_t tokens, int64_t topK,
             int64_t numValid, const float *addend, const float *addendGate, float *out) {
  // Sorted row of each slot; -1 for sentinel slots, whose rows are never read.
  std::vector<int32_t> rowOf(slots, -1);
  for (int64_t r = 0; r < numValid; ++r)
    rowOf[permutation[r]] = static_cast<int32_t>(r);
  pool.parallelFor(tokens, static_cast<double>(tokens) * (topK + 1) * hiddenSize, [&](int64_t begin,
                                                                                     int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float *y = out + t * hiddenSize;
      std::fill(y, y + hiddenSize, 0.0f); // written, so all-sentinel tokens are exact zeros
      for (int64_t k = 0; k < topK; ++k) {
        int32_t r = rowOf[t * topK + k];
        if (r < 0)
          continue;
        float w = weights[t * topK + k];
        const float *row = rows + static_cast<int64_t>(r) * hiddenSize;
        for (int64_t h = 0; h < hiddenSize; ++h)
          y[h] += w * row[h];
      }
      if (addend) {
        float gate = addendGate ? sigmoid(addendGate[t]) : 1.0f;
        for (int64_t h = 0; h < hiddenSize; ++h)
          y[h] += gate * addend[t * hiddenSize + h];
      }
    }
  });
}

void quantizeE4M3(ThreadPool &pool, const float *x, int64_t rows, int64_t k, uint8_t *q,
                  float *scales) {
  int64_t groups = (k + kScaleBlock - 1) / kScaleBlock;
  pool.parallelFor(rows, static_cast<double>(rows) * k * 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        int64_t first = g * kScaleBlock, last = std::min(k, first + kScaleBlock);
        double amax = 0.0;
        bool nan = false;
        for (int64_t i = first; i < last; ++i) {
          nan |= std::isnan(x[r * k + i]);
          amax = std::max(amax, static_cast<double>(std::fabs(x[r * k + i])));
        }
        // The scale is stored (and so used) as f32; the division is in double
        // so that x / scale is rounded once, to e4m3.
        float scale = nan ? NAN : static_cast<float>(std::max(amax / kE4M3Max, 1e-12));
        scales[r * groups + g] = scale;
        for (int64_t i = first; i < last; ++i)
          q[r * k + i] = encodeE4M3(static_cast<double>(x[r * k + i]) / scale);
      }
  });
}

namespace {

/// The value of every e4m3 code, decoded once.
const float *e4m3Values() {
  static const auto table = [] {
    std::array<float, 256> values;
    for (int code = 0; code < 256; ++code)
      values[code] = decodeE4M3(static_cast<uint8_t>(code));
    return values;
  }();
  return table.data();
}

/// A grouped matmul of f32 rows with quantised weights: each task dequantises
/// 64 weight rows (columns of the product) of one expert once, with
/// `decode(e, column, dst)` writing column `column` of expert `e` as k floats,
/// for all of the expert's rows.
template <typename Decode>
void groupedMatmulDecodedWeights(ThreadPool &pool, const float *rows, int64_t k, int64_t experts,
                                 int64_t n, const int32_t *offsets, const float *bias,
                                 const Epilogue &epilogue, float *out, Decode decode) {
  int64_t validRows = offsets[experts - 1];
  int64_t width = outputWidth(epilogue, n);
  constexpr int64_t kColumns = 64;
  int64_t chunks = (n + kColumns - 1) / kColumns;
  std::vector<float> sums(validRows * n); // before the epilogue, which needs whole rows
  // Work: the decoding of every touched expert's weights, and the products.
  double work = static_cast<double>(validRows) * n * k + static_cast<double>(experts) * n * k;
  pool.parallelFor(experts * chunks, work, [&](int64_t begin, int64_t end) {
    Scratch buffer(static_cast<size_t>(kColumns * k));
    float *w = buffer.data();
    for (int64_t task = begin; task < end; ++task) {
      int64_t e = task / chunks, first = (task % chunks) * kColumns;
      int64_t rowBegin = e > 0 ? offsets[e - 1] : 0, rowEnd = offsets[e];
      if (rowBegin == rowEnd)
        continue; // an idle expert: its weights are not even decoded
      int64_t columns = std::min(kColumns, n - first);
      for (int64_t c = 0; c < columns; ++c)
        decode(e, first + c, w + c * k);
      detail::gemmNT(rows + rowBegin * k, k, w, k, bias ? bias + e * n + first : nullptr,
                     sums.data() + rowBegin * n + first, n, rowEnd - rowBegin, columns, k);
    }
  });
  pool.parallelFor(validRows, static_cast<double>(validRows) * n * 4, [&](int64_t begin,
                                                                          int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      applyEpilogue(epilogue, sums.data() + r * n, n, out + r * width);
  });
}

/// The FP8 grouped matmul on rows already in f32 (dequantised, or f32 to begin
/// with): e4m3 weights times their 128x128 block scales.
void groupedMatmulE4M3Weights(ThreadPool &pool, const float *rows, int64_t k,
                              const uint8_t *weights, const float *weightScales, int64_t experts,
                              int64_t n, const int32_t *offsets, const float *bias,
                              const Epilogue &epilogue, float *out) {
  int64_t kBlocks = (k + kScaleBlock - 1) / kScaleBlock;
  int64_t nBlocks = (n + kScaleBlock - 1) / kScaleBlock;
  const float *table = e4m3Values();
  groupedMatmulDecodedWeights(
      pool, rows, k, experts, n, offsets, bias, epilogue, out,
      [&](int64_t e, int64_t column, float *w) {
        const uint8_t *source = weights + (e * n + column) * k;
        const float *scale = weightScales + (e * nBlocks + column / kScaleBlock) * kBlocks;
        for (int64_t i = 0; i < k; ++i)
          w[i] = table[source[i]] * scale[i / kScaleBlock];
      });
}

} // namespace

void groupedMatmulMXFP4(ThreadPool &pool, const float *lhs, int64_t k, const uint8_t *weights,
                        const uint8_t *scales, int64_t experts, int64_t n, const int32_t *offsets,
                        const float *bias, const Epilogue &epilogue, float *out) {
  int64_t kBlocks = (k + mxfp4::kBlock - 1) / mxfp4::kBlock;
  int64_t rowBytes = mxfp4::packedRowBytes(k);
  groupedMatmulDecodedWeights(
      pool, lhs, k, experts, n, offsets, bias, epilogue, out,
      [&](int64_t e, int64_t column, float *w) {
        // A block at a time: its scale, then its 16 bytes of two codes each
        // (low nibble first), the values exact in f32.
        const uint8_t *codes = weights + (e * n + column) * rowBytes;
        const uint8_t *scale = scales + (e * n + column) * kBlocks;
        for (int64_t b = 0; b < kBlocks; ++b) {
          float s = mxfp4::decodeE8M0(scale[b]);
          int64_t first = b * mxfp4::kBlock, last = std::min(k, first + mxfp4::kBlock);
          for (int64_t i = first; i + 1 < last; i += 2) {
            uint8_t byte = codes[i / 2];
            w[i] = mxfp4::kE2M1Values[byte & 0xF] * s;
            w[i + 1] = mxfp4::kE2M1Values[byte >> 4] * s;
          }
          if ((last - first) % 2)
            w[last - 1] = mxfp4::kE2M1Values[codes[(last - 1) / 2] & 0xF] * s;
        }
      });
}

void groupedMatmulFP8(ThreadPool &pool, const uint8_t *lhs, const float *lhsScales, int64_t k,
                      const uint8_t *weights, const float *weightScales, int64_t experts,
                      int64_t n, const int32_t *offsets, const float *bias,
                      const Epilogue &epilogue, float *out) {
  int64_t validRows = offsets[experts - 1];
  int64_t kBlocks = (k + kScaleBlock - 1) / kScaleBlock;
  // The rows, dequantised once (each is read by every column task).
  const float *table = e4m3Values();
  std::vector<float> rows(validRows * k);
  pool.parallelFor(validRows, static_cast<double>(validRows) * k, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t i = 0; i < k; ++i)
        rows[r * k + i] = table[lhs[r * k + i]] * lhsScales[r * kBlocks + i / kScaleBlock];
  });
  groupedMatmulE4M3Weights(pool, rows.data(), k, weights, weightScales, experts, n, offsets, bias,
                           epilogue, out);
}

void groupedMatmulFP8Weights(ThreadPool &pool, const float *lhs, int64_t k,
                             const uint8_t *weights, const float *weightScales, int64_t experts,
                             int64_t n, const int32_t *offsets, const float *bias,
                             const Epilogue &epilogue, float *out) {
  groupedMatmulE4M3Weights(pool, lhs, k, weights, weightScales, experts, n, offsets, bias,
                           epilogue, out);
}

} // namespace moec::rt::cpu
