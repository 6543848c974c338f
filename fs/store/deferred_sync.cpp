#include "fs/store/deferred_sync.h"

#include <utility>

namespace brevis::fs::detail {

deferred_sync::deferred_sync(std::function<void()> sync,
                             std::chrono::milliseconds delay)
    : sync_(std::move(sync)), delay_(delay) {}

deferred_sync::~deferred_sync() {
  std::thread running;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    running = std::move(thread_);
  }
  cv_.notify_all();
  if (running.joinable()) running.join();
}

void deferred_sync::due() {
  std::lock_guard lk(mu_);
  if (stopping_ || due_) return;  // one sync covers every commit before it
  due_ = clock::now() + delay_;
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_all();
}

void deferred_sync::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stopping_ || due_.has_value(); });
    if (stopping_) return;
    if (cv_.wait_until(lk, *due_, [this] { return stopping_; })) return;
    // Cleared before the sync: a commit meanwhile asks for the next one.
    due_.reset();
    lk.unlock();
    try {
      sync_();
    } catch (...) {
    }
    lk.lock();
  }
}

}  // namespace brevis::fs::detail
