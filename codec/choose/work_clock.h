#pragma once
// The clocks that time pieces of choosing, in milliseconds.
//
// work_clock_ms: the per-region ms that inspect shows. Steady time, not the
// thread's CPU time: CLOCK_THREAD_CPUTIME_ID is a system call (1.4 us on the
// AMD guest we measure on, 4-6 us under load), and a per-region clock is
// read hundreds of times per file. A thread descheduled mid-piece counts the
// wait.
//
// thread_cpu_ms: the CPU time of the calling thread, for batches (every
// region's count, every winner's tables): read twice a batch, it costs
// nothing, and a loaded machine does not inflate it. The coding work that
// `compress -v` sets apart from choosing is timed by it, as a steady clock
// around short pieces on a loaded box counted whole time slices of other
// processes (blazepose-heavy bf16, load 8 on 2 cores: 36 ms of "coding"
// inside 35 ms of choosing CPU).

#include <chrono>
#include <ctime>

namespace brevis::codec {

inline double work_clock_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 +
         static_cast<double>(t.tv_nsec) / 1e6;
}

}  // namespace brevis::codec
