// delta: x[i] - x[i-1] modulo 2^(8 * width), the first element kept. Smooth
// sequences (ramps, counters, slowly varying integers) become small numbers.
// The output is an integer stream (meaning uint) whatever the input held.
#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

template <typename T>
void encode_lanes(uint8_t const* in, size_t count, uint8_t* out) {
  T prev = 0;
  for (size_t i = 0; i < count; ++i) {
    T const x = load_le<T>(in + i * sizeof(T));
    store_le<T>(out + i * sizeof(T), static_cast<T>(x - prev));
    prev = x;
  }
}

template <typename T>
void decode_lanes(uint8_t const* in, size_t count, uint8_t* out) {
  T acc = 0;
  for (size_t i = 0; i < count; ++i) {
    acc = static_cast<T>(acc + load_le<T>(in + i * sizeof(T)));
    store_le<T>(out + i * sizeof(T), acc);
  }
}

class delta_op final : public op_util::same_size_op {
 public:
  opcode code() const override { return opcode::delta; }
  std::string_view name() const override { return "delta"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 0, "delta takes no parameters");
    op_util::expect_valid_width(in);
    return {op_util::uint_type(in.width)};
  }

 private:
  void forward(node const&, unsigned width, uint8_t const* in, size_t count,
               uint8_t* out) const override {
    op_util::with_lane(width,
                       [&]<typename T>() { encode_lanes<T>(in, count, out); });
  }

  void inverse(node const&, unsigned width, uint8_t const* in, size_t count,
               uint8_t* out) const override {
    op_util::with_lane(width,
                       [&]<typename T>() { decode_lanes<T>(in, count, out); });
  }
};

}  // namespace

op_def const& delta_op_def() {
  static delta_op const instance;
  return instance;
}

}  // namespace brevis::codec
