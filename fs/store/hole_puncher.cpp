#include "fs/store/hole_puncher.h"

#include <algorithm>
#include <utility>

#include "codec/core/thread_name.h"

namespace brevis::fs::detail {

namespace {
// How long a batch waits when the packs were busy (a compression job holds
// them for its whole run).
constexpr std::chrono::milliseconds busy_retry{1000};
}  // namespace

hole_puncher::hole_puncher(std::chrono::milliseconds delay, punch_fn punch)
    : delay_(delay), punch_(std::move(punch)) {}

hole_puncher::~hole_puncher() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void hole_puncher::add(std::vector<dead_record> const& records) {
  if (records.empty()) return;
  std::lock_guard lk(mu_);
  clock::time_point const due = clock::now() + delay_;
  for (dead_record const& r : records) queue_.push_back({due, r});
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      codec::name_this_thread("brevis-punch");
      run();
    });
  }
  cv_.notify_all();
}

void hole_puncher::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) return;
      cv_.wait(lk);
      continue;
    }
    clock::time_point const now = clock::now();
    if (!stopping_ && queue_.front().due > now) {
      cv_.wait_until(lk, queue_.front().due);
      continue;
    }
    std::vector<dead_record> batch;
    while (!queue_.empty() && (stopping_ || queue_.front().due <= now)) {
      batch.push_back(queue_.front().record);
      queue_.pop_front();
    }
    bool const stop = stopping_;
    lk.unlock();
    size_t done = 0;
    try {
      done = std::min(punch_(batch), batch.size());
    } catch (...) {
      done = batch.size();  // dropped: gc reclaims what was not punched
    }
    lk.lock();
    bool const all = done == batch.size();
    if (!all && !stop) {
      clock::time_point const later = clock::now() + busy_retry;
      for (size_t i = batch.size(); i-- > done;) {
        queue_.push_front({later, batch[i]});
      }
    }
    // Stopping with the packs busy: left dead, as gc would find them.
    if (!all && stop) return;
  }
}

}  // namespace brevis::fs::detail
