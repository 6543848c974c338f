#pragma once
// The compression of one staged file (DESIGN 3.2), as a oneTBB flow graph:
//
//   parse regions ─ synthesize programs (parallel over tensors, hashing
//                    each one's chunks), then cut chunks
//   chunks ─ limiter ─ encode (parallel) ─ sequencer ─ append to the pack
//          (in file order, hashing the file) ─ verify (read back, decode,
//          compare XXH3) ─┘
//   then commit (fs/store/staged_commit.h).
//
// The whole-file stages read the staged copy through a mapping whose pages
// are dropped as they pile up, guarded (mapping_guard.h): a copy cut short
// behind the mount's back, or an I/O error under it, fails the job rather
// than the daemon. The chunk stages read each chunk into a reused buffer.
// So a 2 GB file costs the pipeline's memory limit, not 2 GB of resident
// memory: the limiter keeps at most memory_limit / (3 chunk sizes) chunks
// in flight (each holds a copy of its bytes, its payload and a decode
// buffer), and no more than four a thread.
//
// Node bodies never throw: the first error is kept, later nodes pass their
// messages on without work (so the limiter drains), and the outcome says
// what happened. The caller leaves the file staged on any error.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "codec/choose/chooser.h"
#include "codec/container/archive.h"
#include "fs/store/store.h"

namespace brevis::fs {

inline constexpr size_t default_pipeline_memory = 256u << 20;

struct compress_request {
  uint64_t ino = 0;
  std::string name;         // helps the parser pick a format; in the log
  std::string staged_path;  // the staged copy
  size_t memory_limit = default_pipeline_memory;
  /// Asked between chunks; true stops the job (outcome cancelled).
  std::function<bool()> cancelled;
};

struct compress_outcome {
  bool ok = false;
  store_errc code = store_errc::io;  // when !ok
  std::string error;                 // when !ok: what and why
  add_result result;
  double seconds = 0;  // start to commit
  // Of those: choosing the programs (map the copy, parse, synthesize, cut
  // chunks), then the chunks (wait for the store's append lock, encode,
  // append, verify); the commit is the rest.
  double choose_seconds = 0;
  double chunk_seconds = 0;
  // The process's CPU seconds (user + system, every thread) in those: a
  // phase's CPU below twice its time on 2 cores means idle cores.
  double choose_cpu_seconds = 0;
  double chunk_cpu_seconds = 0;
  // Chunks stored with the fallback program, and why (logged).
  codec::archive_writer::fallback_counts fallbacks;
};

/// Compresses the staged copy of `req.ino` into the store and marks the
/// inode compressed (the caller removes the copy). Never throws.
compress_outcome compress_staged_file(store& s,
                                      codec::program_chooser const& chooser,
                                      compress_request const& req) noexcept;

}  // namespace brevis::fs
