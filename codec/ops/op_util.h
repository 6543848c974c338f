#pragma once
// Helpers shared by the element-wise operators of codec/ops: dispatch a lane
// width known only at run time to a template on the lane type (inner loops are
// compiled per width, with no per-element branching) and the common checks of
// node shapes and sizes.

#include <cstdint>
#include <string>

#include "codec/core/error.h"
#include "codec/dsl/program.h"
#include "codec/dsl/types.h"

namespace brevis::codec::op_util {

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

/// Rejects a node whose blob is set or whose parameter count differs.
inline void expect_params(node const& n, size_t count, char const* what) {
  fail_if(n.params.size() != count || !n.blob.empty(), errc::bad_program, what);
}

inline void expect_valid_width(value_type in) {
  fail_if(!valid_width(in.width), errc::bad_program, "invalid lane width");
}

/// Number of elements in a value of `size` bytes; throws errc::corrupt when
/// the size is not a whole number of elements.
inline size_t element_count(size_t size, value_type in) {
  expect_valid_width(in);
  fail_if(size % in.width != 0, errc::corrupt,
          "value size is not a whole number of elements");
  return size / in.width;
}

/// Checks that a child handed to decode has the size child_sizes gave it
/// (the interpreter guarantees it; direct callers might not).
inline void expect_size(stream const& child, size_t size) {
  fail_if(child.data.size() != size, errc::corrupt,
          "child value has the wrong size");
}

/// A stream of `size` bytes of type `t`, ready to be filled.
inline stream make_stream(size_t size, value_type t) {
  stream s;
  s.type = t;
  s.data.resize(size);
  return s;
}

inline constexpr value_type uint_type(uint8_t width) {
  return {width, meaning::uint};
}

}  // namespace brevis::codec::op_util
