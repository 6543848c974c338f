#pragma once
// Each class's histogram of a field of 16-bit elements, and of the bits
// below it, in one pass over a tensor in place: the counts the classes
// candidate (classes_candidate.h) costs its leaves and builds their tables
// from. The pass is most of the candidate's work on the bf16/fp16 corpus
// (blazepose-heavy.bf16: 8% of compress -T1's instructions).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace brevis::codec::search {

// Two copies of the counts, alternate elements each, the first summed
// after the pass: exponents repeat, and an increment of the counter the
// previous element wrote waits for it.
struct field_counts {
  std::vector<uint32_t> classes;   // 2 x k x (mask + 1); the first summed
  std::vector<uint32_t> mantissa;  // 2 x k x 2^shift; the first summed
};

/// Counts of the `rows` x `cols` 16-bit little-endian elements at `w`
/// (2 rows cols bytes, unaligned), each of class map[row] (`by_rows`) or
/// map[column] (of `k` classes; map's entries < k, its size rows or cols):
/// class c's counts of the field (element >> shift) & mask at c (mask + 1)
/// in `classes`, and where `mantissa`, of the bits below it at c 2^shift
/// in `mantissa` (else that vector empty). The field is bf16's sign and
/// exponent (shift 7, mask 0x1FF) or fp16's high byte (8, 0xFF): the only
/// two handled (others: errc::domain). In buffers the thread reuses, valid
/// until its next call.
field_counts& class_field_counts(uint8_t const* w, size_t rows, size_t cols,
                                 bool by_rows, std::span<uint8_t const> map,
                                 unsigned k, unsigned shift, unsigned mask,
                                 bool mantissa);

}  // namespace brevis::codec::search
