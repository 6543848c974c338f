#pragma once
// Counting symbols for choosing programs: histograms of 16-bit symbols in
// sparse form (only the present symbols, in increasing order, with their
// counts) and distinct 32-bit values. Choosing needs them for every tensor
// of a file, so they are on the compression path.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "codec/core/bytes.h"

namespace brevis::codec {

/// Present symbols and their counts, in symbol order. Counts are 32-bit:
/// histograms are kept for every tensor of a file (fp16 ones have tens of
/// thousands of symbols), and 8 bytes an entry instead of 16 halves their
/// memory and the time to write and read them.
using sparse_histogram16 = std::vector<std::pair<uint32_t, uint32_t>>;

/// A count as a histogram entry holds it: saturated at 2^32 - 1. Past that
/// (inputs of over 4G lanes) the counts are estimates; every present symbol
/// still has a nonzero count, so tables built from them cover the data.
constexpr uint32_t entry_count(uint64_t c) {
  return c > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(c);
}

/// The histogram of the little-endian 16-bit lanes of `data` (a trailing odd
/// byte is ignored), its counts saturated (entry_count).
sparse_histogram16 histogram16(byte_view data);

/// The sum of the histograms `parts` into `out` (its memory reused), in
/// symbol order, its counts saturated (entry_count). Counted in the
/// thread's counters that histogram16 uses: no 2^16-entry buffer of its own
/// to page in (fresh memory costs 10-15 us a page on the AMD guest).
void sum_histograms16(std::span<sparse_histogram16 const* const> parts,
                      sparse_histogram16& out);

/// The number of distinct little-endian 32-bit lanes of `data` (a partial
/// trailing lane is ignored), or limit + 1 as soon as there are more than
/// `limit`.
size_t distinct32_up_to(byte_view data, size_t limit);

}  // namespace brevis::codec
