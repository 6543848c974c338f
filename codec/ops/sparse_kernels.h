#pragma once
// The sparse operator's kernels. Decode: nonzero values placed back where
// the mask has a bit set, zeros elsewhere. Encode: the reverse, the mask and
// the nonzero values packed together. Per element each is a load, a select
// and a store; vectorized, 8 elements share one mask byte and one shuffle
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

/// Extra lanes of room `compact` needs in `values` past the nonzero ones.
inline constexpr size_t compact_slack = 8;

/// Writes the mask of the `count` lanes of `width` bytes (1, 2, 4 or 8) at
/// `in` to `mask` ((count + 7) / 8 bytes: bit j set where lane j is not all
/// zero bits, the bits past count clear) and the nonzero lanes, in order,
/// to `values`, which has room for k + compact_slack lanes, where k (the
/// return value) is the number of nonzero lanes. The lanes past the k
/// values are unspecified.
size_t compact(unsigned width, uint8_t const* in, size_t count, uint8_t* mask,
               uint8_t* values);

/// Caps the vector code expand and compact may use: 0 portable, 1 (the default)
/// the shuffles where the CPU has them. For tests, which check both.
void set_cap(unsigned level);

}  // namespace brevis::codec::sparse_kernels
