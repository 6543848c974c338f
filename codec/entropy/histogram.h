#pragma once
// Counting symbols for choosing programs: histograms of 16-bit symbols in
// sparse form (only the present symbols, in increasing order, with their
// counts) and distinct 32-bit values. Choosing needs them for every tensor
// of a file, so they are on the compression path.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "codec/core/bytes.h"

namespace brevis::codec {

/// Present symbols and their counts, in symbol order.
using sparse_histogram16 = std::vector<std::pair<uint32_t, uint64_t>>;

/// The histogram of the little-endian 16-bit lanes of `data` (a trailing odd
/// byte is ignored).
sparse_histogram16 histogram16(byte_view data);

/// The number of distinct little-endian 32-bit lanes of `data` (a partial
/// trailing lane is ignored), or limit + 1 as soon as there are more than
/// `limit`.
size_t distinct32_up_to(byte_view data, size_t limit);

}  // namespace brevis::codec
