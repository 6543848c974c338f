#pragma once
// Re-segmenting untyped regions where their statistics change. A program is
// chosen per region and applied per chunk; a raw dump that concatenates
// tensors of different statistics (8-bit quantized layers, each with its own
// values) codes each chunk with one table for a mix. Cut where the byte
// distribution changes, each part gets its own program and chunks.

#include <cstdint>
#include <vector>

#include "codec/core/bytes.h"

namespace brevis::codec::search {

/// Offsets (increasing, inside (0, data.size())) where the byte statistics
/// of `data` change; parts are at least `min_part` bytes.
std::vector<uint64_t> statistics_cuts(byte_view data,
                                      size_t min_part = 64u << 10);

}  // namespace brevis::codec::search
