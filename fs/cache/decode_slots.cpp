#include "fs/cache/decode_slots.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace brevis::fs {

decode_slots::decode_slots(unsigned slots)
    : slots_(slots ? slots
                   : std::max(1u, std::thread::hardware_concurrency())) {
  // Room for every pool: a slot's destructor gives its pool back without
  // allocating.
  idle_pools_.reserve(slots_ + 1);
  for (unsigned i = 0; i < slots_ + 1; ++i) {
    pools_.push_back(std::make_unique<codec::scratch::pool>());
    idle_pools_.push_back(i);
  }
}

decode_slots::slot::slot(decode_slots& s, bool reader) : s_(s) {
  std::unique_lock lk(s.mu_);
  // A slot let go wakes one waiter (notify_one). Waits re-check every
  // 100 ms all the same: glibc before 2.41 can lose a pthread_cond_signal
  // (sourceware BZ 25847; Debian 12 ships 2.36), and a lost wake-up here
  // would hang a READ.
  auto const wait = [&](std::condition_variable& cv, auto ready) {
    while (!cv.wait_for(lk, std::chrono::milliseconds(100), ready)) {
    }
  };
  if (reader) {
    ++s.readers_waiting_;
    wait(s.readers_cv_, [&] { return s.busy_ < s.slots_ + 1; });
    --s.readers_waiting_;
  } else {
    ++s.background_waiting_;
    wait(s.background_cv_,
         [&] { return s.busy_ < s.slots_ && s.readers_waiting_ == 0; });
    --s.background_waiting_;
  }
  ++s.busy_;
  s.peak_ = std::max(s.peak_, s.busy_);
  pool_ = s.idle_pools_.back();  // one per slot: one is idle
  s.idle_pools_.pop_back();
  // A slot still free with no reader left waiting (several were let go
  // while readers held the waiters back): pass it on.
  if (s.busy_ < s.slots_ && s.readers_waiting_ == 0 &&
      s.background_waiting_ != 0) {
    s.background_cv_.notify_one();
  }
  lk.unlock();
  scope_.emplace(*s.pools_[pool_]);
}

decode_slots::slot::~slot() {
  scope_.reset();
  std::lock_guard lk(s_.mu_);
  s_.idle_pools_.push_back(pool_);
  --s_.busy_;
  // Notified under the lock: a waiter counted here is inside wait().
  if (s_.readers_waiting_ != 0) {
    s_.readers_cv_.notify_one();
  } else if (s_.background_waiting_ != 0 && s_.busy_ < s_.slots_) {
    s_.background_cv_.notify_one();
  }
}

unsigned decode_slots::peak() const {
  std::lock_guard lk(mu_);
  return peak_;
}

size_t decode_slots::waiting() const {
  std::lock_guard lk(mu_);
  return readers_waiting_ + background_waiting_;
}

}  // namespace brevis::fs
