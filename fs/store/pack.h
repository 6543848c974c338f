#pragma once
// Pack files (FORMAT.md, S.2): a 16-byte header, then records, each a 32-byte
// header (magic, flags, payload length, XXH3-128 of the payload) and the
// payload. Records are only appended; the index says how far a pack is
// committed, and bytes past that are an interrupted append.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "codec/core/bytes.h"
#include "fs/store/records.h"

namespace brevis::fs::detail {

inline constexpr std::array<uint8_t, 4> pack_magic = {0x89, 'B', 'P', 'K'};
inline constexpr std::array<uint8_t, 4> record_magic = {0x89, 'B', 'R', 'C'};
inline constexpr uint8_t pack_version = 1;
inline constexpr uint64_t pack_header_size = 16;
inline constexpr uint64_t record_header_size = 32;
/// Largest payload a reader accepts (a chunk is at most 64 MiB; its payload
/// can exceed that only by the fallback's few bytes).
inline constexpr uint64_t max_record_payload = (64ull << 20) + 4096;

inline uint64_t record_size(uint64_t payload) {
  return record_header_size + payload;
}

std::string pack_name(uint64_t id);  // "0000002a.pack"

/// An open pack file descriptor (closed on destruction).
/// fsyncs the directory holding `path`, so a file created or renamed there
/// survives a crash. Throws store_error on failure.
void sync_parent_directory(std::string const& path);

class pack_file {
 public:
  /// Opens an existing pack (`create` false) or creates a new one with its
  /// header written. Throws store_error.
  pack_file(std::string path, bool create, bool writable);
  ~pack_file();
  pack_file(pack_file const&) = delete;
  pack_file& operator=(pack_file const&) = delete;

  uint64_t file_size() const;
  /// Writes a record at `offset`; returns the offset after it.
  uint64_t write_record(uint64_t offset, payload_key const& key,
                        codec::byte_view payload);
  void sync();
  /// Starts writing [from, to) back to the disk without waiting for it
  /// (sync_file_range), so that a later sync() has less left to wait for.
  /// Only a hint: failures are ignored (sync() reports them).
  void start_writeback(uint64_t from, uint64_t to);
  void truncate(uint64_t size);
  /// Reads and verifies the record at `offset`: its magic, that its length
  /// is `length`, and that the payload hashes to `key`. Throws
  /// store_error(corrupt) naming the pack and offset otherwise.
  codec::bytes read_record(uint64_t offset, payload_key const& key,
                           uint64_t length) const;
  /// Same, into `out` (resized to `length`; a reused buffer keeps its
  /// capacity, so no zeroing or page faults per record).
  void read_record(uint64_t offset, payload_key const& key, uint64_t length,
                   codec::bytes& out) const;
  /// The read path's read: the whole record in one pread into `buf`
  /// (grown as needed, never shrunk, so a reused buffer is neither zeroed
  /// nor faulted in again), its header checked as by read_record (magic,
  /// flags, length, key) but not the payload's hash; returns the payload,
  /// inside `buf`. The caller must check what it decodes to (the chunk's
  /// XXH3-64): a damaged payload then fails there, or in the decoder's
  /// validation, and fsck checks every payload's hash.
  codec::byte_view read_payload(uint64_t offset, payload_key const& key,
                                uint64_t length, codec::bytes& buf) const;
  /// Walks records from the header up to `end`, calling fn(offset, key,
  /// length, ok) for each (ok: payload hash matches). Returns the offset
  /// where the walk stopped (end, or the first unreadable header).
  uint64_t scan(uint64_t end,
                std::function<void(uint64_t, payload_key const&, uint64_t,
                                   bool)> const& fn) const;
  /// Deallocates the payload of the record at `offset`, which no payload
  /// names any more (FORMAT.md S.2.1): it reads as zeros, and the
  /// filesystem blocks inside it are free. Its header stays, so scans still
  /// step over it. Only if the header there is still that record's (magic,
  /// `length`, `key`). Needs a writable pack. Returns the payload's length,
  /// or 0 when the record is not there, spans no whole 4 KiB block, was
  /// punched already, or the filesystem cannot punch holes.
  uint64_t punch_record(uint64_t offset, payload_key const& key,
                        uint64_t length);
  /// The key and payload length in the record header at `offset`, or
  /// nullopt where no record header is (magic, flags, length limit).
  std::optional<std::pair<payload_key, uint64_t>> header_at(
      uint64_t offset) const;
  std::string const& path() const { return path_; }
  /// Whether the file has no name left (gc removed it): its space is freed
  /// only when the last descriptor closes.
  bool unlinked() const;

 private:
  void pread_all(uint64_t offset, size_t n, uint8_t* out) const;
  std::string path_;
  int fd_ = -1;
};

}  // namespace brevis::fs::detail
