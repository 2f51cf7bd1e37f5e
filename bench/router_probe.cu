//===- router_probe.cu - CUTLASS's 3xTF32 GEMM at the routers' shapes -----===//
//
// A probe, built on request (like cutlass_configs.cu): the f32 router logits
// x[T, K] · w[N, K]ᵀ through CUTLASS 2.x's sm80 tensor-op GEMM with
// OpMultiplyAddFastF32 (3xTF32: big·big + big·small + small·big, the split moec's
// linearTiledKernel makes), in a few tile shapes and serial split-K depths
// (deterministic: the K partitions add into the output in order), beside
// moec's own cuda::linear at the same shapes. Each variant runs 20 times in a
// row after a warm-up (no L2 flush: decode_front.cu's convention); its time is
// the mean, its error the largest |difference| to moec's logits relative to
// the largest logit.
//
//   moec-bench-router-probe [T,T,...]     (run on the GPU machine)
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

template <int TM, int TN, int TK, int WM, int WN, int Stages>
using Gemm3xTF32 = cutlass::gemm::device::Gemm<
    float, cutlass::layout::RowMajor, float, cutlass::layout::ColumnMajor, float,
    cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<TM, TN, TK>, cutlass::gemm::GemmShape<WM, WN, TK>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, Stages, 4, 4,
    /*SplitKSerial=*/true, cutlass::arch::OpMultiplyAddFastF32>;

/// Runs GEMM (one configuration) with `splits` serial K partitions: y = x·wᵀ.
template <typename Gemm> struct Runner {
  Gemm gemm;
  void *workspace = nullptr;
  bool setUp(const float *x, const float *w, float *y, int m, int n, int k, int splits) {
    typename Gemm::Arguments args({m, n, k}, {x, k}, {w, k}, {y, n}, {y, n}, {1.0f, 0.0f}, splits);
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess)
      return false;
    size_t bytes = Gemm::get_workspace_size(args);
    if (bytes)
      CHECK_CUDA(cudaMalloc(&workspace, bytes));
    return gemm.initialize(args, workspace) == cutlass::Status::kSuccess;
  }
  bool run(cudaStream_t stream) { return gemm.run(stream) == cutlass::Status::kSuccess; }
  ~Runner() { cudaFree(workspace); }
};

struct Shape {
  const char *model;
  int n, k;
};

double timeIt(const std::function<void()> &call, cudaStream_t stream) {
  call();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < 20; ++i)
    call();
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaGetLastError());
  return ms * 1000.0 / 20;
}

double maxRelative(const std::vector<float> &a, const std::vector<float> &b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

/// The largest |got - exact| over every 64th row, relative to the largest |exact|
/// there: `exact` holds those rows' float64 logits (rows r = 0, 64, ...).
double errorVsExact(const std::vector<float> &got, const std::vector<double> &exact, int n) {
  double diff = 0, scale = 0;
  for (size_t s = 0; s < exact.size() / n; ++s)
    for (int j = 0; j < n; ++j) {
      double e = exact[s * n + j];
      diff = std::max(diff, std::fabs(double(got[s * 64 * n + j]) - e));
      scale = std::max(scale, std::fabs(e));
    }
  return diff / std::max(scale, 1e-30);
}

std::vector<double> exactRows(const std::vector<float> &x, const std::vector<float> &w, int m,
                              int n, int k) {
  std::vector<double> exact;
  for (int r = 0; r < m; r += 64)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int c = 0; c < k; ++c)
        sum += double(x[size_t(r) * k + c]) * double(w[size_t(j) * k + c]);
      exact.push_back(sum);
    }
  return exact;
}

template <typename Gemm>
void probe(const char *name, const float *x, const float *w, float *y, int m, int n, int k,
           const std::vector<float> &reference, const std::vector<double> &exact,
           cudaStream_t stream) {
  for (int splits : {1, 2, 4, 8, 16}) {
    if (k / splits < 128)
      break;
    Runner<Gemm> runner;
    if (!runner.setUp(x, w, y, m, n, k, splits)) {
      std::printf("  %-28s splits %2d: cannot run\n", name, splits);
      continue;
    }
    CHECK_CUDA(cudaMemsetAsync(y, 0xFF, size_t(m) * n * 4, stream));
    double us = timeIt([&] { runner.run(stream); }, stream);
    std::vector<float> got(size_t(m) * n);
    CHECK_CUDA(cudaMemcpy(got.data(), y, got.size() * 4, cudaMemcpyDeviceToHost));
    int blocks = ((m + Gemm::ThreadblockShape::kM - 1) / Gemm::ThreadblockShape::kM) *
                 ((n + Gemm::ThreadblockShape::kN - 1) / Gemm::ThreadblockShape::kN) * splits;
    std::printf("  %-28s splits %2d: %8.2f us  (%4d blocks, max rel diff %.1e, vs f64 %.1e)\n",
                name, splits, us, blocks, maxRelative(got, reference), errorVsExact(got, exact, n));
  }
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int> tokens = {128, 1024, 2048, 8192};
  if (argc > 1) {
    tokens.clear();
    std::string list = argv[1];
    for (size_t at = 0; at < list.size();) {
      size_t comma = list.find(',', at);
      tokens.push_back(std::stoi(list.substr(at, comma - at)));
      at = comma == std::string::npos ? list.size() : comma + 1;
    }
  }
  const Shape shapes[] = {
      {"qwen3moe-30b-a3b", 128, 2048}, {"gpt-oss-120b", 128, 2880}, {"deepseek-v3", 256, 7168}};
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 rng(7);
  for (const Shape &shape : shapes)
    for (int m : tokens) {
      int n = shape.n, k = shape.k;
      std::normal_distribution<float> unit(0.0f, 1.0f), small(0.0f, 0.02f);
      std::vector<float> hx(size_t(m) * k), hw(size_t(n) * k);
      for (float &v : hx)
        v = unit(rng);
      for (float &v : hw)
        v = small(rng);
      float *x, *w, *y;
      CHECK_CUDA(cudaMalloc(&x, hx.size() * 4));
      CHECK_CUDA(cudaMalloc(&w, hw.size() * 4));
      CHECK_CUDA(cudaMalloc(&y, size_t(m) * n * 4));
      CHECK_CUDA(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
      auto moec = [&] {
        moec::rt::Status status =
            moec::rt::cuda::linear(x, m, k, w, n, nullptr, moec::rt::cpu::Epilogue{}, y, stream);
        if (!status) {
          std::fprintf(stderr, "linear: %s\n", status.message().c_str());
          std::exit(1);
        }
      };
      double us = timeIt(moec, stream);
      std::vector<float> reference(size_t(m) * n);
      CHECK_CUDA(cudaMemcpy(reference.data(), y, reference.size() * 4, cudaMemcpyDeviceToHost));
      std::vector<double> exact = exactRows(hx, hw, m, n, k);
      std::printf("%s T=%d (N=%d, K=%d): moec linear %.2f us (vs f64 %.1e)\n", shape.model, m, n, k,
                  us, errorVsExact(reference, exact, n));
      probe<Gemm3xTF32<128, 128, 16, 64, 64, 4>>("128x128x16 w64x64 s4", x, w, y, m, n, k,
                                                 reference, exact, stream);
      probe<Gemm3xTF32<128, 64, 16, 64, 32, 4>>("128x64x16 w64x32 s4", x, w, y, m, n, k, reference,
                                                exact, stream);
      probe<Gemm3xTF32<64, 64, 16, 32, 32, 5>>("64x64x16 w32x32 s5", x, w, y, m, n, k, reference,
                                               exact, stream);
      probe<Gemm3xTF32<128, 128, 32, 64, 64, 3>>("128x128x32 w64x64 s3", x, w, y, m, n, k,
                                                 reference, exact, stream);
      probe<Gemm3xTF32<64, 128, 32, 32, 64, 3>>("64x128x32 w32x64 s3", x, w, y, m, n, k, reference,
                                                exact, stream);
      probe<Gemm3xTF32<64, 128, 16, 32, 64, 5>>("64x128x16 w32x64 s5", x, w, y, m, n, k, reference,
                                                exact, stream);
      probe<Gemm3xTF32<64, 64, 32, 32, 32, 4>>("64x64x32 w32x32 s4", x, w, y, m, n, k, reference,
                                               exact, stream);
      CHECK_CUDA(cudaFree(x));
      CHECK_CUDA(cudaFree(w));
      CHECK_CUDA(cudaFree(y));
    }
  return 0;
}
