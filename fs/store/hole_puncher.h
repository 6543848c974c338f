#pragma once
// Deferred deallocation of dead pack records (FORMAT.md S.2.1). A record
// whose payload no file names any more is punched out of its pack `delay`
// after its last file went, on a thread of its own, so that removing a file
// gives its space back without gc. The delay lets a read that looked the
// record up just before (a prefetch queued for a file then rewritten)
// finish with the bytes it expects.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "fs/store/records.h"

namespace brevis::fs::detail {

struct dead_record {
  uint64_t pack = 0;
  uint64_t offset = 0;
  uint64_t length = 0;  // of the payload
  payload_key key;
};

class hole_puncher {
 public:
  /// punch(batch) deallocates what it can of the batch, and returns how
  /// many records (from the front) it handled: fewer when it cannot go on
  /// now (another writer holds the packs), and the rest is tried again a
  /// moment later.
  using punch_fn = std::function<size_t(std::span<dead_record const>)>;
  hole_puncher(std::chrono::milliseconds delay, punch_fn punch);
  /// Punches everything still queued at once (the owner is done reading),
  /// unless the packs are busy, then stops.
  ~hole_puncher();
  hole_puncher(hole_puncher const&) = delete;
  hole_puncher& operator=(hole_puncher const&) = delete;
  hole_puncher(hole_puncher&&) = delete;
  hole_puncher& operator=(hole_puncher&&) = delete;

  /// Queues records that died in a committed transaction.
  void add(std::vector<dead_record> const& records);

 private:
  using clock = std::chrono::steady_clock;
  struct queued {
    clock::time_point due;
    dead_record record;
  };
  void run();

  std::chrono::milliseconds const delay_;
  punch_fn const punch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<queued> queue_;  // in order of due
  bool stopping_ = false;
  std::thread thread_;  // started by the first add
};

}  // namespace brevis::fs::detail
