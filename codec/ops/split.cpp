// split(at): bytes -> head (the first min(at, n) bytes) + rest. Segments a
// region whose parts differ (a header before a table, say). Both sizes follow
// from the output size: no side data.
#include <algorithm>
#include <vector>

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

class split_op final : public op_def {
 public:
  opcode code() const override { return opcode::split; }
  std::string_view name() const override { return "split"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 1, "split takes one parameter (offset)");
    fail_if(in.width != 1, errc::bad_program, "split needs a byte stream");
    return {in, in};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const override {
    child_types(n, in.type);
    size_t const head = head_size(n, in.data.size());
    auto const mid = in.data.begin() + static_cast<ptrdiff_t>(head);
    out.push_back(stream{bytes(in.data.begin(), mid), in.type});
    out.push_back(stream{bytes(mid, in.data.end()), in.type});
  }

  bool concatenates() const override { return true; }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    child_types(n, in);
    size_t const head = head_size(n, out_size);
    return {head, out_size - head};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const override {
    child_types(n, in);
    size_t const head = head_size(n, out_size);
    op_util::expect_children(children, {head, out_size - head}, name());
    op_util::concat(children, out);
  }

 private:
  static size_t head_size(node const& n, size_t size) {
    return static_cast<size_t>(std::min<uint64_t>(n.params[0], size));
  }
};

}  // namespace

op_def const& split_op_def() {
  static split_op const instance;
  return instance;
}

}  // namespace brevis::codec
