#pragma once
// Names the calling thread, so that `top -H`, `ps -L`, perf and
// /proc/PID/task/*/comm tell a process's threads apart (the mount daemon
// runs a dozen: FUSE workers, prefetchers, compression workers, syncers).

#include <pthread.h>

namespace brevis::codec {

/// Linux keeps 15 characters of a name; a longer one is refused, so every
/// name given here stays within them (checked at compile time).
template <unsigned N>
void name_this_thread(char const (&name)[N]) noexcept {
  static_assert(N <= 16, "thread names hold at most 15 characters");
  pthread_setname_np(pthread_self(), static_cast<char const*>(name));
}

}  // namespace brevis::codec
