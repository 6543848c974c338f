#pragma once
// How a mount stops on SIGINT, SIGTERM and SIGHUP. With the writeback
// cache, write(2) returns once the kernel holds the bytes in its page
// cache; ending the session at once threw away what it still held for
// files left open (a stop/kill probe: a file written and held open read
// back empty after the stop). So the first signal has the kernel write
// back everything it holds for the mount while the loop still serves those
// writes (`write_back`, the caller's), then ends the loop. A second one
// ends it at once, or, during the write-back, as soon as the write being
// waited for is answered (`write_back` is told to hurry).

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <semaphore.h>

#include <array>
#include <csignal>
#include <functional>
#include <thread>

namespace brevis::fs {

class stop_signals {
 public:
  /// Takes over the stop signals from libfuse's handlers (installed
  /// before), leaving an ignored one ignored. One instance at a time.
  /// Call from the thread that runs the session loop, which must be the
  /// only thread that does not block these signals.
  /// `write_back(hurry)` should stop early once hurry() is true.
  using write_back_fn = std::function<void(std::function<bool()> const&)>;
  stop_signals(fuse_session* se, write_back_fn write_back);
  ~stop_signals();
  stop_signals(stop_signals const&) = delete;
  stop_signals& operator=(stop_signals const&) = delete;
  stop_signals(stop_signals&&) = delete;
  stop_signals& operator=(stop_signals&&) = delete;

  /// The loop returned: nothing is flushed or woken any more.
  void loop_ended();

 private:
  void flush_then_stop();

  fuse_session* const se_;
  write_back_fn const write_back_;
  pthread_t const loop_thread_;
  std::thread flusher_;
  // The handlers taken over (SIGINT, SIGTERM, SIGHUP), put back at the end.
  std::array<struct sigaction, 3> before_{};
  std::array<bool, 3> installed_{};
};

}  // namespace brevis::fs
