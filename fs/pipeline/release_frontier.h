#pragma once
// Which bytes of the staged copy the compression pipeline may drop from
// its mapping, as chunks finish out of order. Dropping each chunk's pages
// as it finished cost a madvise per chunk, and each flushes the TLB of
// every CPU the daemon ran on (an IPI per call): 7% of the job's CPU on a
// 315 MB checkpoint (perf: smp_call_function_many_cond under do_madvise).
// Here the finished prefix of the file is dropped in runs of `batch`
// bytes; chunks finished past a slow one wait for it, unless they come to
// more than `max_ahead` bytes, then they are dropped one by one, so the
// mapping never holds more than about batch + max_ahead finished bytes.
// Thread-safe.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace brevis::fs {

class release_frontier {
 public:
  /// Bytes [begin, end) of the file.
  struct range {
    uint64_t begin = 0, end = 0;
    bool operator==(range const&) const = default;
  };

  /// `chunks` in file order, tiling the file.
  release_frontier(std::span<range const> chunks, uint64_t batch,
                   uint64_t max_ahead);

  /// Chunk `i` is done with its bytes (again: ignored). Returns the ranges
  /// to drop now, in file order; a range may take in chunks dropped on
  /// their own before (dropping twice is harmless).
  std::vector<range> done(size_t i);

  /// Bytes finished but not yet handed out for dropping (tests).
  uint64_t held() const;

 private:
  enum class state : uint8_t { pending, done, dropped };

  std::vector<range> chunks_;
  uint64_t const batch_, max_ahead_;
  mutable std::mutex mu_;
  std::vector<state> state_;
  size_t next_ = 0;          // the first chunk not done
  uint64_t dropped_to_ = 0;  // the prefix handed out for dropping ends here
  uint64_t ahead_ = 0;       // bytes of done chunks past next_, not dropped
};

}  // namespace brevis::fs
