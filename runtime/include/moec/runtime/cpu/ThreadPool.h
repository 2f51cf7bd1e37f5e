//===- ThreadPool.h - a fixed pool for data-parallel loops -----*- C++ -*-===//

#ifndef MOEC_RUNTIME_CPU_THREADPOOL_H
#define MOEC_RUNTIME_CPU_THREADPOOL_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace moec::rt::cpu {

/// Runs `body(begin, end)` over [0, count) split into contiguous chunks and
/// waits. Chunks are fixed by (count, work, threads); kernels compute each
/// index the same way whatever chunk holds it and write disjoint outputs per
/// index, so results do not depend on the thread count.
///
/// A loop whose estimated work is small runs on the calling thread alone: a
/// worker's wake-up costs more than the loop (docs/performance.md, "CPU
/// backend"). A larger one is cut into a few chunks per thread that the caller
/// and the workers claim one at a time, so a worker that is slow to wake (a
/// busy host) delays nothing: the caller takes its chunks. Between loops the
/// workers spin briefly on the job counter, then sleep on it (a futex), so the
/// loops of one model run hand over in well under a microsecond and an idle
/// pool costs nothing.
class ThreadPool {
public:
  /// `threads` workers (0: the hardware's concurrency); the caller's thread
  /// is one of them.
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  /// Work (in multiply-adds, or as long) below which a chunk does not pay for
  /// a worker's hand-over: each chunk gets at least this much (~5-10 µs). On a
  /// host shared with other processes a worker is sometimes preempted in the
  /// middle of a chunk, so smaller loops than this lose more than they gain.
  static constexpr double kMinChunkWork = 256 * 1024;

  /// Chunks per thread of a loop large enough for them.
  static constexpr unsigned kChunksPerThread = 4;

  /// `work`: the whole loop's estimated cost in multiply-adds (or as long).
  /// At most work / kMinChunkWork chunks; one chunk runs inline.
  template <typename Body> void parallelFor(int64_t count, double work, Body &&body) {
    if (count <= 0)
      return;
    unsigned chunks = chunksFor(count, work);
    if (chunks <= 1) {
      body(int64_t{0}, count);
      return;
    }
    using Fn = std::remove_reference_t<Body>;
    run(count, chunks,
        [](void *context, int64_t begin, int64_t end) { (*static_cast<Fn *>(context))(begin, end); },
        const_cast<void *>(static_cast<const void *>(&body)));
  }

  /// Without an estimate: as many chunks as threads (and indices).
  void parallelFor(int64_t count, const std::function<void(int64_t, int64_t)> &body);

  /// The chunks a loop of `count` indices and `work` gets.
  unsigned chunksFor(int64_t count, double work) const;

private:
  using Trampoline = void (*)(void *, int64_t, int64_t);
  void run(int64_t count, unsigned chunks, Trampoline fn, void *context);
  void work(unsigned index);

  std::vector<std::thread> workers_;
  std::mutex callers_; // one loop at a time
  // The job, under a sequence lock: generation_ is odd while the caller writes
  // it; a worker takes a job only if the (even) generation it read before the
  // fields is still there after them.
  std::atomic<Trampoline> fn_{nullptr};
  std::atomic<void *> context_{nullptr};
  std::atomic<int64_t> count_{0};
  std::atomic<unsigned> chunks_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<uint32_t> sleepers_{0};
  // The next chunk to claim, with the generation it belongs to in the high
  // half (a worker late for a loop claims nothing of the next one).
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<uint32_t> done_{0}; // chunks finished
  std::atomic<uint32_t> callerSleeping_{0};
  std::atomic<bool> stopping_{false};
};

} // namespace moec::rt::cpu

#endif // MOEC_RUNTIME_CPU_THREADPOOL_H
