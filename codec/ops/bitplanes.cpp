// bitplanes: elems<uW> -> 8W bit planes. Plane i holds bit i of every
// element: element j at byte j / 8, bit j % 8, so each plane has ceil(n / 8)
// bytes. Exposes the bits of quantized and low-entropy integer data to byte
// coders. The decoder rejects nonzero padding bits in a plane's last byte.
// No side data.
#include <cstring>
#include <vector>

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

// Transposes an 8x8 bit matrix held in a word, bit 8r + c <-> bit 8c + r
// (three rounds of delta swaps). Its own inverse.
inline uint64_t transpose8(uint64_t x) {
  uint64_t t = (x ^ (x >> 7)) & 0x00aa00aa00aa00aaULL;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000cccc0000ccccULL;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000f0f0f0f0ULL;
  x ^= t ^ (t << 28);
  return x;
}

// One group of 8 elements (8 * W bytes at `in`) -> byte `g` of every plane.
template <typename T>
inline void encode_group(uint8_t const* in, uint8_t* const* planes, size_t g) {
  T v[8];
  std::memcpy(v, in, sizeof(v));
  for (unsigned b = 0; b < sizeof(T); ++b) {
    uint64_t x = 0;
    for (unsigned j = 0; j < 8; ++j) {
      x |= uint64_t{static_cast<uint8_t>(v[j] >> (8 * b))} << (8 * j);
    }
    uint64_t const y = transpose8(x);
    for (unsigned i = 0; i < 8; ++i) {
      planes[8 * b + i][g] = static_cast<uint8_t>(y >> (8 * i));
    }
  }
}

template <typename T>
inline void decode_group(uint8_t const* const* planes, size_t g, uint8_t* out) {
  T v[8] = {};
  for (unsigned b = 0; b < sizeof(T); ++b) {
    uint64_t x = 0;
    for (unsigned i = 0; i < 8; ++i) {
      x |= uint64_t{planes[8 * b + i][g]} << (8 * i);
    }
    uint64_t const y = transpose8(x);
    for (unsigned j = 0; j < 8; ++j) {
      v[j] = static_cast<T>(v[j] | T{static_cast<uint8_t>(y >> (8 * j))}
                                       << (8 * b));
    }
  }
  std::memcpy(out, v, sizeof(v));
}

template <typename T>
void encode_lanes(uint8_t const* in, size_t count, uint8_t* const* planes) {
  size_t const full = count / 8;
  for (size_t g = 0; g < full; ++g) {
    encode_group<T>(in + 8 * g * sizeof(T), planes, g);
  }
  if (size_t const tail = count % 8) {
    uint8_t buf[8 * sizeof(T)] = {};  // zero elements pad the last byte
    std::memcpy(buf, in + 8 * full * sizeof(T), tail * sizeof(T));
    encode_group<T>(buf, planes, full);
  }
}

template <typename T>
void decode_lanes(uint8_t const* const* planes, size_t count, uint8_t* out) {
  size_t const full = count / 8;
  for (size_t g = 0; g < full; ++g) {
    decode_group<T>(planes, g, out + 8 * g * sizeof(T));
  }
  if (size_t const tail = count % 8) {
    uint8_t buf[8 * sizeof(T)];
    decode_group<T>(planes, full, buf);
    std::memcpy(out + 8 * full * sizeof(T), buf, tail * sizeof(T));
  }
}

class bitplanes_op final : public op_def {
 public:
  opcode code() const override { return opcode::bitplanes; }
  std::string_view name() const override { return "bitplanes"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_valid_width(in);
    op_util::expect_params(n, 0, "bitplanes takes no parameters");
    return std::vector<value_type>(8u * in.width, bytes_type);
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const override {
    std::vector<value_type> const types = child_types(n, in.type);
    size_t const count = in.count();
    size_t const plane_size = (count + 7) / 8;
    size_t const first = out.size();
    std::vector<uint8_t*> planes;
    for (value_type t : types)
      out.push_back(op_util::make_stream(plane_size, t));
    for (size_t i = 0; i < types.size(); ++i) {
      planes.push_back(out[first + i].data.data());
    }
    op_util::with_lane(in.type.width, [&]<typename T>() {
      encode_lanes<T>(in.data.data(), count, planes.data());
    });
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    return std::vector<size_t>(types.size(), (count + 7) / 8);
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    size_t const plane_size = (count + 7) / 8;
    op_util::expect_children(
        children, std::vector<size_t>(types.size(), plane_size), name());
    uint8_t const pad =
        static_cast<uint8_t>(count % 8 == 0 ? 0 : 0xff << (count % 8));
    std::vector<uint8_t const*> planes;
    for (value_view const& c : children) {
      fail_if(plane_size > 0 && (c.data[plane_size - 1] & pad) != 0,
              errc::corrupt, "bitplanes: nonzero padding bits");
      planes.push_back(c.data.data());
    }
    op_util::with_lane(in.width, [&]<typename T>() {
      decode_lanes<T>(planes.data(), count, out);
    });
  }
};

}  // namespace

op_def const& bitplanes_op_def() {
  static bitplanes_op const instance;
  return instance;
}

}  // namespace brevis::codec
