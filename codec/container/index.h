#pragma once
// The archive index (FORMAT.md, 3.3): region, program and chunk tables.
// decode_index validates everything against the header and the archive's
// geometry, so an index that parses never points outside the archive.

#include <cstdint>
#include <vector>

#include "codec/container/archive.h"

namespace brevis::codec::brv {

struct archive_index {
  uint64_t original_size = 0;
  uint64_t original_checksum = 0;
  std::vector<region_entry> regions;
  std::vector<node> programs;
  std::vector<chunk_entry> chunks;
};

/// Serializes the index. Chunk offsets, payload offsets and region offsets
/// are implicit in the format and not written.
bytes encode_index(archive_index const& index);
/// The stored form of a plain (uncompressed) index: varint(plain length)
/// then one zstd frame. encode_index uses it; tests use it to forge indexes.
bytes compress_index(byte_view plain);

/// Parses and validates an index whose payload area holds
/// `payload_area` bytes, for an archive of chunk size `chunk_size`. Fills in
/// the implicit offsets. Throws errc::corrupt, errc::limit, errc::truncated,
/// errc::reserved_nonzero or errc::bad_program.
archive_index decode_index(byte_view data, uint32_t chunk_size,
                           uint64_t payload_area);

}  // namespace brevis::codec::brv
