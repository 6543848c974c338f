// zero: the value is all zero bytes; the payload is empty. Sparse tensors and
// zeroed padding cost nothing.
#include <cstring>

#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

class zero_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::zero; }
  std::string_view name() const override { return "zero"; }

  void check(node const& n, value_type) const override {
    fail_if(!n.params.empty() || !n.blob.empty(), errc::bad_program,
            "zero takes no parameters");
  }

  void encode(node const&, stream const& in, bytes&) const override {
    byte_view const d = in.data;
    bool const all_zero = d.empty() || (d[0] == 0 && all_bytes_equal(d));
    fail_if(!all_zero, errc::domain, "zero: value has a nonzero byte");
  }

  void decode(node const&, value_type in, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    fail_if(!payload.empty(), errc::corrupt, "zero: payload is not empty");
    fail_if(out_size % in.width != 0, errc::corrupt,
            "zero: size is not a whole number of lanes");
    if (out_size > 0) std::memset(out, 0, out_size);
  }
};

}  // namespace

leaf_def const& zero_leaf_def() {
  static zero_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
