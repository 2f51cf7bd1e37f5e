//===- ThreadPool.h - a fixed pool for data-parallel loops -----*- C++ -*-===//

#ifndef MOEC_RUNTIME_CPU_THREADPOOL_H
#define MOEC_RUNTIME_CPU_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moec::rt::cpu {

/// Runs `body(begin, end)` over [0, count) split into contiguous chunks, one
/// per worker, and waits. Chunks are fixed by (count, threads), so work
/// assignment is deterministic; kernels write disjoint outputs per index.
class ThreadPool {
public:
  /// `threads` workers (0: the hardware's concurrency); the caller's thread
  /// is one of them.
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }
  void parallelFor(int64_t count, const std::function<void(int64_t, int64_t)> &body);

private:
  void work(unsigned index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int64_t, int64_t)> *body_ = nullptr;
  int64_t count_ = 0;
  uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stopping_ = false;
};

} // namespace moec::rt::cpu

#endif // MOEC_RUNTIME_CPU_THREADPOOL_H
