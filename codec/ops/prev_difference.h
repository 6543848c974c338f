#pragma once
// The operators that replace each element by its difference from the element
// before it under a group operation on lanes (delta: subtraction modulo
// 2^(8 * width); xor_prev: xor), the first element kept. Decoding folds the
// differences back with the group's combine. Only the group differs between
// them, so they share this one body.

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec::op_util {

/// Group: `static constexpr opcode code`, `static constexpr char const*
/// name`, `static constexpr char const* no_params` (the error for a node
/// with parameters), and `difference(x, prev)` / `combine(acc, d)` on
/// unsigned lanes, with combine(prev, difference(x, prev)) == x.
template <typename Group>
class prev_difference_op final : public same_size_op {
 public:
  opcode code() const override { return Group::code; }
  std::string_view name() const override { return Group::name; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    expect_params(n, 0, Group::no_params);
    expect_valid_width(in);
    return {uint_type(in.width)};
  }

 private:
  void forward(node const& /*n*/, unsigned width, uint8_t const* in,
               size_t count, uint8_t* out) const override {
    with_lane(width, [&]<typename T>() {
      T prev = 0;
      for (size_t i = 0; i < count; ++i) {
        T const x = load_le<T>(in + i * sizeof(T));
        store_le<T>(out + i * sizeof(T), Group::difference(x, prev));
        prev = x;
      }
    });
  }

  void inverse(node const& /*n*/, unsigned width, uint8_t const* in,
               size_t count, uint8_t* out) const override {
    with_lane(width, [&]<typename T>() {
      T acc = 0;
      for (size_t i = 0; i < count; ++i) {
        acc = Group::combine(acc, load_le<T>(in + i * sizeof(T)));
        store_le<T>(out + i * sizeof(T), acc);
      }
    });
  }
};

}  // namespace brevis::codec::op_util
