#pragma once
// Decoded chunks of compressed files for the mount's read path (DESIGN 3.3):
// a sharded LRU with a memory budget, so that 128 KiB FUSE reads decode each
// chunk once. Keys carry a generation the mount bumps whenever a file's
// bytes may change (staged again, compressed anew, dropped), so a replaced
// file never serves stale bytes even if an entry outlives invalidate().
//
// get_or_load() also joins concurrent loads of one key: a read that
// arrives while the prefetcher decodes its chunk waits for that decode
// instead of doing it again. The prefetcher reserves the chunks it queues,
// so a read that needs one before its turn decodes it at once (and the
// queued job then has nothing to do), and one decoded meanwhile is joined.
// Thread-safe.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fs/cache/chunk_bytes.h"

namespace brevis::fs {

struct chunk_id {
  uint64_t ino = 0;
  uint64_t gen = 0;     // the file's generation when it was decoded
  uint64_t offset = 0;  // of the chunk in the file
  bool operator==(chunk_id const&) const = default;
};

class chunk_cache {
  struct load_state;
  struct shard;

 public:
  using chunk = std::shared_ptr<chunk_bytes const>;
  using loader = std::function<chunk()>;

  /// A load promised ahead of time (a queued prefetch). Whoever comes first
  /// runs it: run(), or a get_or_load() of its id. Destroyed without
  /// either, it is withdrawn: nothing waits on it, later gets load anew.
  class reservation {
   public:
    reservation(chunk_cache& cache, chunk_id id,
                std::shared_ptr<load_state> state);
    ~reservation();
    reservation(reservation const&) = delete;
    reservation& operator=(reservation const&) = delete;
    /// Runs load() unless a reader has taken the load over.
    void run(loader const& load);

   private:
    chunk_cache& cache_;
    chunk_id id_;
    std::shared_ptr<load_state> state_;
  };

  /// `budget` bytes of decoded chunks in all, counted by their buffers'
  /// capacities (0: nothing kept, loads are
  /// still joined); `shards` 0 picks one per 16 MiB of budget, 1..16.
  explicit chunk_cache(size_t budget, unsigned shards = 0);
  chunk_cache(chunk_cache const&) = delete;
  chunk_cache& operator=(chunk_cache const&) = delete;

  /// The cached chunk, or null.
  chunk find(chunk_id const& id);
  /// The cached chunk, else the one a concurrent load of `id` produces,
  /// else load() (its exceptions reach every waiter; nothing is kept).
  chunk get_or_load(chunk_id const& id, loader const& load);
  /// Reserves the load of `id`; null when it is cached or being loaded.
  std::shared_ptr<reservation> reserve(chunk_id const& id);
  /// Keeps `c` (evicting the least recently used of its shard); a chunk
  /// larger than a shard's budget is not kept.
  void insert(chunk_id const& id, chunk c);
  /// Whether `id` is cached, reserved or being loaded.
  bool present(chunk_id const& id);
  /// Drops every entry of `ino`, whatever its generation.
  void invalidate(uint64_t ino);
  /// Drops `id` if cached (a sequential reader has left it behind).
  void erase(chunk_id const& id);

  size_t budget() const { return budget_; }
  size_t bytes() const;
  size_t entries() const;
  struct counters {
    uint64_t hits = 0, misses = 0, joined = 0, evictions = 0;
  };
  counters stats() const;

 private:
  struct hasher {
    size_t operator()(chunk_id const& k) const {
      uint64_t h = k.ino * 0x9E3779B97F4A7C15ull;
      h ^= (k.offset + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2));
      h ^= (k.gen * 0xC2B2AE3D27D4EB4Full) + (h << 6) + (h >> 2);
      return static_cast<size_t>(h ^ (h >> 31));
    }
  };
  struct entry {
    chunk_id id;
    chunk data;
  };
  // A load under way or reserved. Its future gives the chunk, the load's
  // exception, or null when a reservation was withdrawn (load anew).
  struct load_state {
    std::promise<chunk> promise;
    std::shared_future<chunk> future = promise.get_future().share();
    bool taken = false;  // someone runs the load (the shard's mu)
  };
  struct shard {
    mutable std::mutex mu;
    std::list<entry> lru;  // front: most recent
    std::unordered_map<chunk_id, std::list<entry>::iterator, hasher> map;
    std::unordered_map<chunk_id, std::shared_ptr<load_state>, hasher> loading;
    size_t bytes = 0;
    counters stats;
  };
  shard& shard_of(chunk_id const& id);
  void insert_locked(shard& s, chunk_id const& id, chunk c);
  /// Runs the load `st` (taken by this thread) and publishes its result.
  chunk run_load(shard& s, chunk_id const& id,
                 std::shared_ptr<load_state> const& st, loader const& load);

  size_t budget_;
  size_t shard_budget_;
  std::vector<std::unique_ptr<shard>> shards_;
};

/// A few threads running background jobs (the prefetcher's decodes); a job
/// offered when `max_queued` are waiting is dropped, since prefetching is
/// only ever a guess. stop() finishes the running jobs and drops the rest.
class background_jobs {
 public:
  background_jobs(unsigned threads, size_t max_queued);
  ~background_jobs();
  background_jobs(background_jobs const&) = delete;
  background_jobs& operator=(background_jobs const&) = delete;

  /// Returns false when the job was dropped (queue full or stopped).
  bool offer(std::function<void()> job);
  void stop();
  /// Waits until nothing is queued or running (tests).
  void drain();

 private:
  void run();

  size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::function<void()>> jobs_;
  unsigned running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace brevis::fs
