// xor_prev: x[i] ^ x[i-1], the first element kept. Floats that change slowly
// share their high bits with their neighbour, which the xor turns into zeros.
// The output is an integer stream (meaning uint) whatever the input held.
#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

template <typename T>
void forward(uint8_t const* in, size_t count, uint8_t* out) {
  T prev = 0;
  for (size_t i = 0; i < count; ++i) {
    T const x = load_le<T>(in + i * sizeof(T));
    store_le<T>(out + i * sizeof(T), static_cast<T>(x ^ prev));
    prev = x;
  }
}

template <typename T>
void inverse(uint8_t const* in, size_t count, uint8_t* out) {
  T acc = 0;
  for (size_t i = 0; i < count; ++i) {
    acc = static_cast<T>(acc ^ load_le<T>(in + i * sizeof(T)));
    store_le<T>(out + i * sizeof(T), acc);
  }
}

class xor_prev_op final : public op_def {
 public:
  opcode code() const override { return opcode::xor_prev; }
  std::string_view name() const override { return "xor_prev"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 0, "xor_prev takes no parameters");
    op_util::expect_valid_width(in);
    return {op_util::uint_type(in.width)};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const override {
    std::vector<value_type> const types = child_types(n, in.type);
    size_t const count = op_util::element_count(in.data.size(), in.type);
    stream s = op_util::make_stream(in.data.size(), types[0]);
    op_util::with_lane(in.type.width, [&]<typename T>() {
      forward<T>(in.data.data(), count, s.data.data());
    });
    out.push_back(std::move(s));
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    child_types(n, in);
    op_util::element_count(out_size, in);
    return {out_size};
  }

  void decode(node const& n, value_type in, std::span<stream const> children,
              size_t out_size, byte_view, uint8_t* out) const override {
    child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    fail_if(children.size() != 1, errc::corrupt, "xor_prev needs one child");
    op_util::expect_size(children[0], out_size);
    op_util::with_lane(in.width, [&]<typename T>() {
      inverse<T>(children[0].data.data(), count, out);
    });
  }
};

}  // namespace

op_def const& xor_prev_op_def() {
  static xor_prev_op const instance;
  return instance;
}

}  // namespace brevis::codec
