//===- cpu_gemm.cpp - moec's CPU matrix product against OpenBLAS ------------===//
//
// The measurement behind the CPU kernels' BLAS choice (docs/performance.md,
// "CPU backend"): C = A · Bᵀ, B [N, K] as moe's weights, one thread each, at
// the tiny fixtures' shapes (rows per expert at 1, 16 and 256 tokens; the
// routers, attention projections and lm_head) and at real models' (Qwen3-30B's
// and Mixtral's experts). Prints each shape's median µs and GFLOP/s for moec's
// gemmNT (the kernels' own, src/cpu/Gemm.h) and OpenBLAS's cblas_sgemm, and
// whether OpenBLAS's bits change with M (a row computed alone against among
// 64: moec's never do).
//
//   build/bench/moec-bench-cpu-gemm [--reps N]
//
// Built where CMake finds OpenBLAS (Debian's libopenblas-dev, scripts/setup.sh).
// OpenBLAS reads OPENBLAS_CORETYPE, which some hosts set (env README).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

using moec::rt::cpu::detail::gemmNT;

template <typename F> double medianMicros(F f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < 3; ++i)
    f();
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void blas(const float *a, const float *b, float *c, int m, int n, int k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
}

} // namespace

int main(int argc, char **argv) {
  int reps = 0;
  if (argc == 3 && std::strcmp(argv[1], "--reps") == 0)
    reps = std::atoi(argv[2]);
  openblas_set_num_threads(1);
  std::printf("# moec gemmNT (%s) against OpenBLAS %s (%s), one thread; OPENBLAS_CORETYPE=%s\n",
              moec::rt::cpu::detail::gemmIsa(), openblas_get_config(),
              openblas_get_corename(),
              std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)");
  std::printf("%-28s %10s %10s %8s %8s %7s\n", "shape (M x N x K)", "moec us", "blas us",
              "moec GF", "blas GF", "moec/blas");
  struct Shape {
    const char *what;
    int m, n, k;
  };
  const Shape shapes[] = {
      {"expert gate/up, T=1", 1, 80, 64},      {"expert gate/up, T=16", 4, 80, 64},
      {"expert gate/up, T=256", 64, 80, 64},   {"expert down, T=256", 64, 64, 40},
      {"DeepSeek down, T=256", 64, 64, 24},    {"router, T=256", 256, 8, 64},
      {"q_proj, prompt", 14, 64, 64},          {"lm_head, decode", 2, 128, 64},
      {"Qwen3-30B gate/up, 1 row", 1, 1536, 2048}, {"Qwen3-30B gate/up, 16", 16, 1536, 2048},
      {"Qwen3-30B gate/up, 256", 256, 1536, 2048}, {"Qwen3-30B down, 256", 256, 2048, 768},
      {"Mixtral gate/up, 64", 64, 28672, 4096},
  };
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape &s : shapes) {
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.n) * s.k), c(size_t(s.m) * s.n);
    for (float &x : a)
      x = dist(rng);
    for (float &x : b)
      x = dist(rng);
    double flops = 2.0 * s.m * s.n * s.k;
    int n = reps ? reps : std::clamp(int(2e9 / (flops + 1e5)), 5, 20000);
    double mine = medianMicros([&] { gemmNT(a.data(), s.k, b.data(), s.k, nullptr, c.data(), s.n,
                                            s.m, s.n, s.k); }, n);
    double theirs = medianMicros([&] { blas(a.data(), b.data(), c.data(), s.m, s.n, s.k); }, n);
    char shape[64];
    std::snprintf(shape, sizeof(shape), "%d x %d x %d", s.m, s.n, s.k);
    std::printf("%-28s %10.2f %10.2f %8.1f %8.1f %7.2f  %s\n", shape, mine, theirs,
                flops / mine / 1e3, flops / theirs / 1e3, mine / theirs, s.what);
  }
  // OpenBLAS's bits against M: row 5 of a 64-row product and the same row alone.
  const int m = 64, nn = 80, k = 64;
  std::vector<float> a(m * k), b(nn * k), whole(m * nn), alone(nn);
  for (float &x : a)
    x = dist(rng);
  for (float &x : b)
    x = dist(rng);
  blas(a.data(), b.data(), whole.data(), m, nn, k);
  blas(a.data() + 5 * k, b.data(), alone.data(), 1, nn, k);
  int differ = 0;
  for (int j = 0; j < nn; ++j)
    differ += std::memcmp(&alone[j], &whole[5 * nn + j], sizeof(float)) != 0;
  std::printf("# OpenBLAS: %d of %d elements of a row differ alone vs in a 64-row product "
              "(moec: 0 by construction)\n", differ, nn);
  return 0;
}
