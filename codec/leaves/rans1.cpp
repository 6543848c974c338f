// rans1: htscodecs rANS 4x16, order 1, over the value's bytes whatever their
// lane width. Each byte is coded given the previous one (exponent streams).
#include "codec/dsl/operator.h"
#include "codec/entropy/htscodecs_rans.h"

namespace brevis::codec {
namespace {

class rans1_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::rans1; }
  std::string_view name() const override { return "rans1"; }

  void check(node const& n, value_type) const override {
    fail_if(!n.params.empty() || !n.blob.empty(), errc::bad_program,
            "rans1 takes no parameters");
  }

  void encode(node const&, stream const& in, bytes& out) const override {
    htscodecs_rans::encode(in.data, 1, out);
  }

  void decode(node const&, value_type, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    htscodecs_rans::decode(payload, 1, out_size, out);
  }
};

}  // namespace

leaf_def const& rans1_leaf_def() {
  static rans1_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
