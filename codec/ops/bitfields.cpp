// bitfields(b0, b1, ...): elems<uW> -> one stream per bit field, field 0 the
// b0 least significant bits, the widths summing to exactly 8W. Each field
// goes to the narrowest lane that holds it (meaning uint). Splits integer and
// quantized formats whose fields have different statistics (a 4-bit scale
// beside a 12-bit value, say). The decoder rejects field values that do not
// fit their bits. No side data.
#include <vector>

#include "codec/core/target_clones.h"
#include "codec/dsl/operator.h"
#include "codec/ops/bitfields_kernels.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

template <typename T, typename N>
void extract(uint8_t const* in, size_t count, unsigned shift, unsigned bits,
             uint8_t* out) {
  T const mask = static_cast<T>(op_util::low_mask(bits));
  for (size_t j = 0; j < count; ++j) {
    T const v = load_le<T>(in + j * sizeof(T));
    store_le<N>(out + j * sizeof(N), static_cast<N>((v >> shift) & mask));
  }
}

// ORs field values into the output; the first field stores instead. Runs
// at every decoded chunk: an AVX2 clone (chosen at load time) does twice
// the lanes of the portable SSE2 build. Returns false when some value is
// wider than its field (clones must not throw: GCC 12 then terminates).
template <typename T, typename N>
BREVIS_AVX2_CLONES bool insert(uint8_t const* in, size_t count, unsigned shift,
                               unsigned bits, bool first, uint8_t* out) {
  if (!op_util::lanes_fit<N>(in, count, bits)) return false;
  for (size_t j = 0; j < count; ++j) {
    T const v = static_cast<T>(T{load_le<N>(in + j * sizeof(N))} << shift);
    T const prev = first ? T{0} : load_le<T>(out + j * sizeof(T));
    store_le<T>(out + j * sizeof(T), static_cast<T>(prev | v));
  }
  return true;
}

// Two fields of 16-bit lanes: what 16-bit floats split into (the kernels).
bool two_fields_of_16(node const& n, value_type in) {
  return in.width == 2 && n.params.size() == 2;
}

class bitfields_op final : public op_def {
 public:
  opcode code() const override { return opcode::bitfields; }
  std::string_view name() const override { return "bitfields"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_valid_width(in);
    fail_if(n.params.empty() || !n.blob.empty(), errc::bad_program,
            "bitfields takes the field widths as parameters");
    std::vector<value_type> types;
    uint64_t total = 0;
    for (uint64_t b : n.params) {
      fail_if(b == 0 || b > 64, errc::bad_program,
              "bitfields: field width must be 1 .. 64");
      total += b;
      types.push_back(op_util::uint_type(
          op_util::narrowest_width(static_cast<unsigned>(b))));
    }
    fail_if(total != 8u * in.width, errc::bad_program,
            "bitfields: field widths do not sum to the lane width");
    return types;
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes& side) const override {
    encode_view(n, in.data, in.type, out, side);
  }

  // Reads its input once, in place.
  void encode_view(node const& n, byte_view in, value_type type,
                   std::vector<stream>& out, bytes&) const override {
    std::vector<value_type> const types = child_types(n, type);
    size_t const count = op_util::element_count(in.size(), type);
    if (two_fields_of_16(n, type)) {  // 16-bit floats: one pass
      stream low = op_util::make_stream(count * types[0].width, types[0]);
      stream high = op_util::make_stream(count * types[1].width, types[1]);
      bitfields_kernels::split16(
          in.data(), count, static_cast<unsigned>(n.params[0]), types[0].width,
          low.data.data(), types[1].width, high.data.data());
      out.push_back(std::move(low));
      out.push_back(std::move(high));
      return;
    }
    unsigned shift = 0;
    for (size_t f = 0; f < types.size(); ++f) {
      unsigned const bits = static_cast<unsigned>(n.params[f]);
      stream field = op_util::make_stream(count * types[f].width, types[f]);
      op_util::with_lane_pair(
          type.width, types[f].width, [&]<typename T, typename N>() {
            extract<T, N>(in.data(), count, shift, bits, field.data.data());
          });
      out.push_back(std::move(field));
      shift += bits;
    }
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    std::vector<size_t> sizes;
    for (value_type t : types) sizes.push_back(count * t.width);
    return sizes;
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size,
              byte_view side, uint8_t* out) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    byte_reader no_side(side);
    op_util::expect_children(children, child_sizes(n, in, out_size, no_side),
                             name());
    // Two fields of 16-bit lanes (neither a zero leaf, which the loop below
    // skips): one pass that checks the widths as it joins.
    if (two_fields_of_16(n, in) && n.children.size() == 2 &&
        n.children[1].op != opcode::zero) {
      fail_if(
          !bitfields_kernels::join16(
              children[0].data.data(), types[0].width, children[1].data.data(),
              types[1].width, count, static_cast<unsigned>(n.params[0]), out),
          errc::corrupt, "bitfields: value wider than its field");
      return;
    }
    unsigned shift = 0;
    for (size_t f = 0; f < types.size(); ++f) {
      unsigned const bits = static_cast<unsigned>(n.params[f]);
      // A zero leaf's field (the low mantissa bits of upcast floats) adds
      // nothing; the first field stores, so it always runs.
      if (f > 0 && f < n.children.size() && n.children[f].op == opcode::zero) {
        shift += bits;
        continue;
      }
      op_util::with_lane_pair(
          in.width, types[f].width, [&]<typename T, typename N>() {
            fail_if(!insert<T, N>(children[f].data.data(), count, shift, bits,
                                  f == 0, out),
                    errc::corrupt, "bitfields: value wider than its field");
          });
      shift += bits;
    }
  }
};

}  // namespace

op_def const& bitfields_op_def() {
  static bitfields_op const instance;
  return instance;
}

}  // namespace brevis::codec
