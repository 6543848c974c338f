#pragma once
// Cheap statistics of a value (measured on its sample) that decide which
// productions apply and which context of the prior a decision falls in.

#include <array>
#include <cstdint>

#include "codec/dsl/types.h"

namespace brevis::codec::search {

struct value_stats {
  std::array<uint32_t, 256> byte_counts{};  // histogram of the bytes
  size_t count = 0;                         // elements
  double byte_entropy = 8;  // order-0 entropy of the bytes, bits per byte
  double zero_rate = 0;     // fraction of zero elements
  double repeat_rate = 0;   // fraction of elements equal to their predecessor
  size_t distinct = 0;      // distinct elements, capped at 257
  unsigned low_zero = 0;    // low bits zero in every element (max 8w - 1)
  unsigned high_zero = 0;   // high bits zero in every element
  uint64_t period = 0;      // smallest period (whole values only), or 0
  // repeated_words of the sample (the region's bytes and elements only)
  double word_repeats = 0;
  bool constant = false;  // every element equal (count > 0)
};

/// With `bytes` false the byte histogram, its entropy and (for bytes) the
/// distinct count are left unset: the caller knows them from the whole
/// value's histogram.
value_stats measure(stream const& v, bool bytes = true);

/// Histogram of the bytes of `d` (fewer than 2^32 of them).
void byte_histogram(byte_view d, std::array<uint32_t, 256>& out);

/// Refines `s` with what must hold for the whole value, not only its sample:
/// the zero low and high bits, constancy and, when `period` (only the
/// region's elements may repeat), the period. One cheap pass.
void measure_whole(byte_view whole, unsigned width, value_stats& s,
                   bool period = true);

/// Fraction of the 8-byte words of `d` (at a stride of 8) that repeat an
/// earlier one: what an LZ coder could find.
double repeated_words(byte_view d);

/// Buckets of the prior's context.
unsigned entropy_bucket(value_stats const& s);  // 0..3
unsigned zero_bucket(value_stats const& s);     // 0..2

}  // namespace brevis::codec::search
