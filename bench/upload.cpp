//===- upload.cpp - ways to move a weights file to the GPU, timed ----------===//
//
// Issue 7 asks that an artifact's weights reach the GPU at >= 80 % of pinned
// host-to-device bandwidth. moec_load maps weights.bin and copies it up; this
// separates what that costs: the copy engine's own rate from pinned memory, the
// pinned staging's allocation, the page faults of a fresh mapping, the host's
// copy rate, and the runtime's upload over staging plans. (Tried and dropped:
// pread into the staging instead of the mapping, no faster; registering the
// mapping with cudaHostRegister, which did not return within two minutes.)
//
//   moec-bench-upload FILE [THREADS]   (FILE in the page cache: read it once first)
//
// Every variant uploads the whole file into one device buffer and reports GB/s
// over the whole step, allocation of its own staging included.
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cpu/ThreadPool.h"
#include "moec/runtime/cuda/Artifact.h"

#include <cuda_runtime_api.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace moec::rt;

namespace {

double seconds(const std::function<void()> &body) {
  auto t0 = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Mapping {
  void *data = nullptr;
  size_t bytes = 0;
  Mapping(const char *path, size_t bytes, int flags) : bytes(bytes) {
    int fd = open(path, O_RDONLY);
    data = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | flags, fd, 0);
    close(fd);
    if (data == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
  }
  ~Mapping() { munmap(data, bytes); }
};

void report(const char *name, size_t bytes, double s) {
  std::printf("%-44s %8.3f s %7.1f GB/s %5.0f %% of 55 GB/s\n", name, s, bytes / s / 1e9,
              100.0 * bytes / s / 55e9);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [THREADS]\n", argv[0]);
    return 2;
  }
  const char *path = argv[1];
  unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 16;
  struct stat info;
  if (stat(path, &info) != 0) {
    std::perror(path);
    return 1;
  }
  size_t bytes = static_cast<size_t>(info.st_size);
  std::printf("%s: %.2f GB, %u threads\n", path, bytes / 1e9, threads);
  CHECK_CUDA(cudaFree(nullptr)); // the context, outside every timing
  void *device = nullptr;
  report("cudaMalloc (weights)", bytes, seconds([&] { CHECK_CUDA(cudaMalloc(&device, bytes)); }));
  {
    void *workspace = nullptr;
    double s = seconds([&] {
      CHECK_CUDA(cudaMalloc(&workspace, size_t(5) << 30));
      CHECK_CUDA(cudaFree(workspace));
    });
    std::printf("%-44s %8.3f s\n", "cudaMalloc + cudaFree of 5 GiB", s);
  }
  {
    void *pinned[4];
    double s = seconds([&] {
      for (void *&p : pinned)
        CHECK_CUDA(cudaMallocHost(&p, size_t(64) << 20));
    });
    double f = seconds([&] {
      for (void *p : pinned)
        CHECK_CUDA(cudaFreeHost(p));
    });
    std::printf("%-44s %8.3f s (free %.3f s)\n", "cudaMallocHost 4 x 64 MiB", s, f);
  }
  {
    // The copy engine alone: 1 GiB pinned, copied over and over.
    size_t chunk = std::min(bytes, size_t(1) << 30);
    void *pinned = nullptr;
    CHECK_CUDA(cudaMallocHost(&pinned, chunk));
    std::memset(pinned, 1, chunk);
    CHECK_CUDA(cudaMemcpy(device, pinned, chunk, cudaMemcpyHostToDevice));
    double s = seconds([&] {
      for (size_t at = 0; at < bytes; at += chunk)
        CHECK_CUDA(cudaMemcpy(static_cast<char *>(device) + at, pinned, std::min(chunk, bytes - at),
                              cudaMemcpyHostToDevice));
    });
    report("pinned -> device (the copy engine alone)", bytes, s);
    CHECK_CUDA(cudaFreeHost(pinned));
  }
  cpu::ThreadPool pool(threads);
  {
    Mapping m(path, bytes, 0);
    double s = seconds([&] {
      std::atomic<unsigned long> total{0}; // keeps the reads
      pool.parallelFor(static_cast<int64_t>(bytes >> 20), [&](int64_t b, int64_t e) {
        unsigned long sum = 0;
        for (size_t at = size_t(b) << 20; at < std::min(bytes, size_t(e) << 20); at += 4096)
          sum += static_cast<const unsigned char *>(m.data)[at];
        total += sum;
      });
    });
    report("fault in a fresh mapping (touch each page)", bytes, s);
  }
  {
    // The host side alone: the mapping (page cache) into pinned memory, and
    // pinned into pinned, by `threads` threads, no copy engine involved.
    size_t chunk = size_t(64) << 20;
    void *pinned[2];
    for (void *&p : pinned) {
      CHECK_CUDA(cudaMallocHost(&p, chunk));
      std::memset(p, 1, chunk);
    }
    constexpr size_t kSlice = size_t(1) << 20;
    // The pool is made outside the timed part: its threads' start is not a copy.
    auto fill = [&](cpu::ThreadPool &pool, const unsigned char *from, size_t total) {
      for (size_t at = 0; at < total; at += chunk) {
        size_t n = std::min(chunk, total - at);
        pool.parallelFor(static_cast<int64_t>((n + kSlice - 1) / kSlice), [&](int64_t b, int64_t e) {
          size_t begin = size_t(b) * kSlice, end = std::min(n, size_t(e) * kSlice);
          std::memcpy(static_cast<unsigned char *>(pinned[0]) + begin, from + at + begin,
                      end - begin);
        });
      }
    };
    for (unsigned parts : {1u, 4u, 8u, threads}) {
      Mapping m(path, bytes, 0);
      cpu::ThreadPool pool(parts);
      std::string name = "mapping -> pinned, " + std::to_string(parts) + " threads";
      report(name.c_str(), bytes,
             seconds([&] { fill(pool, static_cast<const unsigned char *>(m.data), bytes); }));
    }
    for (unsigned parts : {1u, threads}) {
      cpu::ThreadPool pool(parts);
      std::string name = "pinned -> pinned, " + std::to_string(parts) + " threads";
      size_t total = size_t(4) * chunk; // the same 64 MiB four times
      double s = seconds([&] {
        for (size_t at = 0; at < total; at += chunk)
          fill(pool, static_cast<const unsigned char *>(pinned[1]), chunk);
      });
      report(name.c_str(), total, s);
    }
    for (void *p : pinned)
      CHECK_CUDA(cudaFreeHost(p));
  }
  // The runtime's upload (a fresh mapping each time, as moec_load makes) over
  // plans: the first run of a plan pins its staging, the second finds it cached.
  for (size_t chunkMiB : {4, 8, 16, 32, 64})
    for (int buffers : {2, 4, 8}) {
      cuda::UploadPlan plan{chunkMiB << 20, buffers, threads};
      for (const char *when : {"first", "cached"}) {
        Mapping m(path, bytes, 0);
        double s = seconds([&] {
          Status st = cuda::uploadThroughPinned(m.data, bytes, device, plan);
          if (!st) {
            std::fprintf(stderr, "%s\n", st.message().c_str());
            std::exit(1);
          }
        });
        std::string name = "upload " + std::to_string(buffers) + " x " + std::to_string(chunkMiB) +
                           " MiB (" + when + ")";
        report(name.c_str(), bytes, s);
      }
    }
  CHECK_CUDA(cudaFree(device));
  return 0;
}
