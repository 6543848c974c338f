#pragma once
// Histograms of 16-bit symbols in sparse form: only the present symbols, in
// increasing order, with their counts. Choosing a program needs one for every
// 16-bit float tensor of a file, so this is on the compression path.

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

}  // namespace brevis::codec
