#include "fs/store/pack.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fs/store/error.h"
#include "fs/store/read_at.h"

namespace brevis::fs::detail {

std::string pack_name(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08llx.pack",
                static_cast<unsigned long long>(id));
  return buf;
}

void sync_parent_directory(std::string const& path) {
  std::string const dir = path.find('/') == std::string::npos
                              ? "."
                              : path.substr(0, path.rfind('/'));
  int const fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) store_fail_errno(errno, "open " + dir);
  int const rc = ::fsync(fd);
  int const e = errno;
  ::close(fd);
  if (rc != 0) store_fail_errno(e, "fsync " + dir);
}

pack_file::pack_file(std::string path, bool create, bool writable)
    : path_(std::move(path)) {
  int flags = O_CLOEXEC | (writable ? O_RDWR : O_RDONLY);
  if (create) flags |= O_CREAT | O_EXCL;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  fd_ = ::open(path_.c_str(), flags | O_NOFOLLOW, 0600);
  if (fd_ < 0) {
    int e = errno;
    if (e == ENOENT)
      store_fail(store_errc::not_found, path_ + ": no such pack");
    store_fail_errno(e, "open " + path_);
  }
  if (create) {
    uint8_t h[pack_header_size] = {};
    std::memcpy(h, pack_magic.data(), 4);
    h[4] = pack_version;
    ssize_t n = ::pwrite(fd_, h, sizeof h, 0);
    if (n != static_cast<ssize_t>(sizeof h)) {
      int e = n < 0 ? errno : ENOSPC;
      ::close(fd_);
      ::unlink(path_.c_str());
      fd_ = -1;
      store_fail_errno(e, "write " + path_);
    }
    // A commit may name this pack as soon as its records are synced: make the
    // file and its directory entry durable now, so a crash after that commit
    // never leaves the index pointing at a pack that vanished.
    sync();
    sync_parent_directory(path_);
  }
}

pack_file::~pack_file() {
  if (fd_ >= 0) ::close(fd_);
}

bool pack_file::unlinked() const {
  struct stat st {};
  return ::fstat(fd_, &st) == 0 && st.st_nlink == 0;
}

uint64_t pack_file::file_size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) store_fail_errno(errno, "stat " + path_);
  return static_cast<uint64_t>(st.st_size);
}

uint64_t pack_file::write_record(uint64_t offset, payload_key const& key,
                                 codec::byte_view payload) {
  uint8_t h[record_header_size] = {};
  std::memcpy(h, record_magic.data(), 4);
  codec::store_le<uint64_t>(h + 8, payload.size());
  std::memcpy(h + 16, key.b.data(), 16);
  iovec iov[2] = {{h, sizeof h},
                  {const_cast<uint8_t*>(payload.data()), payload.size()}};
  uint64_t const total = sizeof h + payload.size();
  uint64_t done = 0;
  while (done < total) {
    // Rebuild the iovec past what was written (short writes are rare).
    iovec v[2];
    int n = 0;
    uint64_t skip = done;
    for (auto const& x : iov) {
      if (skip >= x.iov_len) {
        skip -= x.iov_len;
        continue;
      }
      v[n].iov_base = static_cast<uint8_t*>(x.iov_base) + skip;
      v[n].iov_len = x.iov_len - skip;
      skip = 0;
      ++n;
    }
    ssize_t w = ::pwritev(fd_, v, n, static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      store_fail_errno(errno, "write " + path_);
    }
    if (w == 0) store_fail_errno(ENOSPC, "write " + path_);
    done += static_cast<uint64_t>(w);
  }
  return offset + total;
}

void pack_file::sync() {
  if (::fdatasync(fd_) != 0) store_fail_errno(errno, "fsync " + path_);
}

void pack_file::start_writeback(uint64_t from, uint64_t to) {
  if (to > from) {
    ::sync_file_range(fd_, static_cast<off_t>(from),
                      static_cast<off_t>(to - from), SYNC_FILE_RANGE_WRITE);
  }
}

void pack_file::truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    store_fail_errno(errno, "truncate " + path_);
  }
}

void pack_file::pread_all(uint64_t offset, size_t n, uint8_t* out) const {
  if (read_at(fd_, offset, n, out, path_) < n) {
    store_fail(store_errc::corrupt, path_ + ": record at " +
                                        std::to_string(offset) +
                                        " is cut short (pack truncated?)");
  }
}

codec::bytes pack_file::read_record(uint64_t offset, payload_key const& key,
                                    uint64_t length) const {
  codec::bytes out;
  read_record(offset, key, length, out);
  return out;
}

void pack_file::read_record(uint64_t offset, payload_key const& key,
                            uint64_t length, codec::bytes& out) const {
  auto bad = [&](char const* why) {
    store_fail(store_errc::corrupt, path_ + ": record at offset " +
                                        std::to_string(offset) + ": " + why);
  };
  if (length > max_record_payload) bad("payload larger than the limit");
  uint8_t h[record_header_size];
  pread_all(offset, sizeof h, h);
  if (std::memcmp(h, record_magic.data(), 4) != 0) bad("bad magic");
  if (codec::load_le<uint32_t>(h + 4) != 0) bad("reserved flags");
  if (codec::load_le<uint64_t>(h + 8) != length) bad("wrong length");
  if (std::memcmp(h + 16, key.b.data(), 16) != 0) bad("wrong key");
  // Only after the header agreed on the length.
  out.resize(length);
  pread_all(offset + record_header_size, length, out.data());
  if (!(hash_payload(out) == key)) bad("payload checksum mismatch");
}

uint64_t pack_file::punch_record(uint64_t offset, payload_key const& key,
                                 uint64_t length) {
  std::array<uint8_t, record_header_size> h{};
  if (length > max_record_payload ||
      read_at(fd_, offset, h.size(), h.data(), path_) < h.size() ||
      std::memcmp(h.data(), record_magic.data(), 4) != 0 ||
      codec::load_le<uint64_t>(h.data() + 8) != length ||
      std::memcmp(h.data() + 16, key.b.data(), 16) != 0) {
    return 0;
  }
  // The whole payload: the filesystem frees the blocks inside it and
  // zeroes the partial ones at its ends (st_blksize, the preferred I/O
  // size, can be far larger than the allocation unit).
  uint64_t const from = offset + record_header_size;
  uint64_t const to = offset + record_size(length);
  if (to <= from) return 0;
  // Nothing to free in a record that spans no whole block (of 4 KiB, the
  // least filesystems allocate), nor in one punched already (gc walks
  // every dead record): its whole blocks are a hole.
  constexpr uint64_t block = 4096;
  uint64_t const first = (from + block - 1) / block * block;
  uint64_t const last = to / block * block;
  if (last <= first) return 0;
  off_t const data = ::lseek(fd_, static_cast<off_t>(first), SEEK_DATA);
  if ((data < 0 && errno == ENXIO) ||
      (data >= 0 && static_cast<uint64_t>(data) >= last)) {
    return 0;
  }
  if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  static_cast<off_t>(from),
                  static_cast<off_t>(to - from)) != 0) {
    return 0;  // EOPNOTSUPP and the like: gc reclaims it instead
  }
  return to - from;
}

std::optional<std::pair<payload_key, uint64_t>> pack_file::header_at(
    uint64_t offset) const {
  std::array<uint8_t, record_header_size> h{};
  if (read_at(fd_, offset, h.size(), h.data(), path_) < h.size() ||
      std::memcmp(h.data(), record_magic.data(), 4) != 0 ||
      codec::load_le<uint32_t>(h.data() + 4) != 0) {
    return std::nullopt;
  }
  auto const length = codec::load_le<uint64_t>(h.data() + 8);
  if (length > max_record_payload) return std::nullopt;
  payload_key key;
  std::memcpy(key.b.data(), h.data() + 16, 16);
  return std::make_pair(key, length);
}

codec::byte_view pack_file::read_payload(uint64_t offset,
                                         payload_key const& key,
                                         uint64_t length,
                                         codec::bytes& buf) const {
  auto bad = [&](char const* why) {
    store_fail(store_errc::corrupt, path_ + ": record at offset " +
                                        std::to_string(offset) + ": " + why);
  };
  if (length > max_record_payload) bad("payload larger than the limit");
  size_t const total = static_cast<size_t>(record_size(length));
  if (buf.size() < total) buf.resize(total);
  pread_all(offset, total, buf.data());
  uint8_t const* h = buf.data();
  if (std::memcmp(h, record_magic.data(), 4) != 0) bad("bad magic");
  if (codec::load_le<uint32_t>(h + 4) != 0) bad("reserved flags");
  if (codec::load_le<uint64_t>(h + 8) != length) bad("wrong length");
  if (std::memcmp(h + 16, key.b.data(), 16) != 0) bad("wrong key");
  return codec::byte_view(buf.data() + record_header_size,
                          static_cast<size_t>(length));
}

uint64_t pack_file::scan(uint64_t end,
                         std::function<void(uint64_t, payload_key const&,
                                            uint64_t, bool)> const& fn) const {
  uint64_t const size = file_size();
  end = std::min(end, size);
  uint8_t ph[pack_header_size];
  if (end < pack_header_size) return 0;
  pread_all(0, sizeof ph, ph);
  if (std::memcmp(ph, pack_magic.data(), 4) != 0 || ph[4] != pack_version) {
    return 0;
  }
  uint64_t pos = pack_header_size;
  codec::bytes payload;
  while (pos + record_header_size <= end) {
    uint8_t h[record_header_size];
    pread_all(pos, sizeof h, h);
    uint64_t const len = codec::load_le<uint64_t>(h + 8);
    if (std::memcmp(h, record_magic.data(), 4) != 0 ||
        codec::load_le<uint32_t>(h + 4) != 0 || len > max_record_payload ||
        len > end - pos - record_header_size) {
      return pos;
    }
    payload_key key;
    std::memcpy(key.b.data(), h + 16, 16);
    payload.resize(len);
    pread_all(pos + record_header_size, len, payload.data());
    fn(pos, key, len, hash_payload(payload) == key);
    pos += record_header_size + len;
  }
  return pos;
}

}  // namespace brevis::fs::detail
