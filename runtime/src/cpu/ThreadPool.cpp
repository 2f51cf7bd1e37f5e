//===- ThreadPool.cpp - a fixed pool for data-parallel loops ----------------===//

#include "moec/runtime/cpu/ThreadPool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace moec::rt::cpu {

namespace {
/// Chunk `index` of `parts` over [0, count).
std::pair<int64_t, int64_t> chunk(int64_t count, unsigned parts, unsigned index) {
  int64_t base = count / parts, extra = count % parts;
  int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (static_cast<int64_t>(index) < extra ? 1 : 0)};
}

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Sleeps while `word` holds `value` (or returns at once if it does not), and
/// wakes the sleepers of `word`: futexes on Linux. (GCC 12's std::atomic wait
/// lost wake-ups here.)
void sleepWhile(std::atomic<uint32_t> &word, uint32_t value) {
#ifdef __linux__
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT_PRIVATE, value, nullptr,
          nullptr, 0);
#else
  word.wait(value);
#endif
}

void wakeAll(std::atomic<uint32_t> &word) {
#ifdef __linux__
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
#else
  word.notify_all();
#endif
}

/// How long a worker spins for the next loop before it sleeps: the gap between
/// two kernels of one model run is far shorter, the gap between two runs
/// usually longer. And how long the caller spins for the chunks its workers
/// still run before it sleeps: a worker preempted by another process (a busy
/// host) then gets the caller's core sooner.
constexpr auto kWorkerSpin = std::chrono::microseconds(50);
constexpr auto kCallerSpin = std::chrono::microseconds(20);

/// Spins until `done()` or `limit` has passed; true if done.
template <typename Done> bool spinFor(std::chrono::microseconds limit, Done done) {
  auto start = std::chrono::steady_clock::now();
  for (unsigned i = 1;; ++i) {
    if (done())
      return true;
    relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > limit)
      return done();
  }
}
} // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i)
    workers_.emplace_back([this, i] { work(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(2);
  wakeAll(generation_);
  for (std::thread &worker : workers_)
    worker.join();
}

unsigned ThreadPool::chunksFor(int64_t count, double work) const {
  if (size() == 1 || work < 2 * kMinChunkWork)
    return 1;
  double byWork = work / kMinChunkWork;
  double most = static_cast<double>(size()) * kChunksPerThread;
  return static_cast<unsigned>(std::min<double>({byWork, most, static_cast<double>(count)}));
}

void ThreadPool::parallelFor(int64_t count, const std::function<void(int64_t, int64_t)> &body) {
  if (count <= 0)
    return;
  unsigned chunks = static_cast<unsigned>(std::min<int64_t>(size(), count));
  if (chunks <= 1) {
    body(0, count);
    return;
  }
  using Fn = std::function<void(int64_t, int64_t)>;
  run(count, chunks,
      [](void *context, int64_t begin, int64_t end) { (*static_cast<const Fn *>(context))(begin, end); },
      const_cast<Fn *>(&body));
}

namespace {
/// Claims and runs chunks of generation `generation` until none is left;
/// returns how many this thread ran.
template <typename Run>
uint32_t claimChunks(std::atomic<uint64_t> &claim, uint32_t generation, unsigned chunks, Run run) {
  uint32_t ran = 0;
  uint64_t word = claim.load(std::memory_order_relaxed);
  while (static_cast<uint32_t>(word >> 32) == generation &&
         static_cast<uint32_t>(word) < chunks) {
    if (!claim.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                     std::memory_order_relaxed))
      continue;
    run(static_cast<unsigned>(static_cast<uint32_t>(word)));
    ++ran;
    word = claim.load(std::memory_order_relaxed);
  }
  return ran;
}
} // namespace

void ThreadPool::run(int64_t count, unsigned chunks, Trampoline fn, void *context) {
  std::lock_guard<std::mutex> lock(callers_);
  // Odd while the job is written (every worker of the previous job is done
  // with it: the previous caller waited for its chunks, and a late worker
  // finds none of the new job's until it is published).
  uint32_t generation = generation_.load(std::memory_order_relaxed) + 2;
  generation_.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  fn_.store(fn, std::memory_order_relaxed);
  context_.store(context, std::memory_order_relaxed);
  count_.store(count, std::memory_order_relaxed);
  chunks_.store(chunks, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(generation) << 32, std::memory_order_relaxed);
  generation_.fetch_add(1); // seq_cst: publishes the job, ordered before sleepers_'s read
  if (sleepers_.load() > 0)
    wakeAll(generation_);
  uint32_t ran = claimChunks(claim_, generation, chunks, [&](unsigned index) {
    auto [begin, end] = chunk(count, chunks, index);
    fn(context, begin, end);
  });
  // Every chunk is claimed: wait for those the workers run (briefly: they are
  // running them).
  if (done_.fetch_add(ran) + ran == chunks)
    return;
  if (!spinFor(kCallerSpin, [&] { return done_.load(std::memory_order_acquire) == chunks; })) {
    callerSleeping_.store(1);
    for (uint32_t finished; (finished = done_.load()) != chunks;)
      sleepWhile(done_, finished);
    callerSleeping_.store(0);
  }
}

void ThreadPool::work(unsigned) {
  // The generation at construction: a job published before this thread runs
  // is still new to it.
  uint32_t seen = 0;
  while (true) {
    if (!spinFor(kWorkerSpin,
                 [&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      sleepers_.fetch_add(1); // seq_cst: ordered before the generation's re-check
      while (generation_.load() == seen)
        sleepWhile(generation_, seen);
      sleepers_.fetch_sub(1);
    }
    if (stopping_.load())
      return;
    // Read the job under the sequence lock.
    uint32_t generation = generation_.load(std::memory_order_acquire);
    if (generation & 1u)
      continue; // being written: spin again
    Trampoline fn = fn_.load(std::memory_order_relaxed);
    void *context = context_.load(std::memory_order_relaxed);
    int64_t count = count_.load(std::memory_order_relaxed);
    unsigned chunks = chunks_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (generation_.load(std::memory_order_relaxed) != generation)
      continue; // a newer job came meanwhile: read that one
    seen = generation;
    uint32_t ran = claimChunks(claim_, generation, chunks, [&](unsigned index) {
      auto [begin, end] = chunk(count, chunks, index);
      fn(context, begin, end);
    });
    if (ran && done_.fetch_add(ran) + ran == chunks && callerSleeping_.load())
      wakeAll(done_);
  }
}

} // namespace moec::rt::cpu
