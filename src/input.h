#pragma once
// An input file's bytes: regular files are memory-mapped; stdin ("-"), pipes
// and other non-seekable files are read fully into memory (an archive's index
// sits at its end, and compression parses the whole file first).
// Errors: load_input throws codec::error(errc::io) with the system's message.

#include <sys/stat.h>

#include <string>

#include "codec/core/bytes.h"
#include "src/mapped_file.h"

namespace brevis::cli {

struct input {
  std::string path;  // "-" for stdin
  bool is_stdin = false;
  bool is_regular = false;
  struct stat st {};  // valid when is_regular
  mapped_file map;
  codec::bytes buffer;  // used when not mapped

  codec::byte_view data() const {
    return is_regular ? map.data() : codec::byte_view(buffer);
  }
};

/// The bytes of `path`. With `whole` the caller reads every byte (compress):
/// a mapped file is then read in when mapped, not a page fault at a time
/// (unless it is large against the machine's memory).
input load_input(std::string const& path, bool whole = false);

/// Deletes an input after its output was committed (--rm). Nothing happens
/// for stdin or when the output went to stdout. Throws codec::error(errc::io).
void remove_input(std::string const& path, std::string const& out_path);

/// "dir/name.safetensors" -> "name.safetensors"; "-" stays "-".
std::string base_name(std::string const& path);

}  // namespace brevis::cli
