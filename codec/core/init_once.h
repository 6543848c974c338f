#pragma once
// Runs an initialization once, like std::call_once, but without a system
// call on the first run: glibc's pthread_once (under std::call_once) wakes
// possible waiters with a futex syscall after every first call, waiting or
// not. A rans_static coder builds its tables on first use, and the mount's
// read path makes a coder per decoded chunk: that wake-up cost ~0.5-1% of a
// cold sequential read (perf, pvm_irq_enable under __pthread_once_slow).
// Later calls cost one acquire load; racing first calls wait on a mutex.

#include <atomic>
#include <mutex>

namespace brevis::codec {

class init_once {
 public:
  /// Runs `init` unless a previous call completed it. If it throws, the
  /// exception propagates and the next call tries again.
  template <typename F>
  void operator()(F&& init) {
    if (done_.load(std::memory_order_acquire)) return;
    std::lock_guard lk(mu_);
    if (done_.load(std::memory_order_relaxed)) return;
    init();
    done_.store(true, std::memory_order_release);
  }

  /// Whether a call completed the initialization.
  bool done() const { return done_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> done_{false};
  std::mutex mu_;
};

}  // namespace brevis::codec
