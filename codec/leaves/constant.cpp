// constant: every lane holds the same value; the payload is that lane (width
// bytes), or nothing when the value is empty.
#include <algorithm>
#include <cstring>

#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

class constant_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::constant; }
  std::string_view name() const override { return "constant"; }

  void check(node const& n, value_type) const override {
    fail_if(!n.params.empty() || !n.blob.empty(), errc::bad_program,
            "constant takes no parameters");
  }

  void encode(node const&, stream const& in, bytes& out) const override {
    size_t const w = in.type.width;
    size_t const size = in.data.size();
    fail_if(size % w != 0, errc::domain,
            "constant: value is not a whole number of lanes");
    if (size == 0) return;
    uint8_t const* d = in.data.data();
    // Every lane equals the first exactly when the bytes repeat with the
    // lane's period: one compare of the value against itself shifted by a
    // lane (a memcmp of w bytes a lane was a libc call per lane, 3% of
    // compressing centernet.fp16, whose classes have constant planes).
    fail_if(std::memcmp(d, d + w, size - w) != 0, errc::domain,
            "constant: lanes differ");
    out.insert(out.end(), d, d + w);
  }

  void decode(node const&, value_type in, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    size_t const w = in.width;
    fail_if(out_size % w != 0, errc::corrupt,
            "constant: size is not a whole number of lanes");
    fail_if(payload.size() != (out_size == 0 ? 0 : w), errc::corrupt,
            "constant: payload is not one lane");
    if (out_size == 0) return;
    if (w == 1) {
      std::memset(out, payload[0], out_size);
      return;
    }
    // The lanes written so far, copied after themselves (up to a block that
    // stays in L1): a memcpy of w bytes a lane was a libc call per lane (8%
    // of decoding centernet.fp16).
    std::memcpy(out, payload.data(), w);
    size_t block = w;
    for (size_t filled = w; filled < out_size;) {
      size_t const n = std::min(block, out_size - filled);
      std::memcpy(out + filled, out, n);
      filled += n;
      if (block < 4096) block = filled;
    }
  }
};

}  // namespace

leaf_def const& constant_leaf_def() {
  static constant_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
