#pragma once
// The clock that times pieces of choosing (the per-region ms that inspect
// shows and the choosing share of `compress -v`), in milliseconds. Steady
// time, not the thread's CPU time: CLOCK_THREAD_CPUTIME_ID is a system call
// (1.4 us on the AMD guest we measure on, 4-6 us under load), and choosing
// reads the clock ~2,700 times per blazepose-heavy bf16 compress: 4-10% of
// it. A thread descheduled mid-piece counts the wait; the search's time
// limit, which must not depend on load, keeps its own CPU clock (astar.cpp).

#include <chrono>

namespace brevis::codec {

inline double work_clock_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace brevis::codec
