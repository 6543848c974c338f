// rans0: htscodecs rANS 4x16, order 0, over the value's bytes whatever their
// lane width. Fast and adaptive to any byte histogram.
#include "codec/dsl/operator.h"
#include "codec/entropy/htscodecs_rans.h"

namespace brevis::codec {
namespace {

class rans0_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::rans0; }
  std::string_view name() const override { return "rans0"; }

  void check(node const& n, value_type) const override {
    fail_if(!n.params.empty() || !n.blob.empty(), errc::bad_program,
            "rans0 takes no parameters");
  }

  void encode(node const&, stream const& in, bytes& out) const override {
    htscodecs_rans::encode(in.data, 0, out);
  }

  void decode(node const&, value_type, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    htscodecs_rans::decode(payload, 0, out_size, out);
  }
};

}  // namespace

leaf_def const& rans0_leaf_def() {
  static rans0_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
