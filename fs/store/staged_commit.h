#pragma once
// The store's side of compressing one staged file (FORMAT.md S.4), driven
// chunk by chunk by the compression pipeline (fs/pipeline/compress_graph.h):
// payloads are appended to a pack as they arrive, in file order, with no
// transaction open, and synced in steps behind the appends (pack_syncer.h);
// commit() then syncs the rest of the pack and puts every record in one
// short write transaction. Metadata writers (create, rename, setattr)
// go on meanwhile: only the append lock is held for the whole job.
//
// Dedup looks payloads up in the committed index; one that is gone by the
// commit (its last file was removed meanwhile) is recorded again where its
// bytes still are, or, if they no longer read back, fails the commit with
// store_errc::io, and the job is tried again later.
//
// add_chunk() must be called in file order from one thread at a time;
// read_back() may run concurrently with it.

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codec/container/archive.h"
#include "fs/store/records.h"
#include "fs/store/store.h"

namespace brevis::fs {

class staged_commit {
 public:
  /// Takes the append lock and picks the pack. Throws not_found when `ino`
  /// is not a staged regular file with a link.
  staged_commit(store& s, uint64_t ino);
  /// Cuts off what was appended unless a commit was tried (see pack_append).
  ~staged_commit();
  staged_commit(staged_commit const&) = delete;
  staged_commit& operator=(staged_commit const&) = delete;

  /// Where a chunk's payload is.
  struct placement {
    detail::payload_key key;
    uint64_t pack = 0, offset = 0, length = 0;
    bool written = false;  // appended by this job (else already stored)
  };
  /// Records chunk `e` with its encoded payload (ignored for a ref chunk,
  /// which shares its source's payload). Chunks come in file order.
  placement add_chunk(codec::chunk_entry const& e, uint64_t program_hash,
                      codec::byte_view payload);
  /// Reads a payload this job appended back from its pack, checking the
  /// record's framing and key. Thread-safe.
  void read_back(placement const& p, codec::bytes& out) const;

  struct file_info {
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    uint64_t checksum = 0;  // XXH3-64 of the whole file
    /// The programs the chunks name: (hash, serialized bytes).
    std::vector<std::pair<uint64_t, codec::bytes>> programs;
    /// Asked last thing before the commit; true throws cancelled.
    std::function<bool()> cancelled;
    /// Kept in the store's ring of recent jobs when set.
    std::optional<job_record> job;
  };
  /// Syncs the pack and commits the chunks, payloads, programs, pack and
  /// the inode (now compressed) in one transaction. Errors: not_found (the
  /// inode is gone or no longer staged), cancelled, io (a shared payload
  /// vanished: try again), no_space.
  add_result commit(file_info const& f);

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace brevis::fs
