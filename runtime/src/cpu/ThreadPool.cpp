//===- ThreadPool.cpp - a fixed pool for data-parallel loops ----------------===//

#include "moec/runtime/cpu/ThreadPool.h"

#include <algorithm>

namespace moec::rt::cpu {

namespace {
/// Chunk `index` of `parts` over [0, count).
std::pair<int64_t, int64_t> chunk(int64_t count, unsigned parts, unsigned index) {
  int64_t base = count / parts, extra = count % parts;
  int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (static_cast<int64_t>(index) < extra ? 1 : 0)};
}
} // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i)
    workers_.emplace_back([this, i] { work(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

void ThreadPool::parallelFor(int64_t count, const std::function<void(int64_t, int64_t)> &body) {
  if (count <= 0)
    return;
  if (workers_.empty() || count == 1) {
    body(0, count);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    count_ = count;
    pending_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  auto [begin, end] = chunk(count, size(), 0);
  body(begin, end);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  body_ = nullptr;
}

void ThreadPool::work(unsigned index) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t, int64_t)> *body;
    int64_t count;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_)
        return;
      seen = generation_;
      body = body_;
      count = count_;
    }
    auto [begin, end] = chunk(count, size(), index);
    if (begin < end)
      (*body)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0)
        done_.notify_one();
    }
  }
}

} // namespace moec::rt::cpu
