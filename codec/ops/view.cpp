// view:width:meaning: reads bytes as lanes of `width` bytes holding `meaning`.
// Child 0 gets the whole elements, child 1 the n % width tail bytes (a chunk
// need not end on an element boundary, and the tail must survive bit-exactly).
#include <algorithm>

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

class view_op final : public op_def {
 public:
  opcode code() const override { return opcode::view; }
  std::string_view name() const override { return "view"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 2, "view takes [width, meaning]");
    fail_if(in.width != 1, errc::bad_program, "view needs a byte input");
    uint64_t const width = n.params[0];
    uint64_t const kind = n.params[1];
    fail_if(!valid_width(width), errc::bad_program,
            "view width is not 1, 2, 4 or 8");
    fail_if(kind > static_cast<uint64_t>(meaning::uint), errc::bad_program,
            "view meaning is unknown");
    auto const m = static_cast<meaning>(kind);
    unsigned const mw = meaning_width(m);
    fail_if(mw != 0 && mw != width, errc::bad_program,
            "view meaning does not fit its width");
    return {value_type{static_cast<uint8_t>(width), m}, bytes_type};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const override {
    std::vector<value_type> const types = child_types(n, in.type);
    size_t const whole = in.data.size() / types[0].width * types[0].width;
    stream lanes = op_util::make_stream(whole, types[0]);
    stream tail = op_util::make_stream(in.data.size() - whole, types[1]);
    std::copy(in.data.begin(), in.data.begin() + whole, lanes.data.begin());
    std::copy(in.data.begin() + whole, in.data.end(), tail.data.begin());
    out.push_back(std::move(lanes));
    out.push_back(std::move(tail));
  }

  bool concatenates() const override { return true; }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    size_t const width = child_types(n, in)[0].width;
    return {out_size / width * width, out_size % width};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const override {
    size_t const width = child_types(n, in)[0].width;
    size_t const whole = out_size / width * width;
    op_util::expect_children(children, {whole, out_size - whole}, name());
    op_util::concat(children, out);
  }
};

}  // namespace

op_def const& view_op_def() {
  static view_op const instance;
  return instance;
}

}  // namespace brevis::codec
