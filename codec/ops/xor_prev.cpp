// xor_prev: x[i] ^ x[i-1], the first element kept. Floats that change slowly
// share their high bits with their neighbour, which the xor turns into zeros.
#include "codec/ops/prev_difference.h"

namespace brevis::codec {
namespace {

struct exclusive_or {
  static constexpr opcode code = opcode::xor_prev;
  static constexpr char const* name = "xor_prev";
  static constexpr char const* no_params = "xor_prev takes no parameters";
  template <typename T>
  static T difference(T x, T prev) {
    return static_cast<T>(x ^ prev);
  }
  template <typename T>
  static T combine(T acc, T d) {
    return static_cast<T>(acc ^ d);
  }
};

}  // namespace

op_def const& xor_prev_op_def() {
  static op_util::prev_difference_op<exclusive_or> const instance;
  return instance;
}

}  // namespace brevis::codec
