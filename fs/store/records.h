#pragma once
// Key and value layouts of the store's LMDB databases (FORMAT.md, S.3).
// Keys are big-endian so LMDB's byte order is numeric order; values are
// fixed-size little-endian records. Decoders check sizes and throw
// store_error(bad_store) on a record of the wrong size.

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "codec/core/bytes.h"

namespace brevis::fs::detail {

using codec::byte_view;
using codec::bytes;

inline byte_view as_bytes_view(std::string_view s) {
  return codec::as_bytes(s);
}

/// XXH3-128 of a payload: its identity in `payloads` and in its pack record.
struct payload_key {
  std::array<uint8_t, 16> b{};
  friend bool operator==(payload_key const&, payload_key const&) = default;
  std::string hex() const;
};
struct payload_key_hash {
  size_t operator()(payload_key const& k) const noexcept {
    uint64_t v;
    std::memcpy(&v, k.b.data(), 8);
    return v;
  }
};
payload_key hash_payload(byte_view payload) noexcept;
uint64_t hash64(byte_view data) noexcept;

std::array<uint8_t, 8> be64(uint64_t v);
uint64_t read_be64(uint8_t const* p);
/// The big-endian u64 at byte `at` of an index key; a key too short for it
/// is a damaged index (store_errc::bad_store), never read past its end.
uint64_t key_u64(byte_view key, size_t at = 0);
/// The inode a directory entry's value names (u64 little-endian); a value
/// of another size is a damaged index (bad_store).
uint64_t dirent_ino(byte_view v);

inline std::array<uint8_t, 8> inode_key(uint64_t ino) { return be64(ino); }
bytes dirent_key(uint64_t parent, std::string_view name);
std::array<uint8_t, 16> chunk_key(uint64_t ino, uint64_t offset);
inline std::array<uint8_t, 8> program_key(uint64_t h) { return be64(h); }
inline std::array<uint8_t, 8> pack_key(uint64_t id) { return be64(id); }

enum class file_state_v : uint32_t { compressed = 1, staged = 2 };

struct inode_rec {
  uint32_t mode = 0;
  uint32_t nlink = 1;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  uint64_t stored = 0;  // bytes of the payloads it names, each once
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t checksum = 0;  // XXH3-64 of the whole file
  uint32_t chunk_count = 0;
  uint32_t state = 1;
};
inline constexpr size_t inode_rec_size = 64;
bytes encode(inode_rec const& r);
inode_rec decode_inode(byte_view v);

struct chunk_rec {
  uint32_t length = 0;   // original bytes
  uint64_t program = 0;  // key in `programs`
  payload_key payload;
  uint64_t checksum = 0;  // XXH3-64 of the original bytes
};
inline constexpr size_t chunk_rec_size = 40;
bytes encode(chunk_rec const& r);
chunk_rec decode_chunk(byte_view v);

struct payload_rec {
  uint64_t pack = 0;
  uint64_t offset = 0;  // of the record header in the pack
  uint64_t length = 0;  // payload bytes
  uint64_t refs = 0;
};
inline constexpr size_t payload_rec_size = 32;
bytes encode(payload_rec const& r);
payload_rec decode_payload(byte_view v);

struct pack_rec {
  uint64_t end = 0;   // bytes of the pack that are committed
  uint64_t live = 0;  // bytes of records still referenced (with headers)
};
inline constexpr size_t pack_rec_size = 16;
bytes encode(pack_rec const& r);
pack_rec decode_pack(byte_view v);

}  // namespace brevis::fs::detail
