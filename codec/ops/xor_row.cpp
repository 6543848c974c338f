// xor_row:cols: x[i] ^ x[i-cols] for i >= cols, the first row kept. For a
// matrix stored row by row, each element is xored with the one above it,
// which removes what neighbouring rows share (column-wise structure). The
// output is an integer stream (meaning uint).
#include <cstdint>
#include <cstring>

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

template <typename T>
void encode_lanes(uint8_t const* in, size_t count, size_t cols, uint8_t* out) {
  size_t const head = cols < count ? cols : count;
  std::memcpy(out, in, head * sizeof(T));
  for (size_t i = head; i < count; ++i) {
    T const x = load_le<T>(in + i * sizeof(T));
    T const up = load_le<T>(in + (i - cols) * sizeof(T));
    store_le<T>(out + i * sizeof(T), static_cast<T>(x ^ up));
  }
}

// Reads the rows already rebuilt in `out`: row r needs row r - 1 finished.
template <typename T>
void decode_lanes(uint8_t const* in, size_t count, size_t cols, uint8_t* out) {
  size_t const head = cols < count ? cols : count;
  std::memcpy(out, in, head * sizeof(T));
  for (size_t i = head; i < count; ++i) {
    T const d = load_le<T>(in + i * sizeof(T));
    T const up = load_le<T>(out + (i - cols) * sizeof(T));
    store_le<T>(out + i * sizeof(T), static_cast<T>(d ^ up));
  }
}

class xor_row_op final : public op_util::same_size_op {
 public:
  opcode code() const override { return opcode::xor_row; }
  std::string_view name() const override { return "xor_row"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 1, "xor_row takes [cols]");
    op_util::expect_valid_width(in);
    fail_if(n.params[0] == 0, errc::bad_program, "xor_row needs cols > 0");
    return {op_util::uint_type(in.width)};
  }

 private:
  void forward(node const& n, unsigned width, uint8_t const* in, size_t count,
               uint8_t* out) const override {
    if (count == 0) return;
    op_util::with_lane(
        width, [&]<typename T>() { encode_lanes<T>(in, count, cols(n), out); });
  }

  void inverse(node const& n, unsigned width, uint8_t const* in, size_t count,
               uint8_t* out) const override {
    if (count == 0) return;
    op_util::with_lane(
        width, [&]<typename T>() { decode_lanes<T>(in, count, cols(n), out); });
  }

  // A cols beyond size_t (on 32-bit hosts) is past any chunk: xor nothing.
  static size_t cols(node const& n) {
    return n.params[0] > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(n.params[0]);
  }
};

}  // namespace

op_def const& xor_row_op_def() {
  static xor_row_op const instance;
  return instance;
}

}  // namespace brevis::codec
