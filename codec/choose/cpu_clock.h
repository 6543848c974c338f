#pragma once
// CPU time of the calling thread, in milliseconds: what a piece of choosing
// cost, whatever else the machine runs.

#include <ctime>

namespace brevis::codec {

inline double thread_cpu_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e3 * static_cast<double>(t.tv_sec) +
         1e-6 * static_cast<double>(t.tv_nsec);
}

}  // namespace brevis::codec
