#pragma once
// The .brv archive (FORMAT.md): a header, chunk payloads, an index (regions,
// programs, chunks) and a trailer that locates the index. Writing streams
// chunks in order, so the output can be a pipe; reading needs random access
// to the archive and decodes only the chunks a byte range covers.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codec/choose/chooser.h"
#include "codec/core/bytes.h"
#include "codec/core/error.h"
#include "codec/dsl/program.h"
#include "codec/parse/region.h"

namespace brevis::codec {

inline constexpr uint32_t default_chunk_size = 1u << 20;
inline constexpr uint32_t min_chunk_size = 4096;
inline constexpr uint32_t max_chunk_size = 64u << 20;

/// One chunk in the index: a contiguous piece of one region.
struct chunk_entry {
  uint64_t offset = 0;          // in the original file
  uint32_t length = 0;          // original bytes
  uint32_t region = 0;          // index into the region table
  uint32_t program = 0;         // index into the program table
  bool is_ref = false;          // a copy of earlier original bytes
  bool in_program = false;      // a slice of its region's literal blob
  uint64_t ref_offset = 0;      // when is_ref: where the copy comes from
  uint64_t payload_offset = 0;  // in the archive
  uint64_t payload_length = 0;
  uint64_t checksum = 0;  // XXH3-64 of the original bytes
};

struct region_entry {
  region info;
  uint32_t program = 0;  // the program chosen for the region
  // How the chooser found it, when it kept a record (optional in the index).
  std::optional<choice_record> how;
};

/// What the writer records per chunk, for inspect and tests.
struct encoded_chunk {
  size_t index = 0;
  bytes payload;
  uint32_t program = 0;
};

/// Builds an archive of one file held in memory (or mapped).
/// Use: construct (parses regions), choose_program(r) for every region (may
/// run in parallel), plan_chunks(), then header(), encode(i) for every chunk
/// (parallel), append(...) each encoded chunk in order, finish().
/// Errors: throws codec::error; encode() never fails on any input bytes.
class archive_writer {
 public:
  archive_writer(byte_view file, std::string_view name,
                 program_chooser const& chooser,
                 uint32_t chunk_size = default_chunk_size);
  /// Same, with regions the caller already has (they must cover the file
  /// exactly, in order; throws errc::corrupt otherwise).
  archive_writer(byte_view file, std::vector<region> regions,
                 program_chooser const& chooser,
                 uint32_t chunk_size = default_chunk_size);

  /// When on (the default), encode() decodes every payload it produces and
  /// falls back to fallback_program() unless the bytes come back exactly,
  /// so a faulty operator can never make an unreadable archive. Off, encoding
  /// costs about half as much; every chunk's XXH3 is in the index either way,
  /// so reading the archive still detects a fault.
  void set_verify(bool on) { verify_ = on; }
  /// When off, the choice records keep 0 for the time spent choosing: the
  /// one field of an archive that depends on the machine, not on the input
  /// and the options (with a search bounded by expansions alone). Default on.
  void set_record_times(bool on) { record_times_ = on; }
  /// Payloads encode() has decoded back so far (for -v and tests).
  size_t verified_chunks() const {
    return verified_.load(std::memory_order_relaxed);
  }
  /// Chunks encode() stored with fallback_program() because their own
  /// program failed them, by why (for -v, warnings and the mount's log).
  struct fallback_counts {
    /// The program cannot code the chunk's values (errc::domain), or its
    /// decoding would pass the decoder's budget (errc::limit).
    size_t refused = 0;
    /// An operator failed otherwise, or the payload decoded back to other
    /// bytes (set_verify): a fault in brevis, which the fallback contained.
    size_t faulted = 0;
    std::string first_fault;  // what the first faulted chunk said
  };
  fallback_counts fallbacks() const;
  /// Whether a program's failure to encode a chunk with `code` is a refusal
  /// (fallback_counts::refused) rather than a fault.
  static bool is_refusal(errc code) {
    return code == errc::domain || code == errc::limit;
  }

  /// What the file's chooser learned (program_chooser::summary), or "".
  std::string chooser_summary() const {
    return file_chooser_ ? file_chooser_->summary() : chooser_.summary();
  }

  size_t region_count() const { return regions_.size(); }
  std::span<region_entry const> regions() const { return regions_; }
  /// Chooses region r's program, and hashes the chunks it will cut the
  /// region into (in parallel when the calls are). Thread-safe for distinct
  /// r.
  void choose_program(size_t r);
  /// choose_program(r) from a copy of the region's bytes (`bytes`, its
  /// length; else throws errc::corrupt), as encode(i, in). Where the chooser
  /// has a chooser of the file (program_chooser::for_file) the file's own
  /// bytes are used.
  void choose_program(size_t r, byte_view bytes);
  /// Whether plan_chunks also hashes the whole file (a serial pass).
  enum class file_hash { skip, compute };
  /// Cuts regions into chunks (element aligned) and finds repeated chunks.
  /// Call after every choose_program.
  void plan_chunks(file_hash whole_file = file_hash::skip);
  size_t chunk_count() const { return chunks_.size(); }
  /// The program table (after plan_chunks; [0] is fallback_program()) and
  /// the planned chunks, for writers other than .brv (the store).
  std::span<node const> programs() const { return programs_; }
  std::span<chunk_entry const> chunks() const { return chunks_; }
  /// XXH3-64 of the whole file, which plan_chunks(file_hash::compute)
  /// hashes along with the chunks (none otherwise).
  std::optional<uint64_t> file_checksum() const { return whole_checksum_; }

  /// The archive header bytes (write first).
  bytes header() const;
  /// Encodes chunk i. Thread-safe. Falls back to fallback_program() when the
  /// region's program cannot encode the chunk or would expand it.
  encoded_chunk encode(size_t i) const;
  /// encode(i) from a copy of the chunk's bytes (`in`, its length; else
  /// throws errc::corrupt): a caller that reads them into a reused buffer
  /// spares mapping the file's pages again.
  encoded_chunk encode(size_t i, byte_view in) const;
  /// Records chunk i's payload placement; call in chunk order. Returns the
  /// bytes to write after the previous ones.
  byte_view append(encoded_chunk const& c);
  /// Optional, once c's bytes are written: hands its payload buffer back
  /// to this thread for a later encode() (the next chunk's payload then
  /// needs no fresh memory).
  static void recycle(encoded_chunk&& c);
  /// Index and trailer bytes (write last).
  bytes finish();

 private:
  bool try_encode(size_t chunk, uint32_t program, byte_view in,
                  bytes& payload) const;
  void note_fault(size_t chunk, uint32_t program, std::string_view what) const;

  byte_view file_;
  program_chooser const& chooser_;
  std::unique_ptr<program_chooser> file_chooser_;  // chooser_.for_file(...)
  uint32_t chunk_size_;
  bool verify_ = true;
  bool record_times_ = true;
  mutable std::atomic<size_t> verified_{0};
  mutable std::atomic<size_t> refused_{0};
  mutable std::mutex fault_mu_;
  mutable size_t faulted_ = 0;       // under fault_mu_
  mutable std::string first_fault_;  // under fault_mu_
  std::vector<region_entry> regions_;
  std::vector<node> chosen_;    // per region, from choose_program
  std::vector<node> programs_;  // programs_[0] is fallback_program()
  std::vector<chunk_entry> chunks_;
  // Per region, the checksums of its chunks, cut `step` bytes apart (0:
  // not hashed yet).
  struct region_sums {
    uint32_t step = 0;
    std::vector<uint64_t> of;
  };
  uint32_t region_chunk_step(size_t r) const;
  void hash_chunks(size_t r, byte_view bytes);  // bytes: region r's
  std::vector<region_sums> chunk_sums_;
  std::vector<bool> in_program_region_;     // per region, from plan_chunks
  std::optional<uint64_t> whole_checksum_;  // XXH3 of file_, by plan_chunks
  uint64_t written_ = 0;                    // payload bytes appended so far
  size_t appended_ = 0;                     // chunks appended so far
};

/// Chooses every region's program, plans the chunks and encodes them in
/// order, all on this thread: the whole archive `w` writes.
bytes write_all(archive_writer& w);

/// Writes a whole archive of `file` in memory, serially (tests, small files).
bytes write_archive(byte_view file, std::string_view name,
                    program_chooser const& chooser,
                    uint32_t chunk_size = default_chunk_size);

/// Reads any byte range of an archive's original file.
/// Errors: throws codec::error naming the problem (bad magic, unsupported
/// version, truncated, corrupt index, checksum mismatch, limits).
class archive_reader {
 public:
  /// Reads `length` bytes at `offset` of the archive into `out`; throws
  /// codec::error(errc::truncated or errc::io) when it cannot.
  using read_fn =
      std::function<void(uint64_t offset, size_t length, uint8_t* out)>;

  /// Opens an archive of `archive_size` bytes: reads the header, the trailer
  /// and the index, and validates them (without decoding payloads).
  /// `read_at` must be thread-safe if the reader is used from many threads.
  archive_reader(read_fn read_at, uint64_t archive_size);
  /// Opens an archive held in memory; `archive` must outlive the reader.
  explicit archive_reader(byte_view archive);

  uint64_t original_size() const { return original_size_; }
  uint64_t original_checksum() const { return original_checksum_; }
  uint32_t chunk_size() const { return chunk_size_; }
  std::span<region_entry const> regions() const { return regions_; }
  std::span<node const> programs() const { return programs_; }
  std::span<chunk_entry const> chunks() const { return chunks_; }

  /// Decodes chunk i into out (chunks()[i].length bytes) and checks its
  /// XXH3. Thread-safe.
  void decode_chunk(size_t i, uint8_t* out) const;
  /// Decodes original bytes [offset, offset + length) into out, decoding
  /// only the chunks that cover them; a read of the whole file also checks
  /// the file's XXH3. Throws errc::corrupt for a range past the end.
  /// Thread-safe.
  void read(uint64_t offset, size_t length, uint8_t* out) const;
  /// Indices [first, last) of the chunks covering a range.
  std::pair<size_t, size_t> chunks_covering(uint64_t offset,
                                            uint64_t length) const;

 private:
  void decode_stored(chunk_entry const& c, uint8_t* out) const;

  read_fn read_at_;
  byte_view memory_;  // the whole archive, when it is held in memory
  uint64_t original_size_ = 0;
  uint64_t original_checksum_ = 0;
  uint32_t chunk_size_ = 0;
  std::vector<region_entry> regions_;
  std::vector<node> programs_;
  std::vector<chunk_entry> chunks_;
};

}  // namespace brevis::codec
