//===- MoEKernels.cpp - CPU kernels for the lowered moe ops -----------------===//

#include "moec/runtime/cpu/MoEKernels.h"
#include "moec/runtime/Float8.h"

#include "../RoutingWeights.h"

#include <algorithm>
#include <array>
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

/// x · w (both length k), with independent partial sums so the compiler can
/// vectorise without reassociating.
float dot(const float *x, const float *w, int64_t k) {
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int lane = 0; lane < 8; ++lane)
      partial[lane] += x[i + lane] * w[i + lane];
  float sum = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
              ((partial[4] + partial[5]) + (partial[6] + partial[7]));
  for (; i < k; ++i)
    sum += x[i] * w[i];
  return sum;
}

/// One output row: epilogue(x · wᵀ + bias) for w [n, k].
void projectRow(const float *x, int64_t k, const float *w, int64_t n, const float *bias,
                const Epilogue &epilogue, float *scratch, float *out) {
  for (int64_t j = 0; j < n; ++j)
    scratch[j] = dot(x, w + j * k, k) + (bias ? bias[j] : 0.0f);
  applyEpilogue(epilogue, scratch, n, out);
}

/// Indices of the k largest scores, descending, ties to the lower index.
void topK(const float *scores, int64_t count, int64_t k, int32_t *out) {
  std::vector<int32_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  std::copy(order.begin(), order.begin() + k, out);
}

} // namespace

void linear(ThreadPool &pool, const float *x, int64_t m, int64_t k, const float *w, int64_t n,
            const float *bias, const Epilogue &epilogue, float *y) {
  int64_t width = outputWidth(epilogue, n);
  pool.parallelFor(m, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(n);
    for (int64_t row = begin; row < end; ++row)
      projectRow(x + row * k, k, w, n, bias, epilogue, scratch.data(), y + row * width);
  });
}

void route(ThreadPool &pool, const float *logits, int64_t tokens, int64_t experts,
           const float *correctionBias, const Routing &routing, int32_t *ids, float *weights) {
  int64_t k = routing.topK;
  pool.parallelFor(tokens, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(experts), selection(experts);
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
        std::copy(l, l + experts, scores.begin());
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
        std::vector<float> groupScores(groups);
        for (int64_t g = 0; g < groups; ++g) {
          int32_t best[2];
          topK(selection.data() + g * size, size, 2, best);
          groupScores[g] = selection[g * size + best[0]] + selection[g * size + best[1]];
        }
        std::vector<int32_t> kept(routing.topkGroups);
        topK(groupScores.data(), groups, routing.topkGroups, kept.data());
        std::vector<bool> keep(groups, false);
        for (int32_t g : kept)
          keep[g] = true;
        for (int64_t e = 0; e < experts; ++e)
          if (!keep[e / size])
            selection[e] = -std::numeric_limits<float>::infinity();
      }
      topK(selection.data(), experts, k, tokenIds);

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
  pool.parallelFor(numValid, [&](int64_t begin, int64_t end) {
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
  pool.parallelFor(validRows, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(n);
    // The expert of the first row, then walk forward.
    int64_t e = std::upper_bound(offsets, offsets + experts, static_cast<int32_t>(begin)) - offsets;
    for (int64_t r = begin; r < end; ++r) {
      while (r >= offsets[e])
        ++e;
      projectRow(lhs + r * k, k, weights + e * n * k, n, bias ? bias + e * n : nullptr,
                 epilogue, scratch.data(), out + r * width);
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
  pool.parallelFor(tokens, [&](int64_t begin, int64_t end) {
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
  pool.parallelFor(rows, [&](int64_t begin, int64_t end) {
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

/// The FP8 grouped matmul on rows already in f32 (dequantised, or f32 to begin
/// with): each task dequantises 64 rows of one expert's e4m3 weights once, for
/// all of the expert's rows.
void groupedMatmulE4M3Weights(ThreadPool &pool, const float *rows, int64_t k,
                              const uint8_t *weights, const float *weightScales, int64_t experts,
                              int64_t n, const int32_t *offsets, const float *bias,
                              const Epilogue &epilogue, float *out) {
  int64_t validRows = offsets[experts - 1];
  int64_t width = outputWidth(epilogue, n);
  int64_t kBlocks = (k + kScaleBlock - 1) / kScaleBlock;
  int64_t nBlocks = (n + kScaleBlock - 1) / kScaleBlock;
  const float *table = e4m3Values();
  constexpr int64_t kColumns = 64;
  int64_t chunks = (n + kColumns - 1) / kColumns;
  std::vector<float> sums(validRows * n); // before the epilogue, which needs whole rows
  pool.parallelFor(experts * chunks, [&](int64_t begin, int64_t end) {
    std::vector<float> w(kColumns * k);
    for (int64_t task = begin; task < end; ++task) {
      int64_t e = task / chunks, first = (task % chunks) * kColumns;
      int64_t rowBegin = e > 0 ? offsets[e - 1] : 0, rowEnd = offsets[e];
      if (rowBegin == rowEnd)
        continue; // an idle expert: its weights are not even decoded
      int64_t columns = std::min(kColumns, n - first);
      for (int64_t c = 0; c < columns; ++c) {
        const uint8_t *source = weights + (e * n + first + c) * k;
        const float *scale = weightScales + (e * nBlocks + (first + c) / kScaleBlock) * kBlocks;
        for (int64_t i = 0; i < k; ++i)
          w[c * k + i] = table[source[i]] * scale[i / kScaleBlock];
      }
      for (int64_t r = rowBegin; r < rowEnd; ++r)
        for (int64_t c = 0; c < columns; ++c)
          sums[r * n + first + c] =
              dot(rows + r * k, w.data() + c * k, k) + (bias ? bias[e * n + first + c] : 0.0f);
    }
  });
  pool.parallelFor(validRows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      applyEpilogue(epilogue, sums.data() + r * n, n, out + r * width);
  });
}

} // namespace

void groupedMatmulFP8(ThreadPool &pool, const uint8_t *lhs, const float *lhsScales, int64_t k,
                      const uint8_t *weights, const float *weightScales, int64_t experts,
                      int64_t n, const int32_t *offsets, const float *bias,
                      const Epilogue &epilogue, float *out) {
  int64_t validRows = offsets[experts - 1];
  int64_t kBlocks = (k + kScaleBlock - 1) / kScaleBlock;
  // The rows, dequantised once (each is read by every column task).
  const float *table = e4m3Values();
  std::vector<float> rows(validRows * k);
  pool.parallelFor(validRows, [&](int64_t begin, int64_t end) {
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
