// sparse: elems<T> -> mask (bytes, one bit per element: set when the element
// is not all zero bits) + the nonzero elements in order (same type). Pruned
// and sparse tensors have their zeros scattered, not in runs: the mask costs
// about H(p) bits an element, and the values keep the statistics of the
// nonzero weights alone (coding zeros and values as one alphabet would need
// a table of every value; byte planes would pay for the zeros in each plane).
// Side data: varint k, the number of nonzero elements.
#include <bit>
#include <cstring>
#include <vector>

#include "codec/core/target_clones.h"
#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"
#include "codec/ops/sparse_kernels.h"

namespace brevis::codec {
namespace {

constexpr value_type mask_type = op_util::uint_type(1);

size_t mask_bytes(size_t count) { return count / 8 + (count % 8 != 0); }

// The set bits of n mask bytes, a word at a time. The portable build has no
// POPCNT instruction, so each std::popcount is a call into libgcc: once per
// byte that was 1.2% of decoding a bf16 checkpoint; the AVX2 clone has POPCNT.
BREVIS_AVX2_CLONES size_t count_set_bits(uint8_t const* p, size_t n) {
  size_t set = 0;
  size_t b = 0;
  for (; b + 8 <= n; b += 8) {
    set += static_cast<size_t>(std::popcount(load_le<uint64_t>(p + b)));
  }
  for (; b < n; ++b) set += static_cast<size_t>(std::popcount(p[b]));
  return set;
}

// A first pass counts the nonzeros (vectorised), sizing the values; the
// kernel then writes the mask and packs the values (sparse_kernels.h).
template <typename T>
void encode_lanes(uint8_t const* in, size_t count, uint8_t* mask,
                  bytes& values) {
  if (count == 0) return;  // no mask bytes, no values (and maybe null)
  size_t k = 0;
  for (size_t j = 0; j < count; ++j) {
    k += load_le<T>(in + j * sizeof(T)) != 0;
  }
  values.resize((k + sparse_kernels::compact_slack) * sizeof(T));
  size_t const written =
      sparse_kernels::compact(sizeof(T), in, count, mask, values.data());
  values.resize(written * sizeof(T));  // k: the same lanes counted again
}

class sparse_op final : public op_def {
 public:
  opcode code() const override { return opcode::sparse; }
  std::string_view name() const override { return "sparse"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_valid_width(in);
    op_util::expect_params(n, 0, "sparse takes no parameters");
    return {mask_type, in};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes& side) const override {
    std::vector<value_type> const types = child_types(n, in.type);
    size_t const count = op_util::element_count(in.data.size(), in.type);
    stream mask{bytes(mask_bytes(count)), types[0]};
    stream values{{}, types[1]};
    op_util::with_lane(in.type.width, [&]<typename T>() {
      encode_lanes<T>(in.data.data(), count, mask.data.data(), values.data);
    });
    put_varint(side, values.count());
    out.push_back(std::move(mask));
    out.push_back(std::move(values));
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader& side) const override {
    child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    size_t const k = read_nonzero(side, count);
    return {mask_bytes(count), k * in.width};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size,
              byte_view side, uint8_t* out) const override {
    child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    byte_reader reader(side);
    size_t const k = read_nonzero(reader, count);
    op_util::expect_children(children, {mask_bytes(count), k * in.width},
                             name());
    // The mask must set exactly k bits, none past the last element, and
    // every value it places must be nonzero (else the encoder would have
    // left it out): checked before writing.
    uint8_t const* mask = children[0].data.data();
    size_t const set = count_set_bits(mask, mask_bytes(count));
    fail_if(count % 8 != 0 && (mask[count / 8] >> (count % 8)) != 0,
            errc::corrupt, "sparse: mask bits past the last element");
    fail_if(set != k, errc::corrupt,
            "sparse: mask does not match the nonzero count");
    uint8_t const* values = children[1].data.data();
    bool zero = false;
    op_util::with_lane(in.width, [&]<typename T>() {
      // One test at the end, not a branch per value: the loop vectorizes.
      for (size_t i = 0; i < k; ++i)
        zero |= load_le<T>(values + i * sizeof(T)) == 0;
    });
    fail_if(zero, errc::corrupt, "sparse: a zero among the nonzero values");
    sparse_kernels::expand(in.width, mask, values, k, count, out);
  }

 private:
  static size_t read_nonzero(byte_reader& side, size_t count) {
    uint64_t const k = side.varint();
    fail_if(k > count, errc::corrupt, "sparse: more nonzeros than elements");
    return static_cast<size_t>(k);
  }
};

}  // namespace

op_def const& sparse_op_def() {
  static sparse_op const instance;
  return instance;
}

}  // namespace brevis::codec
