#pragma once
// At most a fixed number of chunk decodes at once (one per core), and one
// more for a reader. The prefetcher's threads and the FUSE threads that
// decode the chunk their read needs all take a slot: with the kernel's
// readahead a sequential stream has several reads in flight, and a decode
// per FUSE thread on top of the prefetcher's ran up to 9 decodes on 2
// cores, starving the threads that send replies. Readers go before
// background decodes, and the extra slot is theirs alone: with the
// prefetcher holding every core's slot, a READ whose chunk nobody was
// decoding waited for one of those decodes to end, while the other core
// often sat idle, its threads queued behind the busy one (a cold read of
// the 315 MB checkpoint on 2 cores: 244 waits for a slot, both cores busy
// 0.82 of the read; with the reader's slot 98 waits and 0.87, medians of 12
// alternated reads). A slot let go wakes one waiter, a reader if any:
// waking them all (a broadcast per decode) ran every waiting FUSE thread
// and prefetch thread through the scheduler to find one slot, on 2 cores,
// with 8 READs in flight.
// Each slot lends the decode run under it a pool of the codec's scratch
// buffers: the value buffers of chunk decodes are kept per slot, not per
// thread that ever decoded one (ten FUSE threads, two prefetchers).
// Thread-safe.

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "codec/dsl/scratch.h"

namespace brevis::fs {

class decode_slots {
 public:
  /// `slots` background decodes at once (0: one per core); readers may
  /// hold one slot more.
  explicit decode_slots(unsigned slots);
  decode_slots(decode_slots const&) = delete;
  decode_slots& operator=(decode_slots const&) = delete;

  /// Holds a slot, and its scratch pool on this thread, for its lifetime.
  class slot {
   public:
    slot(decode_slots& s, bool reader);
    ~slot();
    slot(slot const&) = delete;
    slot& operator=(slot const&) = delete;

   private:
    decode_slots& s_;
    unsigned pool_ = 0;
    std::optional<codec::scratch::pool_scope> scope_;
  };

  /// The background decodes allowed at once (readers: one more).
  unsigned size() const { return slots_; }
  /// The most slots ever held at once (tests).
  unsigned peak() const;
  /// Threads waiting for a slot now (tests).
  size_t waiting() const;

 private:
  unsigned const slots_;
  mutable std::mutex mu_;
  std::condition_variable readers_cv_, background_cv_;
  unsigned busy_ = 0, peak_ = 0;
  std::vector<std::unique_ptr<codec::scratch::pool>> pools_;
  std::vector<unsigned> idle_pools_;  // of pools_, not held by a slot
  size_t readers_waiting_ = 0, background_waiting_ = 0;
};

}  // namespace brevis::fs
