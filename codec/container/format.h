#pragma once
// Constants of the .brv layout (FORMAT.md, 3 and 7). Changing any of them is
// a format change: bump the version and log it in FORMAT.md.

#include <array>
#include <cstddef>
#include <cstdint>

namespace brevis::codec::brv {

/// First bytes of an archive. The non-ASCII first byte catches 7-bit
/// transfers and tells the file from text, as PNG's signature does.
inline constexpr std::array<uint8_t, 4> magic = {0x89, 'B', 'R', 'V'};
/// Last bytes of an archive: a missing end magic means a cut-short file.
inline constexpr std::array<uint8_t, 8> end_magic = {0x89, 'B', 'R', 'V',
                                                     'I',  'D', 'X', 0x0A};

inline constexpr uint8_t version_major = 1;
inline constexpr uint8_t version_minor = 4;

inline constexpr size_t header_size = 16;
inline constexpr size_t trailer_size = 32;

/// Header flag bits (FORMAT.md, 3.1); the other bits are reserved.
/// Index_Zstd: the stored index is one zstd frame holding the index.
inline constexpr uint16_t header_flag_index_zstd = 0x0001;
/// Choice_Records: the index ends with how each region's program was chosen
/// (FORMAT.md, 3.3.4); format 1.1.
inline constexpr uint16_t header_flag_choice_records = 0x0002;
inline constexpr uint16_t known_header_flags =
    header_flag_index_zstd | header_flag_choice_records;
/// A compressed index may expand at most this much (plus 64 KiB).
inline constexpr uint64_t max_index_expansion = 64;

/// Chunk entry flag bits (FORMAT.md, 3.3.3); the other bits are reserved.
inline constexpr uint8_t chunk_flag_ref = 0x01;
/// In_Program: the chunk's bytes are a slice of its region's `literal`
/// program blob; no program, payload or checksum is stored (FORMAT.md 3.3.3).
inline constexpr uint8_t chunk_flag_in_program = 0x02;

// Decoder limits (FORMAT.md, 7).
inline constexpr uint64_t max_index_length = 1ull << 30;
inline constexpr uint64_t max_regions = 1u << 24;
inline constexpr uint64_t max_programs = 1u << 16;
inline constexpr uint64_t max_program_length = 2u << 20;
inline constexpr uint64_t max_name_length = 4096;
inline constexpr uint64_t max_rank = 32;
/// Smallest encodings, which bound counts by the index length.
inline constexpr uint64_t min_region_entry = 6;
inline constexpr uint64_t min_program_entry = 5;
inline constexpr uint64_t min_chunk_entry = 3;

}  // namespace brevis::codec::brv
