//===- grouped_matmul.cpp - grouped-matmul kernels at MoE shapes -----------===//
//
// Times moec's bf16-weight CUDA grouped matmul (every tile of the tensor-core
// kernel, and CUTLASS's wgmma kernel where the runtime has it) at the four benchmark models' expert
// shapes, random top-k routing, T = 1 ... 8192 tokens, the L2 flushed before
// each call, and reports the touched experts' weight bytes per second against
// the H200's measured copy bandwidth (4.25 TB/s) and the FLOP rate against its
// bf16 matmul ceiling (685 TFLOP/s). A kernel microbenchmark: the model
// benchmark against transformers is bench/bench_moe.py.
//
//   moec-bench-grouped-matmul [T,T,...] [SKEW]     (run on the GPU machine;
//   MOEC_BENCH_MODEL=PREFIX: one model's shapes)
//
// MOEC_BENCH_MXFP4=1: MXFP4 weights (groupedMatmulMXFP4, W4A16) against the
// bf16 kernel moec emits for the same shape (its Auto tile, bf16 rows): the
// MXFP4 tiles with f32 rows and f32 results (what --expert-weights=mxfp4
// blocks pass), and Auto (and from T = 64 the dequantising tile) with bf16
// rows and the bf16 line's results (bf16 for gate/up: what whole models
// pass), each with its code and scale bytes per second against copy and its
// speed-up over bf16 (bf16 time / MXFP4 time). From T = 64 the decode tiles
// run only where Auto takes them.
//
// MOEC_BENCH_FP8=1: the FP8 expert GEMMs as the --fp8 artifacts call them, on
// the tile Auto picks, each finish of the wgmma tiles (FP8Epilogue, Tuning.h)
// in the same binary: gate/up quantised for the down projection
// (groupedMatmulFP8Quantized: the f32 product and the pass, or CUTLASS's
// epilogue writing bf16 h or a bf16 product for the pass), down into f32 rows
// (the bias pass, or CUTLASS's row broadcast) and into bf16 rows; beside them
// the GEMM alone (no bias or activation, f32 results written by CUTLASS) and,
// for gate/up, the fused path's GEMM without its pass ('its gemm'). A
// cell's variants are timed in turns, a sample of each a round (the GPU's
// clock drifts over a cell: timed one after another, the same kernel measured
// up to 15 % apart). '%% fp8': 2*slots*N*K / time / 1280 TFLOP/s; 'x': the
// pass's time / this time.
//
// gpt-oss's shapes carry its bias rows and clamped SiLU (alpha 1.702, up + 1,
// limit 7): without them gpt-oss's kernel figures leave out the bias loads of
// its epilogues.
//
// SKEW > 0 routes unevenly: expert e is picked with weight 1 / (rank + 1)^SKEW
// (a fixed random ranking), as real routers do more than uniform routing --
// DeepSeek-V3's 64-row tiles took 5.23 ms per call in the artifact against
// 3.78 ms here with uniform routing. The largest
// expert's row count is printed with the touched count.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

// The kernels' internal tile choices (runtime/src/cuda, on the include path).
#include "Tuning.h"

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
constexpr double kBF16Ceiling = 685e12;    // FLOP/s, measured on the H200
constexpr double kFP8Ceiling = 1280e12;    // FLOP/s, measured on the H200

#define CHECK(expr)                                                                \
  do {                                                                             \
    Status s_ = (expr);                                                            \
    if (!s_.isOk()) {                                                              \
      std::fprintf(stderr, "%s\n", s_.message().c_str());                          \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

/// Fills `buffer` with random values that are valid both as bf16 (magnitudes
/// 2^-7 to 2, either sign) and as e4m3 codes (no NaN byte): a 32 MiB random
/// pattern, repeated. With the constant byte 0x3C in the buffers instead,
/// Mixtral's bf16 GEMMs timed at 105-115 % of the bf16 ceiling here, 1.2 ms per
/// call faster than in the artifact: likely because constant operands toggle
/// few bits, so the tensor cores draw less power and hold higher clocks.
void fillRandom(DeviceBuffer &buffer) {
  static const std::vector<uint8_t> pattern = [] {
    std::mt19937 rng(7);
    std::vector<uint8_t> bytes(32 << 20);
    for (size_t i = 0; i < bytes.size(); i += 2) {
      uint8_t low = static_cast<uint8_t>(rng());
      bytes[i] = (low & 0x7F) == 0x7F ? low ^ 1 : low;                // mantissa; e4m3 not NaN
      bytes[i + 1] = static_cast<uint8_t>((rng() & 0x80) | 0x3C | (rng() & 3)); // sign, exponent
    }
    return bytes;
  }();
  size_t size = buffer.size(), first = std::min(size, pattern.size());
  auto *data = static_cast<uint8_t *>(buffer.data());
  CHECK(cudaStatus(cudaMemcpy(data, pattern.data(), first, cudaMemcpyHostToDevice), "pattern",
                   __FILE__, __LINE__));
  for (size_t done = first; done < size; done *= 2)
    CHECK(cudaStatus(cudaMemcpy(data + done, data, std::min(done, size - done),
                                cudaMemcpyDeviceToDevice),
                     "pattern", __FILE__, __LINE__));
}

struct Shape {
  const char *model;
  const char *projection;
  int64_t experts, n, k, topK;
  bool gated;
  bool bias; // per-expert bias rows and gpt-oss's clamped SiLU, as gpt-oss has
};

/// Random scale bytes 118-127 (weights of magnitude 2^-9 to 6, as the cast
/// gives N(0, 0.02) weights): every byte takes the kernel's one-multiply path.
void fillScales(DeviceBuffer &buffer, std::mt19937 &rng) {
  std::vector<uint8_t> bytes(buffer.size());
  for (uint8_t &b : bytes)
    b = static_cast<uint8_t>(118 + rng() % 10);
  CHECK(cudaStatus(cudaMemcpy(buffer.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
                   "scales", __FILE__, __LINE__));
}

/// The MXFP4 rows of one cell (MOEC_BENCH_MXFP4): bf16's Auto tile, then each
/// MXFP4 tile. `time` times a launch; `rows` random f32 (or, the same bytes,
/// bf16) rows; `bf16Weights` random bf16 weights.
/// The FP8 rows of one cell (MOEC_BENCH_FP8): see the top of the file. `rows`
/// and `weights` random bytes (valid e4m3 codes), `out` room for slots x N f32;
/// `timeInTurns` the medians of launches timed in turns.
template <typename TimeInTurns>
void runFP8(const Shape &shape, int64_t tokens, int64_t slots, size_t touched, int largest,
            const int32_t *offsets, const float *bias, const cpu::Epilogue &epilogue,
            DeviceBuffer &rows, DeviceBuffer &weights, DeviceBuffer &out,
            TimeInTurns &&timeInTurns) {
  int64_t kBlocks = (shape.k + 127) / 128, nBlocks = (shape.n + 127) / 128;
  int64_t width = shape.gated ? shape.n / 2 : shape.n, groups = (width + 127) / 128;
  DeviceBuffer lhsScales, weightScales, codes, codeScales;
  CHECK(DeviceBuffer::allocate(slots * kBlocks * 4, lhsScales));
  CHECK(DeviceBuffer::allocate(shape.experts * nBlocks * kBlocks * 4, weightScales));
  CHECK(DeviceBuffer::allocate(slots * width, codes));
  CHECK(DeviceBuffer::allocate(slots * groups * 4, codeScales));
  // Scales 2^-6 (the bytes 0x3C800000): products of a few units, as a
  // model's, whose codes and scales the quantising pass writes.
  std::vector<float> one(std::max(slots * kBlocks, shape.experts * nBlocks * kBlocks), 0.015625f);
  CHECK(cudaStatus(cudaMemcpy(lhsScales.data(), one.data(), lhsScales.size(),
                              cudaMemcpyHostToDevice), "scales", __FILE__, __LINE__));
  CHECK(cudaStatus(cudaMemcpy(weightScales.data(), one.data(), weightScales.size(),
                              cudaMemcpyHostToDevice), "scales", __FILE__, __LINE__));
  double flops = 2.0 * double(slots) * shape.n * shape.k;
  cuda::FP8Tile tile = cuda::chooseFP8Tile(slots, shape.experts, shape.k, shape.n, true);
  auto operands = [&](const float *b, const cpu::Epilogue &e) {
    return cuda::FP8MatmulOperands{rows.dataAs<uint8_t>(), slots, lhsScales.dataAs<float>(),
                                   shape.k, weights.dataAs<uint8_t>(),
                                   weightScales.dataAs<float>(), shape.experts, shape.n,
                                   offsets, b, e};
  };
  auto line = [&](const char *what, float ms, float passMs) {
    std::printf("%-14s %-8s T=%-5lld touched %3zu/%-3lld max %5d  %-13s %-16s %9.1f us  "
                "%5.1f%% fp8  x%.3f\n",
                shape.model, shape.projection, static_cast<long long>(tokens), touched,
                static_cast<long long>(shape.experts), largest, cuda::fp8TileName(tile), what,
                ms * 1e3, 100.0 * flops / (ms * 1e-3) / kFP8Ceiling, passMs / ms);
    std::fflush(stdout);
  };
  auto finishing = [&](cuda::FP8Epilogue finish) -> std::function<void()> {
    if (shape.gated)
      return [&, finish] {
        CHECK(cuda::groupedMatmulFP8Quantized(operands(bias, epilogue), codes.dataAs<uint8_t>(),
                                              codeScales.dataAs<float>(), nullptr, 0, nullptr,
                                              tile, false, finish));
      };
    return [&, finish] {
      CHECK(cuda::groupedMatmulFP8(operands(bias, epilogue), out.dataAs<float>(), nullptr, tile,
                                   false, finish));
    };
  };
  std::vector<std::function<void()>> launches = {
      [&] {
        CHECK(cuda::groupedMatmulFP8(operands(nullptr, cpu::Epilogue{}), out.dataAs<float>(),
                                     nullptr, tile));
      },
      finishing(cuda::FP8Epilogue::Pass), finishing(cuda::FP8Epilogue::Fused)};
  // Down: bf16 results. Gate/up: the fused path's GEMM alone, what its pass
  // reads (interleaved: h from the gated epilogue; else the bf16 product).
  const bool interleaved = epilogue.layout == cpu::GateUpLayout::Interleaved;
  launches.push_back([&] {
    CHECK(cuda::groupedMatmulFP8(shape.gated && !interleaved ? operands(nullptr, cpu::Epilogue{})
                                                             : operands(bias, epilogue),
                                 out.dataAs<cuda::BF16>(), nullptr, tile));
  });
  std::vector<float> ms = timeInTurns(launches);
  line("gemm alone f32", ms[0], ms[1]);
  line(shape.gated ? "pass -> e4m3" : "pass -> f32", ms[1], ms[1]);
  line(shape.gated ? "fused -> e4m3" : "fused -> f32", ms[2], ms[1]);
  line(!shape.gated ? "fused -> bf16" : interleaved ? "its gemm -> h" : "its gemm -> bf16", ms[3],
       ms[1]);
}

template <typename Time>
void runMXFP4(const Shape &shape, int64_t tokens, int64_t slots, size_t touched, int largest,
              const int32_t *offsets, const float *bias, const cpu::Epilogue &epilogue,
              DeviceBuffer &rows, DeviceBuffer &bf16Weights, DeviceBuffer &out, Time &&time,
              std::mt19937 &rng) {
  int64_t kBlocks = (shape.k + 31) / 32, rowBytes = kBlocks * 16;
  DeviceBuffer codes, scales;
  CHECK(DeviceBuffer::allocate(shape.experts * shape.n * rowBytes, codes));
  CHECK(DeviceBuffer::allocate(shape.experts * shape.n * kBlocks, scales));
  fillRandom(codes); // any byte is two valid codes
  CHECK(cuda::relayoutMXFP4(codes.dataAs<uint8_t>(), static_cast<int64_t>(codes.size()), nullptr));
  fillScales(scales, rng);
  double bf16Bytes = double(touched) * shape.n * shape.k * 2;
  double mxfp4Bytes = double(touched) * shape.n * (rowBytes + kBlocks);
  cuda::BF16Tile bf16Tile =
      cuda::chooseBF16Tile(slots, shape.experts, shape.k, shape.gated, shape.bias);
  float bf16Ms = time([&] {
    const cuda::BF16 *lhs = rows.dataAs<cuda::BF16>();
    if (shape.gated)
      CHECK(cuda::groupedMatmulBF16(lhs, slots, shape.k, bf16Weights.dataAs<uint16_t>(),
                                    shape.experts, shape.n, offsets, bias, epilogue,
                                    out.dataAs<cuda::BF16>(), nullptr));
    else
      CHECK(cuda::groupedMatmulBF16(lhs, slots, shape.k, bf16Weights.dataAs<uint16_t>(),
                                    shape.experts, shape.n, offsets, bias, epilogue,
                                    out.dataAs<float>(), nullptr));
  });
  auto line = [&](const std::string &kernel, double bytes, float ms) {
    std::printf("%-14s %-8s T=%-5lld touched %3zu/%-3lld max %5d  %-28s %9.1f us  %7.1f GB/s  "
                "%5.1f%% copy  x%.2f vs bf16\n",
                shape.model, shape.projection, static_cast<long long>(tokens), touched,
                static_cast<long long>(shape.experts), largest, kernel.c_str(), ms * 1e3,
                bytes / (ms * 1e-3) / 1e9, 100.0 * bytes / (ms * 1e-3) / kCopyBandwidth,
                bf16Ms / ms);
    std::fflush(stdout);
  };
  line(std::string("bf16 ") + cuda::bf16TileName(bf16Tile), bf16Bytes, bf16Ms);
  cuda::MXFP4Tile chosen =
      cuda::chooseMXFP4Tile(slots, shape.experts, shape.k, shape.n, shape.gated);
  bool dequant = cuda::mxfp4DequantAvailable(shape.k, shape.n);
  for (cuda::MXFP4Tile tile :
       {cuda::MXFP4Tile::Tok8, cuda::MXFP4Tile::Tok8Twice, cuda::MXFP4Tile::Tok8Quad,
        cuda::MXFP4Tile::Tok8Split, cuda::MXFP4Tile::Tok8SplitTwice, cuda::MXFP4Tile::Tok8Warps2,
        cuda::MXFP4Tile::Tok8Warps1, cuda::MXFP4Tile::Tok16, cuda::MXFP4Tile::Tok32,
        cuda::MXFP4Tile::Tok64, cuda::MXFP4Tile::DequantWgmma}) {
    // Tiles far smaller than the rows per expert re-read the weights many times over.
    bool small = tile != cuda::MXFP4Tile::Tok32 && tile != cuda::MXFP4Tile::Tok64 &&
                 tile != cuda::MXFP4Tile::DequantWgmma;
    if ((tokens >= 512 && small) || (tokens <= 8 && !small && tile != chosen) ||
        (tokens >= 64 && small && tile != chosen))
      continue;
    if (tile == cuda::MXFP4Tile::DequantWgmma && !dequant)
      continue;
    std::string name = std::string(cuda::mxfp4TileName(tile)) + (tile == chosen ? "*" : "") +
                       " f32 rows";
    line(name, mxfp4Bytes, time([&] {
           CHECK(cuda::groupedMatmulMXFP4(rows.dataAs<float>(), slots, shape.k,
                                          codes.dataAs<uint8_t>(), scales.dataAs<uint8_t>(),
                                          shape.experts, shape.n, offsets, bias, epilogue,
                                          out.dataAs<float>(), nullptr, tile));
         }));
  }
  // bf16 rows, and results as the bf16 line's (bf16 for gate/up).
  auto bf16Rows = [&](cuda::MXFP4Tile tile) {
    std::string name = std::string(cuda::mxfp4TileName(tile)) + (tile == chosen ? "*" : "") +
                       " bf16 rows";
    line(name, mxfp4Bytes, time([&] {
           const cuda::BF16 *lhs = rows.dataAs<cuda::BF16>();
           if (shape.gated)
             CHECK(cuda::groupedMatmulMXFP4(lhs, slots, shape.k, codes.dataAs<uint8_t>(),
                                            scales.dataAs<uint8_t>(), shape.experts, shape.n,
                                            offsets, bias, epilogue, out.dataAs<cuda::BF16>(),
                                            nullptr, tile));
           else
             CHECK(cuda::groupedMatmulMXFP4(lhs, slots, shape.k, codes.dataAs<uint8_t>(),
                                            scales.dataAs<uint8_t>(), shape.experts, shape.n,
                                            offsets, bias, epilogue, out.dataAs<float>(), nullptr,
                                            tile));
         }));
  };
  bf16Rows(chosen);
  if (dequant && tokens >= 64 && chosen != cuda::MXFP4Tile::DequantWgmma)
    bf16Rows(cuda::MXFP4Tile::DequantWgmma);
}

void run(const Shape &shape, int64_t tokens, double skew, std::mt19937 &rng) {
  // Routing: each token picks topK distinct experts (uniformly, or by the
  // skewed weights); offsets count rows per expert.
  std::vector<int> rowsPerExpert(shape.experts, 0);
  std::set<int> touched;
  std::vector<double> popularity(shape.experts);
  std::vector<int> rank(shape.experts);
  for (int64_t e = 0; e < shape.experts; ++e)
    rank[e] = static_cast<int>(e);
  std::shuffle(rank.begin(), rank.end(), rng);
  for (int64_t e = 0; e < shape.experts; ++e)
    popularity[e] = std::pow(1.0 / (rank[e] + 1), skew);
  std::discrete_distribution<int> pick(popularity.begin(), popularity.end());
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int> chosen;
    while (static_cast<int64_t>(chosen.size()) < shape.topK)
      chosen.insert(pick(rng));
    for (int e : chosen) {
      ++rowsPerExpert[e];
      touched.insert(e);
    }
  }
  std::vector<int32_t> offsets(shape.experts);
  int32_t running = 0;
  for (int64_t e = 0; e < shape.experts; ++e)
    offsets[e] = running += rowsPerExpert[e];
  int64_t slots = tokens * shape.topK;

  DeviceBuffer lhs, weights, dOffsets, out;
  CHECK(DeviceBuffer::allocate(slots * shape.k * 4, lhs));
  CHECK(DeviceBuffer::allocate(shape.experts * shape.n * shape.k * 2, weights));
  CHECK(DeviceBuffer::allocate(shape.experts * 4, dOffsets));
  CHECK(DeviceBuffer::allocate(slots * shape.n * 4, out));
  fillRandom(lhs);
  fillRandom(weights);
  // Bias rows in [-1, 1) where the model has them: gpt-oss's gate/up epilogue
  // loads a bias pair per output, and ncu put 17 % of that
  // kernel's stalls on those loads, which a bench without bias never saw.
  DeviceBuffer biasRows;
  const float *bias = nullptr;
  if (shape.bias) {
    std::vector<float> values(static_cast<size_t>(shape.experts * shape.n));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float &v : values)
      v = uniform(rng);
    CHECK(DeviceBuffer::allocate(values.size() * 4, biasRows));
    CHECK(cudaStatus(cudaMemcpy(biasRows.data(), values.data(), values.size() * 4,
                                cudaMemcpyHostToDevice),
                     "bias", __FILE__, __LINE__));
    bias = biasRows.dataAs<float>();
  }
  CHECK(cudaStatus(cudaMemcpy(dOffsets.data(), offsets.data(), shape.experts * 4,
                              cudaMemcpyHostToDevice),
                   "offsets", __FILE__, __LINE__));
  cpu::Epilogue epilogue;
  // Gate/up rows interleaved, as the artifacts run them (docs/design.md, "Gate/up
  // rows on the GPU"): the 128x256 tiles activate in CUTLASS's epilogue.
  if (shape.gated)
    epilogue = {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Interleaved};
  if (shape.gated && shape.bias) { // gpt-oss: x * sigmoid(1.702 x) * (up + 1), clamped at 7
    epilogue.alpha = 1.702f;
    epilogue.beta = 1.0f;
    epilogue.limit = 7.0f;
  }

  // A 256 MiB write before each timed call evicts the weights from the 60 MB L2.
  DeviceBuffer flush;
  CHECK(DeviceBuffer::allocate(256 << 20, flush));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto time = [&](auto launch) {
    launch();
    CHECK(cudaStatus(cudaDeviceSynchronize(), "warm-up", __FILE__, __LINE__));
    std::vector<float> samples;
    float total = 0;
    for (int i = 0; i < 40 && (i < 3 || total < 300.0f); ++i) {
      cudaMemsetAsync(flush.data(), i & 0xFF, flush.size());
      cudaEventRecord(start);
      launch();
      cudaEventRecord(stop);
      CHECK(cudaStatus(cudaEventSynchronize(stop), "kernel", __FILE__, __LINE__));
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      samples.push_back(ms);
      total += ms;
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  };
  // Several launches timed in turns (one sample of each a round, the L2
  // flushed before each), so that the GPU's clock and temperature drifting
  // over the rounds falls on all alike: their medians.
  auto timeInTurns = [&](const std::vector<std::function<void()>> &launches) {
    for (const auto &launch : launches)
      launch();
    CHECK(cudaStatus(cudaDeviceSynchronize(), "warm-up", __FILE__, __LINE__));
    std::vector<std::vector<float>> samples(launches.size());
    float total = 0;
    for (int round = 0; round < 40 && (round < 3 || total < 600.0f); ++round)
      for (size_t l = 0; l < launches.size(); ++l) {
        cudaMemsetAsync(flush.data(), round & 0xFF, flush.size());
        cudaEventRecord(start);
        launches[l]();
        cudaEventRecord(stop);
        CHECK(cudaStatus(cudaEventSynchronize(stop), "kernel", __FILE__, __LINE__));
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        samples[l].push_back(ms);
        total += ms;
      }
    std::vector<float> medians;
    for (std::vector<float> &s : samples) {
      std::sort(s.begin(), s.end());
      medians.push_back(s[s.size() / 2]);
    }
    return medians;
  };
  double bytes = double(touched.size()) * shape.n * shape.k * 2;
  int largest = *std::max_element(rowsPerExpert.begin(), rowsPerExpert.end());
  double flops = 2.0 * double(slots) * shape.n * shape.k;
  // FP8: one byte per weight, against the FP8 matmul ceiling.
  auto report = [&](const char *kernel, float ms, bool fp8 = false) {
    double bandwidth = (fp8 ? bytes / 2 : bytes) / (ms * 1e-3);
    std::printf("%-14s %-8s T=%-5lld touched %3zu/%-3lld max %5d  %-12s %9.1f us  %5.1f%% copy  "
                "%5.1f%% %s\n",
                shape.model, shape.projection, static_cast<long long>(tokens), touched.size(),
                static_cast<long long>(shape.experts), largest, kernel, ms * 1e3,
                100.0 * bandwidth / kCopyBandwidth,
                100.0 * flops / (ms * 1e-3) / (fp8 ? kFP8Ceiling : kBF16Ceiling), fp8 ? "fp8" : "bf16");
    std::fflush(stdout);
  };
  if (std::getenv("MOEC_BENCH_FP8")) {
    runFP8(shape, tokens, slots, touched.size(), largest, dOffsets.dataAs<int32_t>(), bias,
           epilogue, lhs, weights, out, timeInTurns);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return;
  }
  if (std::getenv("MOEC_BENCH_MXFP4")) {
    runMXFP4(shape, tokens, slots, touched.size(), largest, dOffsets.dataAs<int32_t>(), bias,
             epilogue, lhs, weights, out, time, rng);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return;
  }
  cuda::BF16Tile chosen =
      cuda::chooseBF16Tile(slots, shape.experts, shape.k, shape.gated, shape.bias);
  for (cuda::BF16Tile tile :
       {cuda::BF16Tile::Tok8, cuda::BF16Tile::Tok8Warps2, cuda::BF16Tile::Tok16,
        cuda::BF16Tile::Tok32, cuda::BF16Tile::Tok64, cuda::BF16Tile::Wgmma,
        cuda::BF16Tile::Wgmma128x256, cuda::BF16Tile::Wgmma128x256C21,
        cuda::BF16Tile::Wgmma128x256C12, cuda::BF16Tile::Wgmma64x256}) {
    // Tiles far smaller than the rows per expert re-read the weights many times over.
    bool wgmma = cuda::isWgmmaTile(tile);
    if (tokens >= 1024 && tile != cuda::BF16Tile::Tok32 && tile != cuda::BF16Tile::Tok64 && !wgmma)
      continue;
    if (!cuda::bf16TileAvailable(tile) || (wgmma && tokens < 16))
      continue;
    std::string name = std::string(cuda::bf16TileName(tile)) + (tile == chosen ? "*" : "");
    // bf16 rows, and a bf16 result for gate/up: what the artifacts pass
    // (--expert-weights=bf16 keeps permute's rows and h in bf16; docs/design.md).
    // f32 rows would favour 32-row over 64-row tiles more than the artifacts
    // see (DeepSeek-V3's down at T = 1024, 64-row tiles: 3.52 ms with f32 rows
    // here, 2.78 ms with bf16 rows under ncu).
    const cuda::BF16 *rows = lhs.dataAs<cuda::BF16>();
    report(name.c_str(), time([&] {
             if (shape.gated)
               CHECK(cuda::groupedMatmulBF16(rows, slots, shape.k, weights.dataAs<uint16_t>(),
                                             shape.experts, shape.n, dOffsets.dataAs<int32_t>(),
                                             bias, epilogue, out.dataAs<cuda::BF16>(), nullptr,
                                             tile));
             else
               CHECK(cuda::groupedMatmulBF16(rows, slots, shape.k, weights.dataAs<uint16_t>(),
                                             shape.experts, shape.n, dOffsets.dataAs<int32_t>(),
                                             bias, epilogue, out.dataAs<float>(), nullptr,
                                             tile));
           }));
  }
  // FP8 e4m3 (the random bytes of the buffers above reinterpreted; scales all 0x3C3C3C3C).
  int64_t kBlocks = (shape.k + 127) / 128, nBlocks = (shape.n + 127) / 128;
  DeviceBuffer lhsScales, weightScales;
  CHECK(DeviceBuffer::allocate(slots * kBlocks * 4, lhsScales));
  CHECK(DeviceBuffer::allocate(shape.experts * nBlocks * kBlocks * 4, weightScales));
  CHECK(cudaStatus(cudaMemset(lhsScales.data(), 0x3C, lhsScales.size()), "memset", __FILE__, __LINE__));
  CHECK(cudaStatus(cudaMemset(weightScales.data(), 0x3C, weightScales.size()), "memset", __FILE__,
                   __LINE__));
  for (cuda::FP8Tile tile :
       {cuda::FP8Tile::Auto, cuda::FP8Tile::Tok8, cuda::FP8Tile::Tok16, cuda::FP8Tile::Tok32,
        cuda::FP8Tile::Wgmma, cuda::FP8Tile::WgmmaPingpong}) {
    bool wgmma = cuda::isWgmmaTile(tile);
    if (tokens >= 1024 && tile != cuda::FP8Tile::Auto && tile != cuda::FP8Tile::Tok32 && !wgmma)
      continue;
    if (!cuda::fp8TileAvailable(tile) || (tile == cuda::FP8Tile::Wgmma && tokens < 16))
      continue;
    std::string name = std::string("fp8 ") + cuda::fp8TileName(tile);
    report(name.c_str(), time([&] {
             CHECK(cuda::groupedMatmulFP8({lhs.dataAs<uint8_t>(), slots, lhsScales.dataAs<float>(),
                                           shape.k, weights.dataAs<uint8_t>(),
                                           weightScales.dataAs<float>(), shape.experts, shape.n,
                                           dOffsets.dataAs<int32_t>(), bias, epilogue},
                                          out.dataAs<float>(), nullptr, tile));
           }),
           /*fp8=*/true);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

} // namespace

int main(int argc, char **argv) {
  if (cudaDeviceCountOrZero() == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  std::mt19937 rng(0);
  const Shape shapes[] = {
      {"Qwen3-30B-A3B", "gate_up", 128, 2 * 768, 2048, 8, true, false},
      {"Qwen3-30B-A3B", "down", 128, 2048, 768, 8, false, false},
      {"Mixtral-8x7B", "gate_up", 8, 2 * 14336, 4096, 2, true, false},
      {"Mixtral-8x7B", "down", 8, 4096, 14336, 2, false, false},
      {"gpt-oss-120b", "gate_up", 128, 2 * 2880, 2880, 4, true, true},
      {"gpt-oss-120b", "down", 128, 2880, 2880, 4, false, true},
      {"DeepSeek-V3", "gate_up", 256, 2 * 2048, 7168, 8, true, false},
      {"DeepSeek-V3", "down", 256, 7168, 2048, 8, false, false},
      // The shared expert (moe.linear in the artifact: one expert, every row).
      {"DeepSeek-V3", "sh_gate_up", 1, 2 * 2048, 7168, 1, true, false},
      {"DeepSeek-V3", "sh_down", 1, 7168, 2048, 1, false, false},
  };
  std::vector<int64_t> tokenCounts = {1, 4, 16, 128, 1024, 8192};
  if (argc > 1) {
    tokenCounts.clear();
    for (char *p = argv[1]; *p;) {
      tokenCounts.push_back(std::strtoll(p, &p, 10));
      if (*p == ',')
        ++p;
      else if (*p)
        return std::fprintf(stderr, "usage: %s [T,T,...] [SKEW]\n", argv[0]), 2;
    }
  }
  double skew = argc > 2 ? std::strtod(argv[2], nullptr) : 0.0;
  std::printf("bf16 tiles: bf16 rows, bf16 results for gate_up and f32 for down (as in the "
              "artifacts); '*': the tile chooseBF16Tile picks; %% copy: touched experts' bf16 "
              "weight bytes / time / 4.25 TB/s; %% bf16: 2*slots*N*K / time / 685 TFLOP/s; "
              "routing skew %.2f\n", skew);
  if (std::getenv("MOEC_BENCH_MXFP4"))
    std::printf("MXFP4 (MOEC_BENCH_MXFP4): GB/s and %% copy count the touched experts' code and "
                "scale bytes (0.53 a weight; bf16's row: 2); 'x': bf16 time / this time\n");
  // MOEC_BENCH_MODEL=DeepSeek-V3 (a prefix): that model's shapes only, e.g. to
  // profile one under ncu. The routing then differs from a full run's.
  const char *only = std::getenv("MOEC_BENCH_MODEL");
  // MXFP4: the models whose experts ship (gpt-oss) or are benchmarked so.
  bool mxfp4 = std::getenv("MOEC_BENCH_MXFP4") != nullptr;
  // FP8: the routed experts (the shared expert is moe.linear: no wgmma tiles).
  bool fp8 = std::getenv("MOEC_BENCH_FP8") != nullptr;
  if (fp8)
    std::printf("FP8 (MOEC_BENCH_FP8): Auto's tile; gate/up quantised for down, down into f32 "
                "or bf16 rows; 'pass': f32 product + epilogue pass, 'fused': CUTLASS's "
                "epilogue (FP8Epilogue); %% fp8: 2*slots*N*K / time / 1280 TFLOP/s; "
                "x: pass time / this time\n");
  for (const Shape &shape : shapes)
    for (int64_t tokens : tokenCounts)
      if ((!only || std::strncmp(shape.model, only, std::strlen(only)) == 0) &&
          !(mxfp4 && std::strncmp(shape.model, "DeepSeek", 8) == 0) &&
          !(fp8 && shape.experts == 1))
        run(shape, tokens, skew, rng);
  return 0;
}
