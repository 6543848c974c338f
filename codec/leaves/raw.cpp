// raw: the payload is the value's bytes, unchanged. Always applicable.
#include <cstring>

#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

class raw_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::raw; }
  std::string_view name() const override { return "raw"; }

  void check(node const& n, value_type) const override {
    fail_if(!n.params.empty() || !n.blob.empty(), errc::bad_program,
            "raw takes no parameters");
  }

  void encode(node const& n, stream const& in, bytes& out) const override {
    encode_view(n, in.data, in.type, out);
  }

  void encode_view(node const&, byte_view in, value_type,
                   bytes& out) const override {
    put_bytes(out, in);
  }

  void decode(node const&, value_type, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    fail_if(payload.size() != out_size, errc::corrupt,
            "raw payload size differs from value size");
    if (out_size > 0) std::memcpy(out, payload.data(), out_size);
  }
};

}  // namespace

leaf_def const& raw_leaf_def() {
  static raw_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
