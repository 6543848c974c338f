#include "fs/store/records.h"

#include <xxhash.h>

#include "codec/container/archive.h"
#include "fs/store/error.h"

namespace brevis::fs::detail {
namespace {

void check_size(byte_view v, size_t want, char const* what) {
  if (v.size() != want) {
    store_fail(store_errc::bad_store,
               std::string("index: ") + what + " record has " +
                   std::to_string(v.size()) + " bytes, expected " +
                   std::to_string(want));
  }
}

}  // namespace

std::string payload_key::hex() const {
  static char const digits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

payload_key hash_payload(byte_view payload) noexcept {
  XXH128_hash_t h = XXH3_128bits(payload.data(), payload.size());
  payload_key k;
  auto hi = be64(h.high64), lo = be64(h.low64);
  std::memcpy(k.b.data(), hi.data(), 8);
  std::memcpy(k.b.data() + 8, lo.data(), 8);
  return k;
}

uint64_t hash64(byte_view data) noexcept {
  return XXH3_64bits(data.data(), data.size());
}

std::array<uint8_t, 8> be64(uint64_t v) {
  std::array<uint8_t, 8> a;
  for (int i = 0; i < 8; ++i) a[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  return a;
}

uint64_t read_be64(uint8_t const* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

uint64_t key_u64(byte_view key, size_t at) {
  if (at > key.size() || key.size() - at < 8) {  // no overflow at any `at`
    store_fail(
        store_errc::bad_store,
        "index: key of " + std::to_string(key.size()) + " bytes, too short");
  }
  return read_be64(key.data() + at);
}

uint64_t dirent_ino(byte_view v) {
  if (v.size() != 8) {
    store_fail(store_errc::bad_store, "index: bad directory entry");
  }
  return codec::load_le<uint64_t>(v.data());
}

bytes dirent_key(uint64_t parent, std::string_view name) {
  bytes k(8 + name.size());
  auto p = be64(parent);
  std::memcpy(k.data(), p.data(), 8);
  std::memcpy(k.data() + 8, name.data(), name.size());
  return k;
}

std::array<uint8_t, 16> chunk_key(uint64_t ino, uint64_t offset) {
  std::array<uint8_t, 16> k;
  auto a = be64(ino), b = be64(offset);
  std::memcpy(k.data(), a.data(), 8);
  std::memcpy(k.data() + 8, b.data(), 8);
  return k;
}

bytes encode(inode_rec const& r) {
  bytes v;
  v.reserve(inode_rec_size);
  codec::put_le(v, r.mode);
  codec::put_le(v, r.nlink);
  codec::put_le(v, r.uid);
  codec::put_le(v, r.gid);
  codec::put_le(v, r.size);
  codec::put_le(v, r.stored);
  codec::put_le(v, r.mtime_ns);
  codec::put_le(v, r.ctime_ns);
  codec::put_le(v, r.checksum);
  codec::put_le(v, r.chunk_count);
  codec::put_le(v, r.state);
  return v;
}

inode_rec decode_inode(byte_view v) {
  check_size(v, inode_rec_size, "inode");
  codec::byte_reader r(v);
  inode_rec x;
  x.mode = r.le<uint32_t>();
  x.nlink = r.le<uint32_t>();
  x.uid = r.le<uint32_t>();
  x.gid = r.le<uint32_t>();
  x.size = r.le<uint64_t>();
  x.stored = r.le<uint64_t>();
  x.mtime_ns = r.le<int64_t>();
  x.ctime_ns = r.le<int64_t>();
  x.checksum = r.le<uint64_t>();
  x.chunk_count = r.le<uint32_t>();
  x.state = r.le<uint32_t>();
  return x;
}

bytes encode(chunk_rec const& r) {
  bytes v;
  v.reserve(chunk_rec_size);
  codec::put_le(v, r.length);
  codec::put_le(v, uint32_t{0});  // reserved
  codec::put_le(v, r.program);
  codec::put_bytes(v, r.payload.b);
  codec::put_le(v, r.checksum);
  return v;
}

chunk_rec decode_chunk(byte_view v) {
  check_size(v, chunk_rec_size, "chunk");
  codec::byte_reader r(v);
  chunk_rec x;
  x.length = r.le<uint32_t>();
  if (r.le<uint32_t>() != 0) {
    store_fail(store_errc::bad_store, "index: chunk record reserved field");
  }
  // Checked here, before any reader sizes a buffer by it: a damaged length
  // made every read of the chunk allocate and zero up to 4 GiB.
  if (x.length == 0 || x.length > codec::max_chunk_size) {
    store_fail(store_errc::bad_store, "index: chunk record length " +
                                          std::to_string(x.length) +
                                          " outside 1 to 64 MiB");
  }
  x.program = r.le<uint64_t>();
  byte_view k = r.take(16);
  std::memcpy(x.payload.b.data(), k.data(), 16);
  x.checksum = r.le<uint64_t>();
  return x;
}

bytes encode(payload_rec const& r) {
  bytes v;
  v.reserve(payload_rec_size);
  codec::put_le(v, r.pack);
  codec::put_le(v, r.offset);
  codec::put_le(v, r.length);
  codec::put_le(v, r.refs);
  return v;
}

payload_rec decode_payload(byte_view v) {
  check_size(v, payload_rec_size, "payload");
  codec::byte_reader r(v);
  payload_rec x;
  x.pack = r.le<uint64_t>();
  x.offset = r.le<uint64_t>();
  x.length = r.le<uint64_t>();
  x.refs = r.le<uint64_t>();
  return x;
}

bytes encode(pack_rec const& r) {
  bytes v;
  codec::put_le(v, r.end);
  codec::put_le(v, r.live);
  return v;
}

pack_rec decode_pack(byte_view v) {
  check_size(v, pack_rec_size, "pack");
  codec::byte_reader r(v);
  pack_rec x;
  x.end = r.le<uint64_t>();
  x.live = r.le<uint64_t>();
  return x;
}

}  // namespace brevis::fs::detail
