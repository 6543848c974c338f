// map:kind:arg: an invertible function applied to every element.
//   kind 0, zigzag (arg 0): two's complement -> unsigned, small magnitudes to
//     small numbers: (x << 1) ^ (x >> (bits - 1)), the shift arithmetic.
//   kind 1, xor-const: x ^ arg (flips bits that are nearly always set).
//   kind 2, add-const: x + arg modulo 2^bits (removes a bias).
//   kind 3, rotate: rotate left by arg bits, arg < bits (moves a field).
// arg must fit the lane. The output is always an integer stream (meaning
// uint): once mapped, the lanes no longer hold what the input meaning says.
// zigzag accepts any input meaning, since the usual input is a delta stream,
// which is typed uint but holds two's complement differences.
#include <bit>
#include <cstdint>

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

enum class map_kind : uint64_t {
  zigzag = 0,
  xor_const = 1,
  add_const = 2,
  rotate = 3
};

template <typename T>
T zigzag(T x) {
  // The arithmetic shift of the sign bit: all ones for negatives, else zero.
  T const sign = static_cast<T>(-static_cast<T>(x >> (8 * sizeof(T) - 1)));
  return static_cast<T>(static_cast<T>(x << 1) ^ sign);
}

template <typename T>
T unzigzag(T y) {
  return static_cast<T>((y >> 1) ^ static_cast<T>(-static_cast<T>(y & 1)));
}

template <typename T, typename F>
void apply(uint8_t const* in, size_t count, uint8_t* out, F f) {
  for (size_t i = 0; i < count; ++i) {
    store_le<T>(out + i * sizeof(T), f(load_le<T>(in + i * sizeof(T))));
  }
}

template <typename T>
void run(map_kind kind, uint64_t arg, bool inverse, uint8_t const* in,
         size_t count, uint8_t* out) {
  T const a = static_cast<T>(arg);
  int const r = static_cast<int>(arg);
  switch (kind) {
    case map_kind::zigzag:
      if (inverse) {
        apply<T>(in, count, out, [](T x) { return unzigzag(x); });
      } else {
        apply<T>(in, count, out, [](T x) { return zigzag(x); });
      }
      return;
    case map_kind::xor_const:
      apply<T>(in, count, out, [a](T x) { return static_cast<T>(x ^ a); });
      return;
    case map_kind::add_const:
      if (inverse) {
        apply<T>(in, count, out, [a](T x) { return static_cast<T>(x - a); });
      } else {
        apply<T>(in, count, out, [a](T x) { return static_cast<T>(x + a); });
      }
      return;
    case map_kind::rotate:
      if (inverse) {
        apply<T>(in, count, out, [r](T x) { return std::rotr(x, r); });
      } else {
        apply<T>(in, count, out, [r](T x) { return std::rotl(x, r); });
      }
      return;
  }
  fail(errc::bad_program, "unknown map kind");
}

class map_op final : public op_util::same_size_op {
 public:
  opcode code() const override { return opcode::map; }
  std::string_view name() const override { return "map"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 2, "map takes [kind, arg]");
    op_util::expect_valid_width(in);
    uint64_t const kind = n.params[0];
    uint64_t const arg = n.params[1];
    unsigned const bits = 8u * in.width;
    switch (static_cast<map_kind>(kind)) {
      case map_kind::zigzag:
        fail_if(arg != 0, errc::bad_program, "map zigzag takes arg 0");
        break;
      case map_kind::xor_const:
      case map_kind::add_const:
        fail_if(arg > op_util::low_mask(bits), errc::bad_program,
                "map constant does not fit the lane");
        break;
      case map_kind::rotate:
        fail_if(arg >= bits, errc::bad_program,
                "map rotation is not below the lane bits");
        break;
      default:
        fail(errc::bad_program, "unknown map kind");
    }
    return {op_util::uint_type(in.width)};
  }

 private:
  void forward(node const& n, unsigned width, uint8_t const* in, size_t count,
               uint8_t* out) const override {
    op_util::with_lane(width, [&]<typename T>() {
      run<T>(static_cast<map_kind>(n.params[0]), n.params[1], false, in, count,
             out);
    });
  }

  void inverse(node const& n, unsigned width, uint8_t const* in, size_t count,
               uint8_t* out) const override {
    op_util::with_lane(width, [&]<typename T>() {
      run<T>(static_cast<map_kind>(n.params[0]), n.params[1], true, in, count,
             out);
    });
  }
};

}  // namespace

op_def const& map_op_def() {
  static map_op const instance;
  return instance;
}

}  // namespace brevis::codec
