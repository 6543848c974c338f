#pragma once
// The CLI's parallel loops. With one thread they run on the calling thread
// and TBB is never started: its first use dlopens libtbbmalloc, looks for
// libirml.so in 45 places and starts a thread even at one thread of
// parallelism (a test program: 8.3 ms bare, 11.5 ms after global_control
// and a parallel_for at max_allowed_parallelism 1), a third of what a small
// file costs at -T1. The same holds for one item, and for anything the
// caller decides to run serially: the bound on TBB's workers is set here,
// when a loop does go parallel, not for the whole run.

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <cstddef>
#include <utility>

#include "codec/core/parallel.h"
#include "fs/pipeline/ordered_pipeline.h"

namespace brevis::cli {

/// body(i) for i in [0, count), on up to `threads` threads, in any order.
template <typename Body>
void parallel_for_index(unsigned threads, size_t count, Body&& body) {
  if (threads <= 1 || count <= 1) {  // one item: no workers to start
    for (size_t i = 0; i < count; ++i) body(i);
    return;
  }
  tbb::global_control const limit(tbb::global_control::max_allowed_parallelism,
                                  threads);
  tbb::parallel_for(size_t{0}, count, std::forward<Body>(body));
}

/// body(begin, end) over ranges covering [0, count), on up to `threads`
/// threads; with one thread, or one item, a single range on this thread.
inline void parallel_for_ranges(unsigned threads, size_t count,
                                codec::range_body const& body) {
  if (count == 0) return;
  if (threads <= 1 || count <= 1) {
    body(0, count);
    return;
  }
  tbb::global_control const limit(tbb::global_control::max_allowed_parallelism,
                                  threads);
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count),
      [&](tbb::blocked_range<size_t> const& r) { body(r.begin(), r.end()); });
}

/// fs::ordered_pipeline with 2 x threads items in flight; with one thread
/// or one item, produce(i) then consume(result) for each i in turn (the
/// pipeline could overlap nothing anyway). An exception ends the run after the
/// items before it were consumed, as in the pipeline.
template <typename Produce, typename Consume>
void ordered_run(unsigned threads, size_t count, Produce&& produce,
                 Consume&& consume) {
  // One item can overlap nothing either, and starting TBB's workers for it
  // cost ~1 ms of CPU: the whole time of decompressing a small checkpoint.
  if (threads <= 1 || count <= 1) {
    for (size_t i = 0; i < count; ++i) {
      auto result = produce(i);
      consume(result);
    }
    return;
  }
  tbb::global_control const limit(tbb::global_control::max_allowed_parallelism,
                                  threads);
  fs::ordered_pipeline(count, 2 * size_t{threads},
                       std::forward<Produce>(produce),
                       std::forward<Consume>(consume));
}

}  // namespace brevis::cli
