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
  // Whether the index ends with the regions' choice records (header flag
  // Choice_Records); regions without one have region_entry::how empty.
  bool choice_records = false;
};

/// `r` cut to what a region entry may hold (FORMAT.md 3.3.2): its name to
/// max_name_length bytes, ending before a UTF-8 character that would not
/// fit whole, and its shape dropped when of rank above max_rank (a file's
/// tensor names and shapes have no such limits). Regions are descriptive:
/// decoding needs neither.
void fit_region_entry(region& r);

/// Serializes the index. Chunk offsets, payload offsets and region offsets
/// are implicit in the format and not written.
bytes encode_index(archive_index const& index);

/// Parses and validates an index whose payload area holds
/// `payload_area` bytes, for an archive of chunk size `chunk_size`. Fills in
/// the implicit offsets. Throws errc::corrupt, errc::limit, errc::truncated,
/// errc::reserved_nonzero or errc::bad_program.
archive_index decode_index(byte_view data, uint32_t chunk_size,
                           uint64_t payload_area, bool choice_records = false);

/// The index as stored with header flag Index_Zstd: one zstd frame, at a
/// level that depends on how much the index weighs against the archive's
/// `payload_bytes`.
bytes pack_index(byte_view index, uint64_t payload_bytes);
/// The index from its stored form (a zstd frame); throws errc::limit when
/// it would exceed max_index_length or max_index_expansion times the stored
/// size plus 64 KiB, errc::corrupt when it is not exactly one whole frame.
bytes unpack_index(byte_view stored);

}  // namespace brevis::codec::brv
