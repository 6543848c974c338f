#include "fs/cache/decode_slots.h"

#include <algorithm>
#include <thread>

namespace brevis::fs {

decode_slots::decode_slots(unsigned slots)
    : slots_(slots ? slots
                   : std::max(1u, std::thread::hardware_concurrency())) {}

decode_slots::slot::slot(decode_slots& s, bool reader) : s_(s) {
  std::unique_lock lk(s.mu_);
  if (reader) {
    ++s.readers_waiting_;
    s.cv_.wait(lk, [&] { return s.busy_ < s.slots_; });
    --s.readers_waiting_;
  } else {
    s.cv_.wait(lk,
               [&] { return s.busy_ < s.slots_ && s.readers_waiting_ == 0; });
  }
  ++s.busy_;
  s.peak_ = std::max(s.peak_, s.busy_);
}

decode_slots::slot::~slot() {
  {
    std::lock_guard lk(s_.mu_);
    --s_.busy_;
  }
  s_.cv_.notify_all();
}

unsigned decode_slots::peak() const {
  std::lock_guard lk(mu_);
  return peak_;
}

}  // namespace brevis::fs
