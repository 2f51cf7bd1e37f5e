//===- fp8_decode.cu - the FP8 grouped matmul's decode tiles at MoE shapes -===//
//
// Times the FP8 grouped matmul's decode tiles (FP8DecodeTile.cuh, in several
// shapes of block and pipeline, and the shared-memory and CUTLASS tiles
// before them) against moec's bf16 grouped matmul (the tile its artifacts
// run) at the four benchmark models' expert shapes, random top-k routing, T =
// 1, 2, 4, 8, 16, 128 by default. Each FP8 tile's result is first checked
// against a float64 reference of the same codes and scales (the largest error
// over the result's RMS; 'BAD' past 1e-3: QGMMA's accumulation, whose bound
// CudaKernelsTest sets, lands there). Three times per kernel, each the
// touched experts' weight bytes per second against the H200's copy bandwidth
// (4.25 TB/s; FP8 one byte a weight, bf16 two):
//   flush: the median of single launches, a 256 MiB write before each (the
//          L2 cold, as grouped_matmul.cpp times);
//   b2b:   a CUDA graph of 24 back-to-back launches over 4 routings (other
//          experts each time: programmatic launches overlapping one's start
//          with the last's end);
//   pdl:   the same through the SettledOffsets entry points, whose weights are
//          requested before the dependent launch's wait: what an artifact's
//          decode step sees.
// 'x' is the bf16 time over this one (flush, and pdl; 1.6x is the target).
//
//   moec-bench-fp8-decode [T,T,...]      (MOEC_BENCH_MODEL=PREFIX: one model)
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

// The kernels' internal tiles (runtime/src/cuda, on the include path).
#include "Epilogue.cuh"
#include "FP8DecodeTile.cuh"
#include "Tuning.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace moec::rt;

namespace {

constexpr double kCopyBandwidth = 4.25e12; // bytes/s, measured on the H200
constexpr int kRoutings = 4;               // b2b: routings cycled through
constexpr int kGraphLaunches = 24;

struct Shape {
  const char *model;
  const char *projection;
  int64_t experts, n, k, topK;
  bool gated;
  bool bias; // gpt-oss: bias rows and its clamped SiLU
};

/// Random bytes valid as bf16 (magnitudes 2^-7 to 2) and as e4m3 (no NaN code).
void fillRandom(DeviceBuffer &buffer, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(std::min<size_t>(buffer.size(), 32 << 20));
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    uint8_t low = static_cast<uint8_t>(rng());
    bytes[i] = (low & 0x7F) == 0x7F ? low ^ 1 : low;
    bytes[i + 1] = static_cast<uint8_t>((rng() & 0x80) | 0x3C | (rng() & 3));
  }
  auto *data = static_cast<uint8_t *>(buffer.data());
  CHECK_CUDA(cudaMemcpy(data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  for (size_t done = bytes.size(); done < buffer.size(); done *= 2)
    CHECK_CUDA(cudaMemcpy(data + done, data, std::min(done, buffer.size() - done),
                          cudaMemcpyDeviceToDevice));
}

template <typename T> DeviceBuffer upload(const std::vector<T> &values) {
  DeviceBuffer buffer;
  require(DeviceBuffer::allocate(std::max<size_t>(values.size(), 1) * sizeof(T), buffer), "alloc");
  CHECK_CUDA(cudaMemcpy(buffer.data(), values.data(), values.size() * sizeof(T),
                        cudaMemcpyHostToDevice));
  return buffer;
}
DeviceBuffer allocate(size_t bytes) {
  DeviceBuffer buffer;
  require(DeviceBuffer::allocate(std::max<size_t>(bytes, 1), buffer), "alloc");
  return buffer;
}

__device__ float e4m3(uint8_t code) {
  __nv_fp8_e4m3 v;
  v.__x = code;
  return float(v);
}

/// The float64 reference: out[s, j] for slot s (of expert expertOf[s]) and
/// output column j, each 128-deep block's sum times its two scales, then the
/// bias and epilogue as the tiles apply them (in f32).
__global__ void referenceKernel(cuda::FP8Problem problem, const int32_t *expertOf, int64_t slots,
                                float *out) {
  const cuda::tiles::Layout &p = problem.layout;
  int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, s = blockIdx.y;
  if (j >= p.width || s >= slots)
    return;
  int64_t e = expertOf[s];
  int64_t kBlocks = (p.k + 127) / 128, nBlocks = (p.n + 127) / 128;
  auto dot = [&](int64_t row) {
    const uint8_t *w = problem.weights + (e * p.n + row) * p.k, *x = problem.lhs + s * p.k;
    double sum = 0;
    for (int64_t b = 0; b < kBlocks; ++b) {
      double block = 0;
      for (int64_t kk = b * 128, end = b * 128 + 128 < p.k ? b * 128 + 128 : p.k; kk < end; ++kk)
        block += double(e4m3(w[kk])) * e4m3(x[kk]);
      sum += block * problem.weightScales[(e * nBlocks + row / 128) * kBlocks + b] *
             problem.lhsScales[s * kBlocks + b];
    }
    return float(sum) + (p.bias ? p.bias[e * p.n + row] : 0.0f);
  };
  if (p.gated())
    out[s * p.width + j] = cuda::device::gatedEpilogue(p.epilogue, dot(2 * j), dot(2 * j + 1));
  else
    out[s * p.width + j] =
        p.epilogue.enabled ? cuda::device::activate(p.epilogue.kind, p.epilogue.alpha, dot(j))
                           : dot(j);
}

/// Largest |got - want| over want's RMS.
double relativeError(const std::vector<float> &got, const std::vector<float> &want) {
  double squares = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    squares += double(want[i]) * want[i];
    double d = std::abs(double(got[i]) - want[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst / std::sqrt(squares / std::max<size_t>(want.size(), 1));
}

struct Routing {
  std::vector<int32_t> offsets, expertOf;
  size_t touched = 0;
  int largest = 0;
};
Routing route(const Shape &shape, int64_t tokens, std::mt19937 &rng) {
  Routing r;
  std::vector<int> rows(shape.experts, 0);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(shape.experts) - 1);
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int> chosen;
    while (static_cast<int64_t>(chosen.size()) < shape.topK)
      chosen.insert(pick(rng));
    for (int e : chosen)
      ++rows[e];
  }
  int32_t running = 0;
  for (int64_t e = 0; e < shape.experts; ++e) {
    r.offsets.push_back(running += rows[e]);
    for (int i = 0; i < rows[e]; ++i)
      r.expertOf.push_back(static_cast<int32_t>(e));
    r.touched += rows[e] > 0;
    r.largest = std::max(r.largest, rows[e]);
  }
  return r;
}

/// A launch on `offsets`; `settled`: through the SettledOffsets entry points
/// (the offsets were written two launches before, so the weights may be
/// requested before the dependent launch's wait, as artifacts run them).
using Launch = std::function<void(const int32_t *offsets, bool settled, cudaStream_t)>;

/// The FP8 decode tile variants: TOK rows, RW row warps, KS K warps, DEPTH steps.
struct Variant {
  std::string name;
  int tok;
  Status (*launch)(cuda::FP8Problem, int64_t, cudaStream_t);
};
template <int TOK, int RW, int KS, int DEPTH, bool ASYNC = false, int PREFETCH = 0,
          int MINWARPS = 0>
Variant variant() {
  return {std::string(ASYNC ? "async" : "dec") + std::to_string(TOK) + "r" + std::to_string(RW) +
              "k" + std::to_string(KS) + "d" + std::to_string(DEPTH) +
              (PREFETCH ? "p" + std::to_string(64 << PREFETCH) : "") +
              (MINWARPS ? "w" + std::to_string(MINWARPS) : ""),
          TOK, cuda::fp8decode::launchDecodeTile<TOK, RW, KS, DEPTH, ASYNC, PREFETCH, MINWARPS>};
}
const std::vector<Variant> &variants() {
  // Rings in registers, then in shared memory; the runtime's Decode8 is
  // dec8r1k2d4p128 below 32 blocks of K and dec8r1k4d4p128 from there, its
  // Decode8Async async8r1k4d4p128 and async8r1k4d6p128. 'w12': registers
  // capped for 12 warps an SM.
  static const std::vector<Variant> all = {
      variant<8, 1, 2, 4, false, 1>(),     variant<8, 1, 2, 4, false, 1, 12>(),
      variant<8, 1, 4, 4, false, 1>(),     variant<8, 1, 4, 4, false, 1, 12>(),
      variant<8, 2, 2, 4, false, 1>(),     variant<8, 1, 4, 2, false, 1>(),
      variant<8, 1, 2, 6, false, 1>(),     variant<8, 1, 4, 4, false, 2>(),
      variant<8, 1, 4, 6, true, 1>(),      variant<8, 1, 4, 4, true, 1>(),
      variant<8, 2, 2, 6, true, 1>(),      variant<8, 1, 2, 8, true, 1>(),
      variant<8, 1, 2, 4, true, 1>(),
  };
  return all;
}

void run(const Shape &shape, int64_t tokens, std::mt19937 &rng, cudaStream_t stream) {
  const int64_t slots = tokens * shape.topK, k = shape.k, n = shape.n, e = shape.experts;
  const int64_t width = shape.gated ? n / 2 : n;
  const int64_t kBlocks = (k + 127) / 128, nBlocks = (n + 127) / 128;
  std::vector<Routing> routings;
  std::vector<DeviceBuffer> offsets;
  for (int i = 0; i < kRoutings; ++i) {
    routings.push_back(route(shape, tokens, rng));
    offsets.push_back(upload(routings.back().offsets));
  }
  double touched = 0;
  for (const Routing &r : routings)
    touched += r.touched;
  touched /= kRoutings; // b2b: the mean over the routings
  const Routing &first = routings[0];

  DeviceBuffer weightsFP8 = allocate(e * n * k), weightsBF16 = allocate(e * n * k * 2),
               rowsFP8 = allocate(slots * k), rowsBF16 = allocate(slots * k * 2),
               out = allocate(slots * n * 4), reference = allocate(slots * width * 4);
  fillRandom(weightsFP8, 1);
  fillRandom(weightsBF16, 2);
  fillRandom(rowsFP8, 3);
  fillRandom(rowsBF16, 4);
  std::uniform_real_distribution<float> scale(1e-3f, 4e-3f), unit(-1.0f, 1.0f);
  std::vector<float> weightScales(e * nBlocks * kBlocks), rowScales(slots * kBlocks), bias;
  for (float &v : weightScales)
    v = scale(rng);
  for (float &v : rowScales)
    v = scale(rng) * 100.0f;
  DeviceBuffer dWeightScales = upload(weightScales), dRowScales = upload(rowScales), dBias;
  if (shape.bias) {
    bias.resize(e * n);
    for (float &v : bias)
      v = unit(rng);
    dBias = upload(bias);
  }
  const float *biasRows = shape.bias ? dBias.dataAs<float>() : nullptr;
  cpu::Epilogue epilogue;
  if (shape.gated)
    epilogue = {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Interleaved};
  if (shape.gated && shape.bias) {
    epilogue.alpha = 1.702f;
    epilogue.beta = 1.0f;
    epilogue.limit = 7.0f;
  }
  auto problemFor = [&](const int32_t *o) {
    cuda::FP8Problem problem{{k, e, n, width, o, slots, biasRows, epilogue, 0, 0,
                              out.dataAs<float>()},
                             rowsFP8.dataAs<uint8_t>(),
                             dRowScales.dataAs<float>(),
                             weightsFP8.dataAs<uint8_t>(),
                             dWeightScales.dataAs<float>()};
    return problem;
  };

  // The reference on the first routing.
  {
    DeviceBuffer expertOf = upload(first.expertOf);
    cuda::FP8Problem problem = problemFor(offsets[0].dataAs<int32_t>());
    problem.layout.out = reference.dataAs<float>();
    referenceKernel<<<dim3(static_cast<unsigned>((width + 127) / 128), static_cast<unsigned>(slots)),
                      128, 0, stream>>>(problem, expertOf.dataAs<int32_t>(), slots,
                                        reference.dataAs<float>());
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  std::vector<float> want(slots * width);
  CHECK_CUDA(cudaMemcpy(want.data(), reference.data(), want.size() * 4, cudaMemcpyDeviceToHost));

  DeviceBuffer flush = allocate(256 << 20);
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  // flush: the median single launch after an L2 flush.
  auto timeFlushed = [&](const Launch &launch) {
    launch(offsets[0].dataAs<int32_t>(), false, stream);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<float> samples;
    for (int i = 0; i < 30; ++i) {
      CHECK_CUDA(cudaMemsetAsync(flush.data(), i & 0xFF, flush.size(), stream));
      CHECK_CUDA(cudaEventRecord(start, stream));
      launch(offsets[i % kRoutings].dataAs<int32_t>(), false, stream);
      CHECK_CUDA(cudaEventRecord(stop, stream));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      samples.push_back(ms);
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  };
  // b2b: a graph of back-to-back launches over the routings, the best of 5
  // replays; `settled` through the SettledOffsets entry points.
  auto timeGraph = [&](const Launch &launch, bool settled) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kGraphLaunches; ++i)
      launch(offsets[i % kRoutings].dataAs<int32_t>(), settled, stream);
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    float best = INFINITY;
    for (int i = 0; i < 6; ++i) {
      CHECK_CUDA(cudaMemsetAsync(flush.data(), i & 0xFF, flush.size(), stream));
      CHECK_CUDA(cudaEventRecord(start, stream));
      CHECK_CUDA(cudaGraphLaunch(exec, stream));
      CHECK_CUDA(cudaEventRecord(stop, stream));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (i > 0)
        best = std::min(best, ms / kGraphLaunches);
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
    return best;
  };

  const double fp8Bytes = touched * n * k, bf16Bytes = 2 * fp8Bytes;
  float bf16Ms = 0;
  float bf16SettledMs = 0;
  auto line = [&](const std::string &kernel, double bytes, const Launch &launch,
                  const std::string &check) {
    float flushMs = timeFlushed(launch), graphMs = timeGraph(launch, false),
          settledMs = timeGraph(launch, true);
    if (bf16Ms == 0)
      bf16Ms = flushMs, bf16SettledMs = settledMs;
    auto copy = [&](float ms) { return 100.0 * bytes / (ms * 1e-3) / kCopyBandwidth; };
    std::printf("%-14s %-8s T=%-4lld touched %5.1f/%-3lld max %3d  %-22s flush %8.1f us %5.1f%% "
                "x%.2f  b2b %8.1f us %5.1f%%  pdl %8.1f us %5.1f%% x%.2f  %s\n",
                shape.model, shape.projection, static_cast<long long>(tokens), touched,
                static_cast<long long>(e), first.largest, kernel.c_str(), flushMs * 1e3,
                copy(flushMs), bf16Ms / flushMs, graphMs * 1e3, copy(graphMs), settledMs * 1e3,
                copy(settledMs), bf16SettledMs / settledMs, check.c_str());
    std::fflush(stdout);
  };

  // bf16: the tile the artifacts run, bf16 rows, bf16 gate/up results.
  cuda::BF16Tile bf16Tile = cuda::chooseBF16Tile(slots, e, k, shape.gated, shape.bias);
  Launch bf16 = [&](const int32_t *o, bool settled, cudaStream_t s) {
    const cuda::BF16 *lhs = rowsBF16.dataAs<cuda::BF16>();
    const uint16_t *w = weightsBF16.dataAs<uint16_t>();
    // (One call per branch: nvcc flags a [[nodiscard]] Status chosen by ?: as discarded.)
    if (shape.gated && settled)
      require(cuda::groupedMatmulBF16SettledOffsets(lhs, slots, k, w, e, n, o, biasRows, epilogue,
                                                    out.dataAs<cuda::BF16>(), s),
              "bf16");
    else if (shape.gated)
      require(cuda::groupedMatmulBF16(lhs, slots, k, w, e, n, o, biasRows, epilogue,
                                      out.dataAs<cuda::BF16>(), s),
              "bf16");
    else if (settled)
      require(cuda::groupedMatmulBF16SettledOffsets(lhs, slots, k, w, e, n, o, biasRows, epilogue,
                                                    out.dataAs<float>(), s),
              "bf16");
    else
      require(cuda::groupedMatmulBF16(lhs, slots, k, w, e, n, o, biasRows, epilogue,
                                      out.dataAs<float>(), s),
              "bf16");
  };
  line(std::string("bf16 ") + cuda::bf16TileName(bf16Tile), bf16Bytes, bf16, "");

  auto fp8 = [&](const std::string &name, const Launch &launch) {
    CHECK_CUDA(cudaMemset(out.data(), 0xFF, slots * width * 4)); // NaN
    launch(offsets[0].dataAs<int32_t>(), false, stream);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<float> got(slots * width);
    CHECK_CUDA(cudaMemcpy(got.data(), out.data(), got.size() * 4, cudaMemcpyDeviceToHost));
    double error = relativeError(got, want);
    char check[64];
    std::snprintf(check, sizeof check, "err %.1e%s", error, error <= 1e-3 ? "" : " BAD");
    line(name, fp8Bytes, launch, check);
  };
  cuda::FP8Tile chosen = cuda::chooseFP8Tile(slots, e, k, n, true);
  for (cuda::FP8Tile tile : {cuda::FP8Tile::Auto, cuda::FP8Tile::Tok8, cuda::FP8Tile::Tok16,
                             cuda::FP8Tile::Tok32, cuda::FP8Tile::WgmmaPingpong,
                             cuda::FP8Tile::Decode8, cuda::FP8Tile::Decode8Async}) {
    if ((tile == cuda::FP8Tile::Tok16 || tile == cuda::FP8Tile::Tok32) && tokens < 128)
      continue;
    std::string name = std::string("fp8 ") + cuda::fp8TileName(tile == cuda::FP8Tile::Auto ? chosen : tile) +
                       (tile == cuda::FP8Tile::Auto ? "*" : "");
    if (tile != cuda::FP8Tile::Auto && chosen == tile)
      continue;
    fp8(name, [&, tile](const int32_t *o, bool settled, cudaStream_t s) {
      require(cuda::groupedMatmulFP8({rowsFP8.dataAs<uint8_t>(), slots, dRowScales.dataAs<float>(),
                                      k, weightsFP8.dataAs<uint8_t>(),
                                      dWeightScales.dataAs<float>(), e, n, o, biasRows, epilogue},
                                     out.dataAs<float>(), s, tile, settled),
              "fp8");
    });
  }
  double rowsPerExpert = double(slots) / std::max<size_t>(first.touched, 1);
  for (const Variant &v : variants()) {
    // Tiles far smaller than the rows per expert stream the weights many times.
    if (v.tok * 4 < rowsPerExpert || (v.tok > 8 && tokens < 128))
      continue;
    fp8("fp8 " + v.name, [&, v](const int32_t *o, bool settled, cudaStream_t s) {
      cuda::FP8Problem problem = problemFor(o);
      problem.layout.settledOffsets = settled;
      require(v.launch(problem, slots, s), v.name.c_str());
    });
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
}

} // namespace

int main(int argc, char **argv) {
  if (cudaDeviceCountOrZero() == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  const Shape shapes[] = {
      {"Qwen3-30B-A3B", "gate_up", 128, 2 * 768, 2048, 8, true, false},
      {"Qwen3-30B-A3B", "down", 128, 2048, 768, 8, false, false},
      {"gpt-oss-120b", "gate_up", 128, 2 * 2880, 2880, 4, true, true},
      {"gpt-oss-120b", "down", 128, 2880, 2880, 4, false, true},
      {"Mixtral-8x7B", "gate_up", 8, 2 * 14336, 4096, 2, true, false},
      {"Mixtral-8x7B", "down", 8, 4096, 14336, 2, false, false},
      {"DeepSeek-V3", "gate_up", 256, 2 * 2048, 7168, 8, true, false},
      {"DeepSeek-V3", "down", 256, 7168, 2048, 8, false, false},
  };
  std::vector<int64_t> tokenCounts = {1, 2, 4, 8, 16, 128};
  if (argc > 1) {
    tokenCounts.clear();
    for (char *p = argv[1]; *p;) {
      tokenCounts.push_back(std::strtoll(p, &p, 10));
      if (*p == ',')
        ++p;
      else if (*p)
        return std::fprintf(stderr, "usage: %s [T,T,...]\n", argv[0]), 2;
    }
  }
  std::printf("FP8 decode tiles against moec's bf16 grouped matmul; %% = touched experts' weight "
              "bytes (FP8 1, bf16 2 a weight) / time / 4.25 TB/s; flush: median single launch, "
              "L2 flushed; b2b: graph of %d launches over %d routings; pdl: b2b with settled "
              "offsets; x = bf16 time / this; err = max |got - f64 reference| / RMS; '*' = "
              "chooseFP8Tile's\n",
              kGraphLaunches, kRoutings);
  const char *only = std::getenv("MOEC_BENCH_MODEL");
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 rng(0);
  for (const Shape &shape : shapes)
    for (int64_t tokens : tokenCounts)
      if (!only || std::strncmp(shape.model, only, std::strlen(only)) == 0)
        run(shape, tokens, rng, stream);
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
