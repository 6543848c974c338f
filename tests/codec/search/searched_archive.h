#pragma once
// A file archived with the search chooser and read back: what the tests of
// the closed form and the search assert their choices on.

#include <cstddef>

#include "codec/container/archive.h"
#include "codec/search/search_chooser.h"

namespace brevis::codec::testing {

/// `file` archived with make_search_chooser(options) in chunks of
/// options.search.chunk_size bytes, opened, and read back whole
/// (`reads_back`: byte-exact). Not movable: the reader points into the
/// archive.
struct searched_archive {
  explicit searched_archive(bytes const& file,
                            search_chooser_options options = {})
      : archive(write_archive(file, "m", *make_search_chooser(options),
                              options.search.chunk_size)),
        reader(byte_view(archive)) {
    bytes back(reader.original_size());
    reader.read(0, back.size(), back.data());
    reads_back = back == file;
  }
  searched_archive(searched_archive const&) = delete;
  searched_archive& operator=(searched_archive const&) = delete;

  /// What region `i` takes in the archive: its program's blobs and its
  /// chunks' payloads (the estimates the choosers report are of this).
  size_t region_bytes(size_t i) const {
    size_t b = blob_bytes(reader.programs()[reader.regions()[i].program]);
    for (chunk_entry const& c : reader.chunks()) {
      if (c.region == i) b += c.payload_length;
    }
    return b;
  }

  bytes const archive;
  archive_reader const reader;
  bool reads_back = false;

 private:
  static size_t blob_bytes(node const& n) {
    size_t b = n.blob.size();
    for (node const& k : n.children) b += blob_bytes(k);
    return b;
  }
};

}  // namespace brevis::codec::testing
