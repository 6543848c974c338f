#pragma once
// Loops that a caller may run on several threads. The codec starts no
// threads of its own: whoever runs it (the CLI, on oneTBB) passes one of
// these for the passes over a whole file that would otherwise be serial.

#include <cstddef>
#include <functional>

namespace brevis::codec {

/// The body of a loop over [0, count), called on disjoint ranges
/// [begin, end) that together cover it, possibly at once on several threads.
using range_body = std::function<void(size_t begin, size_t end)>;

/// Runs body over [0, count) in ranges, in any order, and returns when every
/// range is done. Empty: the loop runs serially on the calling thread.
using parallel_ranges = std::function<void(size_t count, range_body const&)>;

/// body over [0, count): through `parallel` if set, else as one range.
inline void for_ranges(parallel_ranges const& parallel, size_t count,
                       range_body const& body) {
  if (count == 0) return;
  if (parallel) {
    parallel(count, body);
  } else {
    body(0, count);
  }
}

}  // namespace brevis::codec
