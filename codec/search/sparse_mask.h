#pragma once
// The histogram of the mask bytes the sparse operator writes for 16-bit
// elements, counted from the elements without encoding them: fitting a
// static table to the mask of a region's sparse program needs no values
// stream (their table comes from the region's histogram).

#include <array>
#include <cstddef>
#include <cstdint>

#include "codec/core/bytes.h"

namespace brevis::codec::search {

/// The byte histogram of sparse's masks (FORMAT.md 4.5, `sparse`) over the
/// 16-bit little-endian elements of `data` (a trailing odd byte ignored),
/// coded in pieces of `chunk_elements` elements each (the last one
/// shorter), each piece with its own mask.
std::array<uint64_t, 256> sparse_mask_histogram16(byte_view data,
                                                  size_t chunk_elements);

}  // namespace brevis::codec::search
