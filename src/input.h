#pragma once
// An input file's bytes, got the way its use makes cheapest (measured on the
// CLI's paravirtualized machine, Linux 6.18, page cache warm): mapping with
// MAP_POPULATE costs ~0.1 ms/MB of CPU, reading into a buffer on huge pages
// ~0.25 ms/MB (the kernel clears each page, then copies into it).
// stdin ("-"), pipes and other non-seekable files are always read in whole
// (an archive's index sits at its end, and compression parses the whole
// file first), as are files that report a size of 0 (/proc's) and stdin
// not at its start.
// Errors: load_input throws codec::error(errc::io) with the system's message.

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "codec/core/bytes.h"
#include "codec/core/huge_pages.h"
#include "src/mapped_file.h"

namespace brevis::cli {

/// How the caller reads a regular file.
enum class input_use {
  /// Some bytes, in any order (inspect: the index): mapped, each page read
  /// in at its first touch.
  map,
  /// Every byte, more than once (compress): mapped with every page mapped
  /// up front when it fits a quarter of memory, else mapped.
  whole,
  /// Every byte once, in pieces (decompress, verify): left open for
  /// read_at(); data() is empty. Memory stays bounded by the pieces.
  stream,
};

/// A descriptor closed when it dies (RAII, movable).
class file_descriptor {
 public:
  file_descriptor() = default;
  explicit file_descriptor(int fd) : fd_(fd) {}
  ~file_descriptor();
  file_descriptor(file_descriptor&& other) noexcept;
  file_descriptor& operator=(file_descriptor&& other) noexcept;
  file_descriptor(file_descriptor const&) = delete;
  file_descriptor& operator=(file_descriptor const&) = delete;
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

struct input {
  std::string path;  // "-" for stdin
  bool is_stdin = false;
  bool is_regular = false;
  struct stat st {};  // valid when is_regular
  mapped_file map;
  bool mapped = false;
  codec::page_buffer buffer;  // read in: size() bytes
  file_descriptor file;       // input_use::stream of a regular file
  /// A mapped file's, or one read in whole, for check_unchanged().
  file_descriptor source;

  codec::byte_view data() const {
    return mapped ? map.data() : codec::byte_view(buffer.data(), buffer.size());
  }
  /// Whether the bytes are to be read with read_at() (data() is empty).
  bool streams() const { return file.get() >= 0; }
};

/// The bytes of `path`, got for `use` (see input_use).
input load_input(std::string const& path, input_use use = input_use::map);

/// Throws codec::error(errc::io) if a mapped input's size or modification
/// time differ from when it was loaded: its pages are read live, so bytes
/// written meanwhile may have been read in part (an archive of them would
/// not match its own checksums). A regular file read in whole is checked
/// the same way against the end of its read; pipes cannot be.
void check_unchanged(input const& in);

/// Reads exactly `length` bytes at `offset` of a streamed input into `out`;
/// throws codec::error(errc::truncated) if the file ends before them.
/// Thread-safe (pread).
void read_at(input const& in, uint64_t offset, size_t length, uint8_t* out);

/// Throws codec::error(errc::io) unless `path` ("-" aside) names a regular
/// file itself, not a symlink, FIFO or device: --rm deletes nothing else,
/// and refuses before any output is written.
void check_removable(std::string const& path);

/// Deletes an input after its output was committed to a file (--rm; the
/// caller checks that). Nothing happens for stdin. Throws
/// codec::error(errc::io), deleting nothing, for an input that is not a
/// regular file or whose name now points to another file.
void remove_input(input const& in);

/// "dir/name.safetensors" -> "name.safetensors"; "-" stays "-".
std::string base_name(std::string const& path);

}  // namespace brevis::cli
