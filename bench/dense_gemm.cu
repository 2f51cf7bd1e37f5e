//===- dense_gemm.cu - moec's linearBF16 against cuBLASLt at dense shapes --===//
//
// The dense projections of a whole model on the GPU (attention q/k/v/o, a
// dense MLP, the LM head) with bf16 weights [N, K], f32 rows [M, K] and f32
// results [M, N], as the bf16 default runs them: moec's linearBF16 (up to 64
// rows the few-rows kernel that splits K over blocks, LinearBF16FewRows.cu;
// above, the grouped kernel's mma.sync tiles or CUTLASS's wgmma ones), beside
// the grouped kernel with one expert at every M ("tiles": what linearBF16 ran
// before the few-rows kernel), against cuBLASLt with
// bf16 A and B, f32 accumulation and f32 D (CUBLAS_COMPUTE_32F). cuBLASLt takes
// no f32 rows with bf16 weights, so its rows are rounded to bf16 first: the
// table shows the GEMM alone and the GEMM with that rounding pass. cuBLASLt's
// algorithm is its heuristic's first choice (what a runtime would run without
// tuning) and, beside it, the fastest of the heuristic's first 8 (tuned).
// The L2 is flushed before each timed call (a 256 MiB write), as a whole
// model's step streams each weight once; the median of up to 40 calls.
// Results are compared (max |moec - cuBLASLt| / max |y|) so that a layout
// error cannot pass as a timing.
//
//   moec-bench-dense-gemm [M,M,...]      (default 1,16,64,512,4096)
//
// "qkv": q, k and v of one layer as one projection over their concatenated
// weights, what fusing the sibling projections (issue 32) would run.
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace moec::rt;

namespace {

constexpr double kCopyBandwidth = 4.25e12; // bytes/s, measured on the H200
constexpr double kBF16Ceiling = 685e12;    // FLOP/s, measured on the H200

#define CHECK_STATUS(expr)                                                                         \
  do {                                                                                             \
    Status s_ = (expr);                                                                            \
    if (!s_.isOk()) {                                                                              \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.message().c_str());               \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

#define CHECK_LT(expr)                                                                             \
  do {                                                                                             \
    cublasStatus_t e_ = (expr);                                                                    \
    if (e_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #expr,             \
                   static_cast<int>(e_));                                                          \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__global__ void roundRows(const float *x, int64_t count, __nv_bfloat16 *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void fillUniform(float *x, int64_t count, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    x[i] = scale * (static_cast<float>(h & 0xFFFFFF) / 8388608.0f - 1.0f);
  }
}

struct Shape {
  const char *model, *projection;
  int64_t k, n;
};

struct Timer {
  DeviceBuffer flush;
  cudaEvent_t start, stop;
  Timer() {
    CHECK_STATUS(DeviceBuffer::allocate(256 << 20, flush));
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
  }
  template <typename F> float median(F launch) {
    launch();
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> samples;
    float total = 0;
    for (int i = 0; i < 40 && (i < 5 || total < 100.0f); ++i) {
      CHECK_CUDA(cudaMemsetAsync(flush.data(), i & 0xFF, flush.size()));
      CHECK_CUDA(cudaEventRecord(start));
      launch();
      CHECK_CUDA(cudaEventRecord(stop));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      samples.push_back(ms);
      total += ms;
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  }
};

void run(cublasLtHandle_t lt, Timer &timer, const Shape &shape, int64_t m, void *ltWorkspace,
         size_t ltWorkspaceBytes) {
  int64_t k = shape.k, n = shape.n;
  DeviceBuffer x, xBF16, wF32, w, yMoec, yTiles, yLt;
  CHECK_STATUS(DeviceBuffer::allocate(m * k * 4, x));
  CHECK_STATUS(DeviceBuffer::allocate(m * k * 2, xBF16));
  CHECK_STATUS(DeviceBuffer::allocate(n * k * 4, wF32));
  CHECK_STATUS(DeviceBuffer::allocate(n * k * 2, w));
  CHECK_STATUS(DeviceBuffer::allocate(m * n * 4, yMoec));
  CHECK_STATUS(DeviceBuffer::allocate(m * n * 4, yTiles));
  CHECK_STATUS(DeviceBuffer::allocate(m * n * 4, yLt));
  fillUniform<<<1024, 256>>>(x.dataAs<float>(), m * k, 17u, 1.0f);
  fillUniform<<<1024, 256>>>(wF32.dataAs<float>(), n * k, 29u, 1.0f / std::sqrt(float(k)));
  roundRows<<<1024, 256>>>(wF32.dataAs<float>(), n * k, w.dataAs<__nv_bfloat16>());
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  wF32 = DeviceBuffer();

  auto moec = [&] {
    CHECK_STATUS(cuda::linearBF16(x.dataAs<float>(), m, k, w.dataAs<uint16_t>(), n, nullptr,
                                  cpu::Epilogue{}, yMoec.dataAs<float>(), nullptr));
  };
  auto tiles = [&] {
    CHECK_STATUS(cuda::groupedMatmulBF16(x.dataAs<float>(), m, k, w.dataAs<uint16_t>(), 1, n,
                                         nullptr, nullptr, cpu::Epilogue{},
                                         yTiles.dataAs<float>(), nullptr));
  };
  auto round = [&] {
    roundRows<<<std::min<int64_t>((m * k + 255) / 256, 4096), 256>>>(
        x.dataAs<float>(), m * k, xBF16.dataAs<__nv_bfloat16>());
  };

  // Column-major view: D^T [N, M] = W^T^T ... i.e. D(n x m, ld n) =
  // op(A) · B with A = W stored k x n (ld k), transposed, and B = x^T stored
  // k x m (ld k).
  cublasLtMatmulDesc_t desc;
  CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t transA = CUBLAS_OP_T, transB = CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transA,
                                          sizeof(transA)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &transB,
                                          sizeof(transB)));
  cublasLtMatrixLayout_t a, b, d;
  CHECK_LT(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, n, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, m, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, n, m, n));
  cublasLtMatmulPreference_t preference;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&preference));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(preference,
                                                CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &ltWorkspaceBytes, sizeof(ltWorkspaceBytes)));
  cublasLtMatmulHeuristicResult_t results[8] = {};
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, d, d, preference, 8, results, &found));
  if (found == 0) {
    std::fprintf(stderr, "cuBLASLt has no algorithm for M=%lld K=%lld N=%lld\n",
                 static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n));
    std::exit(1);
  }
  float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&](int choice) {
    CHECK_LT(cublasLtMatmul(lt, desc, &alpha, w.data(), a, xBF16.data(), b, &beta, yLt.data(), d,
                            yLt.data(), d, &results[choice].algo, ltWorkspace, ltWorkspaceBytes,
                            nullptr));
  };

  float tMoec = timer.median(moec);
  float tTiles = timer.median(tiles);
  round();
  float tRound = timer.median(round);
  float tLt = timer.median([&] { gemm(0); });
  float tBest = tLt;
  int best = 0;
  for (int i = 1; i < found; ++i)
    if (float t = timer.median([&] { gemm(i); }); t < tBest) {
      tBest = t;
      best = i;
    }

  // The two products agree to f32 accumulation order: same bf16 operands.
  moec();
  tiles();
  round();
  gemm(best);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> hMoec(m * n), hTiles(m * n), hLt(m * n);
  CHECK_CUDA(cudaMemcpy(hMoec.data(), yMoec.data(), m * n * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hTiles.data(), yTiles.data(), m * n * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hLt.data(), yLt.data(), m * n * 4, cudaMemcpyDeviceToHost));
  double maxAbs = 0, maxDiff = 0, maxTilesDiff = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    maxAbs = std::max(maxAbs, std::fabs(double(hLt[i])));
    maxDiff = std::max(maxDiff, std::fabs(double(hMoec[i]) - hLt[i]));
    maxTilesDiff = std::max(maxTilesDiff, std::fabs(double(hTiles[i]) - hLt[i]));
  }
  double rel = maxAbs > 0 ? maxDiff / maxAbs : maxDiff;
  double relTiles = maxAbs > 0 ? maxTilesDiff / maxAbs : maxTilesDiff;

  double bytes = double(n) * k * 2, flops = 2.0 * m * n * k;
  auto pct = [&](float ms) {
    return std::max(bytes / (ms * 1e-3) / kCopyBandwidth, flops / (ms * 1e-3) / kBF16Ceiling) *
           100.0;
  };
  std::printf("%-8s %-6s K=%-5lld N=%-6lld M=%-5lld | moec %9.1f us %5.1f%% | tiles %9.1f us "
              "%5.1f%% | lt %9.1f us %5.1f%% | lt-tuned %9.1f us (#%d) | +round %6.1f us | "
              "lt/moec %.2f (+round %.2f) | diff %.1e tiles %.1e%s\n",
              shape.model, shape.projection, static_cast<long long>(k), static_cast<long long>(n),
              static_cast<long long>(m), tMoec * 1e3, pct(tMoec), tTiles * 1e3, pct(tTiles),
              tLt * 1e3, pct(tLt), tBest * 1e3, best, tRound * 1e3, tLt / tMoec,
              (tLt + tRound) / tMoec, rel, relTiles,
              rel > 1e-4 || relTiles > 1e-4 ? "  MISMATCH" : "");
  std::fflush(stdout);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(d);
  cublasLtMatmulDescDestroy(desc);
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> ms = {1, 16, 64, 512, 4096};
  if (argc > 1) {
    ms.clear();
    for (char *p = argv[1]; *p;) {
      ms.push_back(std::strtoll(p, &p, 10));
      if (*p == ',')
        ++p;
    }
  }
  const Shape shapes[] = {
      {"qwen3", "q", 2048, 4096},      {"qwen3", "k,v", 2048, 512},
      {"qwen3", "qkv", 2048, 5120},
      {"qwen3", "o", 4096, 2048},      {"qwen3", "lm_head", 2048, 151936},
      {"mixtral", "q,o", 4096, 4096},  {"mixtral", "k,v", 4096, 1024},
      {"mixtral", "mlp", 4096, 14336}, {"mixtral", "lm_head", 4096, 32000},
  };
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  std::printf("cuBLASLt %zu; %% = the larger of copy bandwidth (4.25 TB/s) and bf16 ceiling "
              "(685 TFLOP/s) reached\n",
              cublasLtGetVersion());
  size_t workspaceBytes = 32 << 20;
  DeviceBuffer workspace;
  CHECK_STATUS(DeviceBuffer::allocate(workspaceBytes, workspace));
  Timer timer;
  for (const Shape &shape : shapes)
    for (int64_t m : ms)
      run(lt, timer, shape, m, workspace.data(), workspaceBytes);
  cublasLtDestroy(lt);
  return 0;
}
