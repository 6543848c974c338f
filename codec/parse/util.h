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

}  // namespace brevis::codec::parse_detail
