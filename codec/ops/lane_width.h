#pragma once
// Helpers shared by the operators: dispatch a width known only at run time to
// a template on the lane type (so inner loops are compiled per width, with no
// per-element branching), and common checks of node shapes and sizes.

#include <cstdint>
#include <string>

#include "codec/core/error.h"
#include "codec/dsl/program.h"
#include "codec/dsl/types.h"

namespace brevis::codec::lanes {

/// Calls f.template operator()<T>() with T the unsigned lane type of `width`.
template <typename F>
decltype(auto) with_lane(unsigned width, F&& f) {
  switch (width) {
    case 1:
      return f.template operator()<uint8_t>();
    case 2:
      return f.template operator()<uint16_t>();
    case 4:
      return f.template operator()<uint32_t>();
    case 8:
      return f.template operator()<uint64_t>();
  }
  fail(errc::bad_program, "lane width " + std::to_string(width));
}

/// Narrowest lane width (1, 2, 4 or 8 bytes) holding `bits` bits (1..64).
inline uint8_t narrowest_width(unsigned bits) {
  return bits <= 8 ? 1 : bits <= 16 ? 2 : bits <= 32 ? 4 : 8;
}

/// Mask of the low `bits` bits (0..64) of a 64-bit word.
inline uint64_t low_mask(unsigned bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

/// Rejects a node whose blob is set or whose parameter count differs.
inline void expect_params(node const& n, size_t count, char const* what) {
  fail_if(n.params.size() != count || !n.blob.empty(), errc::bad_program, what);
}

inline void expect_valid_width(value_type in) {
  fail_if(!valid_width(in.width), errc::bad_program, "invalid lane width");
}

/// Number of elements in an output of `out_size` bytes; throws errc::corrupt
/// when the size is not a whole number of elements.
inline size_t element_count(size_t out_size, value_type in) {
  fail_if(!valid_width(in.width), errc::bad_program, "invalid lane width");
  fail_if(out_size % in.width != 0, errc::corrupt,
          "output size is not a whole number of elements");
  return out_size / in.width;
}

}  // namespace brevis::codec::lanes
