// literal: the bytes live in the node's blob (the program, stored once in the
// archive index); a chunk's payload is only the varint offset of its bytes in
// the blob. Small opaque regions of one file (zip headers, pickles, padding)
// each coded on their own pay a codec's framing and learn nothing from each
// other; as literals they are compressed together with the index, as one
// stream (FORMAT.md 4.7).
#include <cstring>

#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

class literal_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::literal; }
  std::string_view name() const override { return "literal"; }

  void check(node const& n, value_type) const override {
    fail_if(!n.params.empty(), errc::bad_program,
            "literal takes no parameters");
  }

  void encode(node const& n, stream const& in, bytes& out) const override {
    byte_view const blob = n.blob;
    byte_view const data = in.data;
    fail_if(data.size() > blob.size(), errc::domain,
            "literal: value longer than the blob");
    // The first place the value occurs: a region's chunks are its slices.
    // glibc's memmem is linear in the worst case (the two-way algorithm);
    // Boyer-Moore-Horspool's shifts shrink to one byte on repetitive bytes,
    // and a 4 KiB chunk of a 64 KiB region of a few values took 4096
    // compares a position (found by fuzz_compress).
    size_t offset = blob.size();
    if (data.empty()) {
      offset = 0;
    } else if (void const* const at = ::memmem(blob.data(), blob.size(),
                                               data.data(), data.size())) {
      offset =
          static_cast<size_t>(static_cast<uint8_t const*>(at) - blob.data());
    }
    fail_if(offset == blob.size() && !data.empty(), errc::domain,
            "literal: value not in the blob");
    put_varint(out, offset);
  }

  void decode(node const& n, value_type, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    byte_reader r(payload);
    uint64_t const offset = r.varint();
    fail_if(!r.empty(), errc::corrupt, "literal: trailing payload bytes");
    fail_if(offset > n.blob.size() || out_size > n.blob.size() - offset,
            errc::corrupt, "literal: range past the end of the blob");
    if (out_size > 0) std::memcpy(out, n.blob.data() + offset, out_size);
  }
};

}  // namespace

leaf_def const& literal_leaf_def() {
  static literal_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
