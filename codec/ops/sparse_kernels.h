#pragma once
// The sparse operator's decode: nonzero values placed back where the mask
// has a bit set, zeros elsewhere. Per element it is a load, a select and a
// store; vectorized, each mask byte places 8 elements with one shuffle
// (SSSE3 for 16-bit lanes, AVX2 for 32-bit ones), chosen at run time.

#include <cstddef>
#include <cstdint>

namespace brevis::codec::sparse_kernels {

/// Writes `count` lanes of `width` bytes (1, 2, 4 or 8) to `out`: lane j is
/// the next of the `k` values (in order) where bit j of `mask` is set, zero
/// where it is clear. The mask must set exactly k bits, none past count
/// (the caller checks; the vectorized paths read only values that exist).
void expand(unsigned width, uint8_t const* mask, uint8_t const* values,
            size_t k, size_t count, uint8_t* out);

/// Caps the vector code expand may use: 0 portable, 1 (the default) the
/// shuffles where the CPU has them. For tests, which check both.
void set_cap(unsigned level);

}  // namespace brevis::codec::sparse_kernels
