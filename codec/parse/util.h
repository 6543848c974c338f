#pragma once
// Helpers shared by the region parsers (internal to codec/parse).

#include <cstdint>
#include <string>
#include <vector>

#include "codec/parse/region.h"

namespace brevis::codec::parse_detail {

/// a * b, or throws errc::corrupt naming `what` on 64-bit overflow.
uint64_t checked_mul(uint64_t a, uint64_t b, char const* what);
/// a + b, or throws errc::corrupt naming `what` on 64-bit overflow.
uint64_t checked_add(uint64_t a, uint64_t b, char const* what);

/// Product of the dimensions; throws errc::corrupt on overflow.
uint64_t element_count(std::vector<uint64_t> const& shape);

/// Sorts `regions` by offset, drops empty ones, rejects any that overlap or
/// reach past `size` (errc::corrupt), and fills the gaps with opaque regions
/// named `gap_name`. The result covers [0, size).
std::vector<region> fill_gaps(std::vector<region> regions, uint64_t size,
                              std::string const& gap_name);

region opaque_region(uint64_t offset, uint64_t length, std::string name);

/// Joins each stretch of adjacent opaque regions into one, named by its
/// parts joined with " + ". A zip's data descriptor, the next entry's local
/// header and its padding are one run of bytes: coded as one region, it
/// pays one chunk's framing and checksum instead of two or three.
std::vector<region> merge_opaque(std::vector<region> regions);

}  // namespace brevis::codec::parse_detail
