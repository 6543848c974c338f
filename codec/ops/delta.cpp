// delta: x[i] - x[i-1] modulo 2^(8 * width), the first element kept. Smooth
// sequences (ramps, counters, slowly varying integers) become small numbers.
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
    store_le<T>(out + i * sizeof(T), static_cast<T>(x - prev));
    prev = x;
  }
}

template <typename T>
void inverse(uint8_t const* in, size_t count, uint8_t* out) {
  T acc = 0;
  for (size_t i = 0; i < count; ++i) {
    acc = static_cast<T>(acc + load_le<T>(in + i * sizeof(T)));
    store_le<T>(out + i * sizeof(T), acc);
  }
}

class delta_op final : public op_def {
 public:
  opcode code() const override { return opcode::delta; }
  std::string_view name() const override { return "delta"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 0, "delta takes no parameters");
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
    fail_if(children.size() != 1, errc::corrupt, "delta needs one child");
    op_util::expect_size(children[0], out_size);
    op_util::with_lane(in.width, [&]<typename T>() {
      inverse<T>(children[0].data.data(), count, out);
    });
  }
};

}  // namespace

op_def const& delta_op_def() {
  static delta_op const instance;
  return instance;
}

}  // namespace brevis::codec
