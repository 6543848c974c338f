#pragma once
// The two-field split and join of 16-bit lanes that bitfields runs for
// 16-bit floats (mantissa below, sign and exponent above, one in an 8-bit
// lane and the other in a 16-bit one): one pass each way, vectorized for
// AVX-512 or AVX2 where the CPU has them, chosen at run time.

#include <cstddef>
#include <cstdint>

namespace brevis::codec::bitfields_kernels {

/// Splits `count` 16-bit lanes of `in` into their `low_bits` low bits
/// (lanes of `low_width` bytes, 1 or 2, at `low`) and the rest (lanes of
/// `high_width` bytes at `high`). Each field must fit its lane.
void split16(uint8_t const* in, size_t count, unsigned low_bits,
             unsigned low_width, uint8_t* low, unsigned high_width,
             uint8_t* high);

/// The inverse: 16-bit lanes of `low` | `high` << low_bits into `out`.
/// Returns false (the output is then unspecified) when some value is wider
/// than its field.
bool join16(uint8_t const* low, unsigned low_width, uint8_t const* high,
            unsigned high_width, size_t count, unsigned low_bits, uint8_t* out);

/// Caps the vector code the kernels may use: 0 portable, 1 up to AVX2, 2
/// up to AVX-512 (the default; each only where the CPU has it). For tests,
/// which check that every path gives the same.
void set_cap(unsigned level);

}  // namespace brevis::codec::bitfields_kernels
