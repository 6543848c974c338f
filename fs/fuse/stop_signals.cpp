#include "fs/fuse/stop_signals.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <exception>
#include <string>
#include <utility>

#include "codec/core/thread_name.h"
#include "fs/pipeline/event_log.h"

namespace brevis::fs {
namespace {

constexpr std::array<int, 3> stop_set = {SIGINT, SIGTERM, SIGHUP};

// What the handler may touch, so globals: plain atomics and a semaphore
// (sem_post is async-signal-safe, and so is fuse_session_exit, which
// libfuse's own handler calls).
// NOLINTBEGIN(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<fuse_session*> the_session{nullptr};
std::atomic<int> signals_seen{0};
std::atomic<bool> loop_running{false};
std::atomic<bool> writing_back{false};
std::atomic<bool> hurry{false};
sem_t wake_flusher;
// NOLINTEND(cppcoreguidelines-avoid-non-const-global-variables)

void on_stop_signal(int /*sig*/) {
  int const saved = errno;
  if (signals_seen.fetch_add(1) == 0) {
    sem_post(&wake_flusher);
  } else {
    // A second signal: at once. During the write-back only what is being
    // written back is waited for: the kernel waits for the loop's answers
    // to it, and the loop's end would leave it waiting for good.
    hurry = true;
    fuse_session* const se = the_session.load();
    if (se && !writing_back) fuse_session_exit(se);
  }
  errno = saved;
}

}  // namespace

stop_signals::stop_signals(fuse_session* se, write_back_fn write_back)
    : se_(se),
      write_back_(std::move(write_back)),
      loop_thread_(pthread_self()) {
  sem_init(&wake_flusher, 0, 0);
  signals_seen = 0;
  hurry = false;
  writing_back = false;
  the_session = se;
  loop_running = true;
  for (size_t i = 0; i < stop_set.size(); ++i) {
    int const sig = stop_set[i];
    struct sigaction& now = before_[i];
    if (::sigaction(sig, nullptr, &now) != 0 || now.sa_handler == SIG_IGN) {
      continue;  // ignored (nohup): stays so
    }
    installed_[i] = true;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    // No SA_RESTART: the signal must interrupt the loop thread's sem_wait,
    // which is how fuse_session_loop_mt notices an exit (sem_wait is never
    // restarted anyway).
    ::sigaction(sig, &sa, nullptr);
  }
  flusher_ = std::thread([this] {
    codec::name_this_thread("brevis-stop");
    flush_then_stop();
  });
}

stop_signals::~stop_signals() {
  loop_ended();
  if (flusher_.joinable()) flusher_.join();
  for (size_t i = 0; i < stop_set.size(); ++i) {
    if (installed_[i]) ::sigaction(stop_set[i], &before_[i], nullptr);
  }
  the_session = nullptr;
  sem_destroy(&wake_flusher);
}

// NOLINTNEXTLINE(readability-make-member-function-const): process state
void stop_signals::loop_ended() {
  // A wake-up sent as the loop ended stays pending instead of breaking a
  // system call of the stop (no SA_RESTART).
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : stop_set) sigaddset(&stops, sig);
  if (pthread_equal(pthread_self(), loop_thread_)) {
    pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  }
  if (loop_running.exchange(false)) sem_post(&wake_flusher);
}

void stop_signals::flush_then_stop() {
  while (sem_wait(&wake_flusher) != 0 && errno == EINTR) {
  }
  if (!loop_running) return;  // the loop ended otherwise (an unmount)
  log_event(log_level::info,
            "stopping: the kernel writes back what it holds for the mount");
  writing_back = true;
  try {
    write_back_([] { return hurry.load() || !loop_running.load(); });
  } catch (std::exception const& e) {
    log_event(log_level::error,
              std::string("stopping: ") + e.what() +
                  " (what writers left open had not written back is lost)");
  } catch (...) {  // NOLINT(bugprone-empty-catch): stopping regardless
  }
  writing_back = false;
  fuse_session_exit(se_);
  // Wakes the loop thread's wait (this thread blocks the signal), again
  // until the loop has ended: one that came just before the thread began
  // to wait woke nothing.
  while (loop_running) {
    // Not to end the thread: on_stop_signal takes it (run_mount never
    // leaves SIGTERM ignored), and its arrival breaks the wait.
    // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread)
    pthread_kill(loop_thread_, SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace brevis::fs
