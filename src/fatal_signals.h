#pragma once
// What the CLI does when a signal ends it. SIGINT, SIGTERM, SIGHUP and the
// other signals that end a process by default remove the output being
// written (its uncommitted temporary), then end the process by the same
// signal; one ignored when brevis started (nohup) stays ignored. SIGBUS is a
// mapped input cut short by another process while it was read, or an I/O error
// under its pages: the handler also says so on stderr, naming the input, and
// exits with status 1 (an error like any other, not a core dump). The handlers
// only call async-signal-safe functions (write, unlink, signal, raise, _exit);
// the paths they use are copied ahead into static buffers.

#include <string>

namespace brevis::cli {

/// Installs the handlers (once, early, from the main thread).
void install_fatal_signal_handlers();

/// Puts back the default action of the signals the handlers took (SIGBUS
/// aside), for a command with handlers of its own: the mount, whose
/// libfuse installs its own only over defaults (and then ignores SIGPIPE).
void restore_default_signal_handlers();

/// The temporary the handlers remove; "" for none (committed or removed).
/// Paths too long to keep are not removed by a signal.
void set_signal_temporary(std::string const& path) noexcept;

/// The mapped input that SIGBUS names; "" for none.
void set_signal_input(std::string const& path) noexcept;

}  // namespace brevis::cli
