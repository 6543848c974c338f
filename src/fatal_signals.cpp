#include "src/fatal_signals.h"

#include <linux/limits.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstring>

namespace brevis::cli {
namespace {

// A path for the handler: written by the main thread, read by the handler.
// `set` goes to 0 while the path changes, so a handler never reads half of
// one.
struct signal_path {
  std::array<char, PATH_MAX> path{};
  volatile sig_atomic_t set = 0;

  void assign(std::string const& p) noexcept {
    set = 0;
    if (p.empty() || p.size() >= path.size()) return;
    std::memcpy(path.data(), p.c_str(), p.size() + 1);
    set = 1;
  }
};

// Globals: a signal handler reaches nothing else.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
signal_path g_temporary;
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
signal_path g_input;

void say(char const* text) {
  (void)!::write(STDERR_FILENO, text, std::strlen(text));
}

extern "C" void on_fatal_signal(int sig) {
  if (g_temporary.set) ::unlink(g_temporary.path.data());
  if (sig == SIGBUS) {
    say("brevis: ");
    if (g_input.set) say(g_input.path.data()), say(": ");
    // Without an input, a mapping of the store's: LMDB maps its index.
    say(g_input.set ? "cut short by another process while it was read, or "
                      "an I/O error under it (SIGBUS)\n"
                    : "a mapped file was cut short while it was read: a "
                      "store index truncated or damaged, a full disk, or "
                      "an I/O error (SIGBUS)\n");
    ::_exit(1);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Every signal whose default action ends the process, so that none leaves
// the temporary behind (SIGXFSZ: a file size limit; SIGPIPE: a closed
// stdout).
constexpr std::array ending_signals = {SIGINT,  SIGTERM, SIGHUP,    SIGQUIT,
                                       SIGPIPE, SIGALRM, SIGUSR1,   SIGUSR2,
                                       SIGXFSZ, SIGXCPU, SIGVTALRM, SIGPROF};

}  // namespace

void install_fatal_signal_handlers() {
  // One the caller ignores stays ignored (nohup, a shell's background
  // jobs), as zstd and gzip leave it. SIGBUS always: a mapped input's fault
  // cannot be ignored.
  for (int sig : ending_signals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) {
      continue;
    }
    std::signal(sig, on_fatal_signal);
  }
  std::signal(SIGBUS, on_fatal_signal);
}

void restore_default_signal_handlers() {
  for (int sig : ending_signals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 &&
        old.sa_handler == on_fatal_signal) {
      std::signal(sig, SIG_DFL);
    }
  }
}

void set_signal_temporary(std::string const& path) noexcept {
  g_temporary.assign(path);
}

void set_signal_input(std::string const& path) noexcept {
  g_input.assign(path);
}

}  // namespace brevis::cli
