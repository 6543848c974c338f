#include "fs/pipeline/compress_queue.h"

#include <algorithm>

#include "codec/core/thread_name.h"

namespace brevis::fs {

compress_queue::compress_queue(job_fn job, unsigned workers)
    : job_(std::move(job)) {
  for (unsigned i = 0; i < std::max(1u, workers); ++i) {
    threads_.emplace_back([this] {
      codec::name_this_thread("brevis-compress");
      work();
    });
  }
}

compress_queue::~compress_queue() { stop(); }

void compress_queue::schedule(uint64_t ino, std::chrono::milliseconds delay) {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    due_[ino] = clock::now() + delay;
  }
  cv_.notify_all();
}

bool compress_queue::cancel(uint64_t ino) {
  std::lock_guard lk(mu_);
  return due_.erase(ino) > 0;
}

bool compress_queue::queued(uint64_t ino) const {
  std::lock_guard lk(mu_);
  return due_.count(ino) > 0;
}

bool compress_queue::running(uint64_t ino) const {
  std::lock_guard lk(mu_);
  return std::find(running_.begin(), running_.end(), ino) != running_.end();
}

size_t compress_queue::pending() const {
  std::lock_guard lk(mu_);
  return due_.size() + running_.size();
}

void compress_queue::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void compress_queue::work() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    // The earliest due entry that no other worker is running.
    auto next = due_.end();
    for (auto it = due_.begin(); it != due_.end(); ++it) {
      if (std::find(running_.begin(), running_.end(), it->first) !=
          running_.end()) {
        continue;
      }
      if (next == due_.end() || it->second < next->second) next = it;
    }
    if (next == due_.end()) {
      cv_.wait(lk);
      continue;
    }
    if (next->second > clock::now()) {
      // A copy: the entry may go while we wait.
      clock::time_point const when = next->second;
      cv_.wait_until(lk, when);
      continue;
    }
    uint64_t const ino = next->first;
    due_.erase(next);
    running_.push_back(ino);
    lk.unlock();
    job_(ino);  // never throws (see the header)
    lk.lock();
    running_.erase(std::find(running_.begin(), running_.end(), ino));
    cv_.notify_all();
  }
}

}  // namespace brevis::fs
