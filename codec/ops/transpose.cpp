// transpose:cols: reads the elements as rows x cols (rows = count / cols, full
// rows only) and writes them column by column; the count % cols leftover
// elements follow unchanged. Puts the elements of a column, which often share
// a scale, next to each other.
#include <algorithm>
#include <cstring>

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

// The matrix is moved in square tiles through a local buffer: each tile row
// is read, and each tile column written, as one contiguous run. With strides
// that are powers of two (the usual shapes), touching rows one element at a
// time would evict lines of the same cache set before they are used again.
constexpr size_t block = 32;

// Writes dst[c * rows + r] = src[r * cols + c] for the rows x cols matrix.
template <typename T>
void transpose_matrix(uint8_t const* src, size_t rows, size_t cols,
                      uint8_t* dst) {
  T tile[block][block];
  for (size_t r0 = 0; r0 < rows; r0 += block) {
    size_t const nr = std::min(rows - r0, block);
    for (size_t c0 = 0; c0 < cols; c0 += block) {
      size_t const nc = std::min(cols - c0, block);
      for (size_t r = 0; r < nr; ++r) {
        std::memcpy(tile[r], src + ((r0 + r) * cols + c0) * sizeof(T),
                    nc * sizeof(T));
      }
      for (size_t c = 0; c < nc; ++c) {
        T column[block];
        for (size_t r = 0; r < nr; ++r) column[r] = tile[r][c];
        std::memcpy(dst + ((c0 + c) * rows + r0) * sizeof(T), column,
                    nr * sizeof(T));
      }
    }
  }
}

class transpose_op final : public op_util::same_size_op {
 public:
  opcode code() const override { return opcode::transpose; }
  std::string_view name() const override { return "transpose"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 1, "transpose takes [cols]");
    op_util::expect_valid_width(in);
    fail_if(n.params[0] == 0, errc::bad_program, "transpose needs cols > 0");
    return {in};
  }

 private:
  void forward(node const& n, unsigned width, uint8_t const* in, size_t count,
               uint8_t* out) const override {
    run(n.params[0], width, in, count, out, false);
  }

  void inverse(node const& n, unsigned width, uint8_t const* in, size_t count,
               uint8_t* out) const override {
    run(n.params[0], width, in, count, out, true);
  }

  // Forward: rows x cols -> cols x rows. Inverse: the same with rows and cols
  // swapped. The leftover elements are copied as they are.
  static void run(uint64_t cols_param, unsigned width, uint8_t const* src,
                  size_t count, uint8_t* dst, bool inverse) {
    if (count == 0) return;
    size_t const cols =
        cols_param >= count ? count : static_cast<size_t>(cols_param);
    size_t const rows = count / cols;
    size_t const whole = rows * cols * width;
    size_t const size = count * width;
    op_util::with_lane(width, [&]<typename T>() {
      if (inverse) {
        transpose_matrix<T>(src, cols, rows, dst);
      } else {
        transpose_matrix<T>(src, rows, cols, dst);
      }
    });
    if (size > whole) std::memcpy(dst + whole, src + whole, size - whole);
  }
};

}  // namespace

op_def const& transpose_op_def() {
  static transpose_op const instance;
  return instance;
}

}  // namespace brevis::codec
