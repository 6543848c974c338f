// bits(b): unsigned values of b bits, packed with no entropy coder
// (FORMAT.md, 4.8). For fields whose values are nearly uniform (the 7-bit
// mantissa of most bf16 weights: entropy >= 6.95 bits), where a rANS stream
// saves a fraction of a percent and costs a table lookup a value to decode.
#include "codec/dsl/operator.h"
#include "codec/leaves/bits_kernels.h"

namespace brevis::codec {
namespace {

class bits_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::bits; }
  std::string_view name() const override { return "bits"; }

  void check(node const& n, value_type in) const override { bits_of(n, in); }

  void encode(node const& n, stream const& in, bytes& out) const override {
    encode_view(n, in.data, in.type, out);
  }

  void encode_view(node const& n, byte_view in, value_type type,
                   bytes& out) const override {
    unsigned const b = bits_of(n, type);
    fail_if(in.size() % type.width != 0, errc::domain,
            "bits: value is not a whole number of lanes");
    size_t const count = in.size() / type.width;
    size_t const at = out.size();
    out.resize(at + bits_kernels::packed_size(count, b));
    bool const fits =
        bits_kernels::pack(in.data(), type.width, count, b, out.data() + at);
    if (!fits) {
      out.resize(at);
      fail(errc::domain, "bits: a value does not fit its bits");
    }
  }

  void check_payload(node const& n, value_type in, size_t payload_size,
                     size_t out_size) const override {
    value_count(bits_of(n, in), in, payload_size, out_size);
  }

  void decode(node const& n, value_type in, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    unsigned const b = bits_of(n, in);
    size_t const count = value_count(b, in, payload.size(), out_size);
    fail_if(!bits_kernels::unpack(payload.data(), count, b, in.width, out),
            errc::corrupt, "bits: nonzero padding bits");
  }

 private:
  static unsigned bits_of(node const& n, value_type in) {
    fail_if(n.params.size() != 1 || !n.blob.empty(), errc::bad_program,
            "bits takes one parameter, the bits a value");
    fail_if(!valid_width(in.width), errc::bad_program,
            "bits: invalid lane width");
    fail_if(n.params[0] < 1 || n.params[0] > 8u * in.width, errc::bad_program,
            "bits: b must be 1 .. the lane's bits");
    return static_cast<unsigned>(n.params[0]);
  }

  // The number of values, `out_size` bytes of lanes of `in`, that a payload
  // of `payload_size` bytes of b-bit values must hold exactly.
  static size_t value_count(unsigned b, value_type in, size_t payload_size,
                            size_t out_size) {
    fail_if(out_size % in.width != 0, errc::corrupt,
            "bits: size is not a whole number of lanes");
    size_t const count = out_size / in.width;
    fail_if(payload_size != bits_kernels::packed_size(count, b), errc::corrupt,
            "bits: payload size differs from the values'");
    return count;
  }
};

}  // namespace

leaf_def const& bits_leaf_def() {
  static bits_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
