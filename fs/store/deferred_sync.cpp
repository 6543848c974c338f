#include "fs/store/deferred_sync.h"

#include <utility>

#include "codec/core/thread_name.h"

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
  // The thread first: when it cannot start, nothing is left due.
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      codec::name_this_thread("brevis-idxsync");
      run();
    });
  }
  due_ = clock::now() + delay_;
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
    bool failed = false;
    try {
      sync_();
    } catch (...) {
      failed = true;
    }
    lk.lock();
    // Tried again a delay later: an idle mount would otherwise stay
    // unsynced until its next commit.
    if (failed && !due_) due_ = clock::now() + delay_;
  }
}

}  // namespace brevis::fs::detail
