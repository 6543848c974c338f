// delta: x[i] - x[i-1] modulo 2^(8 * width), the first element kept. Smooth
// sequences (ramps, counters, slowly varying integers) become small numbers.
// The output is an integer stream (meaning uint) whatever the input held.
#include "codec/ops/prev_difference.h"

namespace brevis::codec {
namespace {

struct modular_subtraction {
  static constexpr opcode code = opcode::delta;
  static constexpr char const* name = "delta";
  static constexpr char const* no_params = "delta takes no parameters";
  template <typename T>
  static T difference(T x, T prev) {
    return static_cast<T>(x - prev);
  }
  template <typename T>
  static T combine(T acc, T d) {
    return static_cast<T>(acc + d);
  }
};

}  // namespace

op_def const& delta_op_def() {
  static op_util::prev_difference_op<modular_subtraction> const instance;
  return instance;
}

}  // namespace brevis::codec
