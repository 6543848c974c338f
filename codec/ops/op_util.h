#pragma once
// Helpers shared by the operators of codec/ops: dispatch a lane width known
// only at run time to a template on the lane type (inner loops are compiled
// per width, with no per-element branching), the common checks of node
// shapes and sizes, and a base for the operators whose one child is as large
// as their output.

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codec/core/error.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "codec/dsl/scratch.h"
#include "codec/dsl/types.h"

namespace brevis::codec::op_util {

// --- Lanes ------------------------------------------------------------------

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

/// Calls f.template operator()<T, N>() with T the lane type of `width` and N
/// that of `narrow`, which must be no wider (a field of the lane, say).
template <typename F>
void with_lane_pair(unsigned width, unsigned narrow, F&& f) {
  with_lane(width, [&]<typename T>() {
    with_lane(narrow, [&]<typename N>() {
      if constexpr (sizeof(N) <= sizeof(T)) {
        f.template operator()<T, N>();
      } else {
        fail(errc::bad_program, "narrow lane wider than its input");
      }
    });
  });
}

/// Narrowest lane width (1, 2, 4 or 8 bytes) holding `bits` bits (1..64).
inline uint8_t narrowest_width(unsigned bits) {
  return bits <= 8 ? 1 : bits <= 16 ? 2 : bits <= 32 ? 4 : 8;
}

/// Mask of the low `bits` bits (0..64) of a 64-bit word.
inline uint64_t low_mask(unsigned bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

/// True when each of the `count` lanes of type N at `in` fits in `bits` bits.
/// Branch-free over the lanes: the decoder checks before it writes.
template <typename N>
bool lanes_fit(uint8_t const* in, size_t count, unsigned bits) {
  N const high = static_cast<N>(~low_mask(bits));
  N bad = 0;
  for (size_t j = 0; j < count; ++j) {
    bad = static_cast<N>(bad | (load_le<N>(in + j * sizeof(N)) & high));
  }
  return bad == 0;
}

inline constexpr value_type uint_type(uint8_t width) {
  return {width, meaning::uint};
}

/// A stream of `size` bytes of type `t`, from the thread's reused buffers:
/// its contents are unspecified, the operator writes every byte.
inline stream make_stream(size_t size, value_type t) {
  return stream{scratch::take(size), t};
}

// --- Checks -----------------------------------------------------------------

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

/// Checks that decode got one child per entry of `sizes`, each of that size:
/// the sizes child_sizes gave (the interpreter guarantees it; direct callers
/// might not).
inline void expect_children(std::span<value_view const> children,
                            std::vector<size_t> const& sizes,
                            std::string_view op) {
  bool ok = children.size() == sizes.size();
  for (size_t i = 0; ok && i < sizes.size(); ++i) {
    ok = children[i].data.size() == sizes[i];
  }
  if (!ok) {
    fail(errc::corrupt,
         std::string(op) + ": children do not match their sizes");
  }
}

// --- Pieces -----------------------------------------------------------------

/// Writes the children's bytes one after the other to `out` (the decode of
/// operators that cut their input into consecutive pieces).
inline void concat(std::span<value_view const> children, uint8_t* out) {
  for (value_view const& c : children) {
    if (!c.data.empty()) std::memcpy(out, c.data.data(), c.data.size());
    out += c.data.size();
  }
}

/// Base of the operators with one child exactly as large as their output
/// and no side data (delta, xor_prev, xor_row, map, transpose). They give
/// child_types and the lane loops; this does the sizes and the checks.
class same_size_op : public op_def {
 public:
  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const final {
    value_type const t = child_types(n, in.type)[0];
    size_t const count = element_count(in.data.size(), in.type);
    stream s = make_stream(in.data.size(), t);
    forward(n, in.type.width, in.data.data(), count, s.data.data());
    out.push_back(std::move(s));
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const final {
    child_types(n, in);
    element_count(out_size, in);
    return {out_size};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const final {
    child_types(n, in);
    size_t const count = element_count(out_size, in);
    expect_children(children, {out_size}, name());
    inverse(n, in.width, children[0].data.data(), count, out);
  }

 protected:
  /// Transforms `count` lanes of `width` bytes (a valid width) from `in`
  /// to `out`, which do not overlap.
  virtual void forward(node const& n, unsigned width, uint8_t const* in,
                       size_t count, uint8_t* out) const = 0;
  /// Undoes forward.
  virtual void inverse(node const& n, unsigned width, uint8_t const* in,
                       size_t count, uint8_t* out) const = 0;
};

}  // namespace brevis::codec::op_util
