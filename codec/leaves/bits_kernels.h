#pragma once
// Packing of b-bit unsigned values, LSB first (FORMAT.md, 4.8): value i
// holds bits [i b, (i + 1) b) of the payload, bit k of which is bit k % 8
// of byte k / 8. The `bits` leaf's kernels: a portable path for every width
// and b; AVX2, BMI2 (pdep/pext) and AVX-512 VBMI paths for values in 8-bit
// lanes (a bf16 mantissa under bitfields is 7 bits in a u8 lane), chosen at
// run time.

#include <cstddef>
#include <cstdint>

namespace brevis::codec::bits_kernels {

/// Payload bytes of `count` values of `bits` bits: ceil(count bits / 8),
/// without overflow for the count of any value in memory (count lanes of
/// ceil(bits / 8) bytes or more: the result is at most their size).
size_t packed_size(size_t count, unsigned bits) noexcept;

/// Packs `count` lanes of `width` bytes (1, 2, 4 or 8) into `bits`-bit
/// fields (1 <= bits <= 8 width) at `out`, packed_size(count, bits) bytes.
/// Returns false (the output is then unspecified) when a value does not
/// fit in `bits` bits.
bool pack(uint8_t const* in, unsigned width, size_t count, unsigned bits,
          uint8_t* out) noexcept;

/// The inverse: reads packed_size(count, bits) bytes at `in` into `count`
/// lanes of `width` bytes. Returns false (the output is then unspecified)
/// when the padding bits after the last value are not zero.
bool unpack(uint8_t const* in, size_t count, unsigned bits, unsigned width,
            uint8_t* out) noexcept;

/// Caps the kernels the CPU may use: 0 portable, 1 up to AVX2, 2 up to BMI2
/// (where pdep is fast), 3 up to AVX-512 VBMI (the default; each only where
/// the CPU has it). For tests, which check that every path gives the same.
void set_cap(unsigned limit) noexcept;

}  // namespace brevis::codec::bits_kernels
