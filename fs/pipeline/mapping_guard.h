#pragma once
// Keeps a fault on a read-only file mapping from ending the process. A
// mapped file cut short by another process, or an I/O error under one of its
// pages, raises SIGBUS at the next touch of the lost pages; by default that
// kills the daemon and with it the mount. For an address inside a guarded
// mapping the handler instead maps zero pages over the rest of the mapping
// and marks the guard: the reader goes on, reading zeros, and its owner asks
// faulted() before trusting what it read (the compression job then fails
// and the file stays staged).
//
// SIGBUS raised anywhere else goes to the handler installed before the
// first guard (the CLI's, src/fatal_signals.h), or to the default action.
// The handler installs itself when the first guard is made, so handlers set
// up later must chain to it rather than replace it. (Under AddressSanitizer
// with handle_sigbus=2, ASan keeps SIGBUS to itself and the guards do
// nothing.)

#include <cstddef>

namespace brevis::fs {

class mapping_guard {
 public:
  /// Guards the mapping [base, base + size) (`base` as mmap returned it, at
  /// a page boundary; the guard covers its last page whole). Up to `slots`
  /// mappings are guarded at once; past that, or for a base off a page
  /// boundary, a guard is inert (guarded() false) and a fault ends the
  /// process as before.
  mapping_guard(void const* base, size_t size) noexcept;
  /// Stops guarding: call before unmapping.
  ~mapping_guard();
  mapping_guard(mapping_guard const&) = delete;
  mapping_guard& operator=(mapping_guard const&) = delete;
  mapping_guard(mapping_guard&&) = delete;
  mapping_guard& operator=(mapping_guard&&) = delete;

  bool guarded() const { return slot_ >= 0; }
  /// Whether a touch of the mapping faulted (its bytes from the faulting
  /// page on read as zeros since).
  bool faulted() const noexcept;

  static constexpr int slots = 64;

 private:
  int slot_ = -1;
};

}  // namespace brevis::fs
