#pragma once
// Makes the index's unsynced commits durable a moment later. Most of a
// mount's commits (a create, a close's size and times, the queue's status)
// are not synced as they commit (FORMAT.md S.4): one fdatasync instead of
// two each. A local filesystem's journal commits within seconds; this does
// the same for the index: `delay` after the first unsynced commit, one sync
// covers it and every one after it. One thread, started at the first.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace brevis::fs::detail {

class deferred_sync {
 public:
  /// `sync` makes every commit so far durable; when it throws, it is tried
  /// again a delay later (a synced commit meanwhile reports the fault).
  deferred_sync(std::function<void()> sync, std::chrono::milliseconds delay);
  /// Stops without syncing: the owner syncs what is left.
  ~deferred_sync();
  deferred_sync(deferred_sync const&) = delete;
  deferred_sync& operator=(deferred_sync const&) = delete;
  deferred_sync(deferred_sync&&) = delete;  // its thread holds `this`
  deferred_sync& operator=(deferred_sync&&) = delete;

  /// A commit was not synced: sync within the delay. Throws
  /// std::system_error when the thread cannot start.
  void due();

 private:
  using clock = std::chrono::steady_clock;
  void run();

  std::function<void()> const sync_;
  std::chrono::milliseconds const delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<clock::time_point> due_;  // when the next sync runs
  bool stopping_ = false;
  std::thread thread_;  // from the first due() on; under mu_
};

}  // namespace brevis::fs::detail
