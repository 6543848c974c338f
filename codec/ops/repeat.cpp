// repeat(p): elems whose element i equals element i % p -> one period (the
// first min(p, n) elements). Captures periodic patterns (position tables,
// tiled constants). The encoder throws errc::domain when the input is not
// periodic with period p. No side data.
#include <algorithm>
#include <cstring>
#include <vector>

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

class repeat_op final : public op_def {
 public:
  opcode code() const override { return opcode::repeat; }
  std::string_view name() const override { return "repeat"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_valid_width(in);
    op_util::expect_params(n, 1, "repeat takes one parameter (period)");
    fail_if(n.params[0] == 0, errc::bad_program, "repeat: period is zero");
    return {in};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const override {
    child_types(n, in.type);
    size_t const size = in.data.size();
    size_t const period = period_bytes(n, in.type, size);
    // x[i] == x[i % p] for all i  <=>  x[i + p] == x[i] for all i < n - p.
    fail_if(size > period && std::memcmp(in.data.data() + period,
                                         in.data.data(), size - period) != 0,
            errc::domain, "repeat: input is not periodic");
    out.push_back(
        stream{bytes(in.data.begin(),
                     in.data.begin() + static_cast<ptrdiff_t>(period)),
               in.type});
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    child_types(n, in);
    op_util::element_count(out_size, in);
    return {period_bytes(n, in, out_size)};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const override {
    child_types(n, in);
    op_util::element_count(out_size, in);
    size_t const period = period_bytes(n, in, out_size);
    op_util::expect_children(children, {period}, name());
    if (period == 0) return;
    std::memcpy(out, children[0].data.data(), period);
    // Double the filled prefix each step: O(log(n / p)) memcpy calls.
    for (size_t done = period; done < out_size;) {
      size_t const step = std::min(done, out_size - done);
      std::memcpy(out + done, out, step);
      done += step;
    }
  }

 private:
  // Bytes in one period, capped at the whole value (p may exceed n).
  static size_t period_bytes(node const& n, value_type in, size_t size) {
    uint64_t const elements = size / in.width;
    return static_cast<size_t>(std::min(n.params[0], elements)) * in.width;
  }
};

}  // namespace

op_def const& repeat_op_def() {
  static repeat_op const instance;
  return instance;
}

}  // namespace brevis::codec
