// low_zero(k): elems<uW> whose low k bits are all zero -> value >> k, in the
// narrowest lane holding the remaining 8W - k bits (meaning uint). Captures
// fp32 upcast from bf16 (k = 16) or from fp16 (k = 13). The encoder throws
// errc::domain when some element has a nonzero low bit; the decoder rejects
// values that do not fit in 8W - k bits.
#include <vector>

#include "codec/core/target_clones.h"
#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

template <typename T, typename N>
void encode_lanes(uint8_t const* in, size_t count, unsigned k, uint8_t* out) {
  T const low = static_cast<T>(op_util::low_mask(k));
  T bad = 0;  // OR of the low bits: one branch after the loop
  for (size_t j = 0; j < count; ++j)
    bad |= load_le<T>(in + j * sizeof(T)) & low;
  fail_if(bad != 0, errc::domain, "low_zero: some low bit is set");
  for (size_t j = 0; j < count; ++j) {
    store_le<N>(out + j * sizeof(N),
                static_cast<N>(load_le<T>(in + j * sizeof(T)) >> k));
  }
}

// Runs at every decoded chunk of upcast floats: an AVX2 clone (chosen at
// load time) does twice the lanes of the portable SSE2 build. Returns false
// when some value is wider than its bits (clones must not throw: GCC 12
// then terminates).
template <typename T, typename N>
BREVIS_AVX2_CLONES bool decode_lanes(uint8_t const* in, size_t count,
                                     unsigned k, uint8_t* out) {
  if (!op_util::lanes_fit<N>(in, count, 8 * sizeof(T) - k)) return false;
  for (size_t j = 0; j < count; ++j) {
    store_le<T>(out + j * sizeof(T),
                static_cast<T>(T{load_le<N>(in + j * sizeof(N))} << k));
  }
  return true;
}

class low_zero_op final : public op_def {
 public:
  opcode code() const override { return opcode::low_zero; }
  std::string_view name() const override { return "low_zero"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_valid_width(in);
    op_util::expect_params(n, 1, "low_zero takes one parameter (k)");
    uint64_t const k = n.params[0];
    fail_if(k == 0 || k >= 8u * in.width, errc::bad_program,
            "low_zero: k must be in 1 .. 8 * width - 1");
    unsigned const bits = 8 * in.width - static_cast<unsigned>(k);
    return {op_util::uint_type(op_util::narrowest_width(bits))};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const override {
    value_type const t = child_types(n, in.type)[0];
    unsigned const k = static_cast<unsigned>(n.params[0]);
    size_t const count = in.count();
    stream narrow = op_util::make_stream(count * t.width, t);
    op_util::with_lane_pair(
        in.type.width, t.width, [&]<typename T, typename N>() {
          encode_lanes<T, N>(in.data.data(), count, k, narrow.data.data());
        });
    out.push_back(std::move(narrow));
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    value_type const t = child_types(n, in)[0];
    return {op_util::element_count(out_size, in) * t.width};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const override {
    value_type const t = child_types(n, in)[0];
    unsigned const k = static_cast<unsigned>(n.params[0]);
    size_t const count = op_util::element_count(out_size, in);
    op_util::expect_children(children, {count * t.width}, name());
    op_util::with_lane_pair(in.width, t.width, [&]<typename T, typename N>() {
      fail_if(!decode_lanes<T, N>(children[0].data.data(), count, k, out),
              errc::corrupt, "low_zero: value wider than its bits");
    });
  }
};

}  // namespace

op_def const& low_zero_op_def() {
  static low_zero_op const instance;
  return instance;
}

}  // namespace brevis::codec
