#pragma once
// The write path's queue (DESIGN 3.2): files closed by their last writer
// wait here for a quiet period, then a worker compresses them into the
// store. The queue only orders and times work; what a job does (read the
// staged copy, compress, commit, drop the copy) is the mount's job
// function, which must not throw (errors leave the file staged).
//
// Thread-safe. stop() stops taking work and waits for the running job,
// which the mount cancels through its own flag; entries still waiting stay
// staged in the store and are queued again by the next mount.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace brevis::fs {

class compress_queue {
 public:
  using clock = std::chrono::steady_clock;
  using job_fn = std::function<void(uint64_t ino)>;

  /// Starts `workers` threads that run `job` for due entries.
  compress_queue(job_fn job, unsigned workers = 1);
  ~compress_queue();
  compress_queue(compress_queue const&) = delete;
  compress_queue& operator=(compress_queue const&) = delete;

  /// Queues `ino` to run after `delay`; a queued entry is moved to the new
  /// time. Ignored after stop().
  void schedule(uint64_t ino, std::chrono::milliseconds delay);
  /// Takes `ino` off the queue (it is not running); true when it was on.
  bool cancel(uint64_t ino);
  bool queued(uint64_t ino) const;
  /// The inode a worker is running, when any.
  bool running(uint64_t ino) const;
  /// Entries waiting plus jobs running.
  size_t pending() const;
  /// Stops taking work and joins the workers (the running jobs finish).
  void stop();

 private:
  void work();

  job_fn job_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, clock::time_point> due_;
  std::vector<uint64_t> running_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace brevis::fs
