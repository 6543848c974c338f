#include "fs/store/pack_syncer.h"

#include <algorithm>

#include "codec/core/thread_name.h"

namespace brevis::fs::detail {

pack_syncer::pack_syncer(pack_file& pack, uint64_t step)
    : pack_(pack), step_(step == 0 ? 1 : step) {}

pack_syncer::~pack_syncer() { stop(); }

void pack_syncer::appended(uint64_t end) {
  bool wake = false;
  {
    std::lock_guard lk(mu_);
    if (first_ == 0) first_ = end;
    appended_ = std::max(appended_, end);
    wake = appended_ >= std::max(synced_, first_) + step_;
    // The thread starts at the first step: a job that appends less (a
    // small file) never pays for one. Without a thread to spare, the
    // commit's own sync does all of it.
    if (wake && !stopping_ && !no_thread_ && !thread_.joinable()) {
      try {
        thread_ = std::thread([this] {
          codec::name_this_thread("brevis-packsync");
          run();
        });
      } catch (...) {  // system_error, or bad_alloc for its state
        no_thread_ = true;
        wake = false;
      }
    }
  }
  if (wake) cv_.notify_one();
}

void pack_syncer::finish() {
  stop();
  std::lock_guard lk(mu_);
  if (error_) std::rethrow_exception(error_);
}

uint64_t pack_syncer::synced() const {
  std::lock_guard lk(mu_);
  return synced_;
}

void pack_syncer::stop() {
  std::thread running;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    running = std::move(thread_);
  }
  cv_.notify_one();
  if (running.joinable()) running.join();
}

void pack_syncer::run() {
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [this] {
      return stopping_ || (first_ != 0 && !error_ &&
                           appended_ >= std::max(synced_, first_) + step_);
    });
    if (stopping_) return;
    uint64_t const target = appended_;
    lk.unlock();
    std::exception_ptr failed;
    try {
      pack_.sync();
    } catch (...) {
      failed = std::current_exception();
    }
    lk.lock();
    if (failed) {
      error_ = failed;  // no more syncs: finish() reports it
    } else {
      synced_ = target;
    }
  }
}

}  // namespace brevis::fs::detail
