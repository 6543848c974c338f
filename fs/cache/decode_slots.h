#pragma once
// At most a fixed number of chunk decodes at once (one per core). The
// prefetcher's threads and the FUSE threads that decode the chunk their
// read needs all take a slot: with the kernel's readahead a sequential
// stream has several reads in flight, and a decode per FUSE thread on top
// of the prefetcher's ran up to 9 decodes on 2 cores, starving the threads
// that send replies. Readers go before background decodes. Thread-safe.

#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace brevis::fs {

class decode_slots {
 public:
  /// `slots` 0: one per core.
  explicit decode_slots(unsigned slots);
  decode_slots(decode_slots const&) = delete;
  decode_slots& operator=(decode_slots const&) = delete;

  /// Holds a slot for its lifetime.
  class slot {
   public:
    slot(decode_slots& s, bool reader);
    ~slot();
    slot(slot const&) = delete;
    slot& operator=(slot const&) = delete;

   private:
    decode_slots& s_;
  };

  unsigned size() const { return slots_; }
  /// The most slots ever held at once (tests).
  unsigned peak() const;

 private:
  unsigned const slots_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  unsigned busy_ = 0, peak_ = 0;
  size_t readers_waiting_ = 0;
};

}  // namespace brevis::fs
