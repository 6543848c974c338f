// low_zero(k): elems<uW> whose low k bits are all zero -> value >> k, in the
// narrowest lane holding the remaining 8W - k bits (meaning uint). Captures
// fp32 upcast from bf16 (k = 16) or from fp16 (k = 13). The encoder throws
// errc::domain when some element has a nonzero low bit; the decoder rejects
// values that do not fit in 8W - k bits.
#include <vector>

#include "codec/dsl/operator.h"
#include "codec/ops/lane_width.h"

namespace brevis::codec {
namespace {

template <typename T, typename N>
void encode_lanes(uint8_t const* in, size_t count, unsigned k, uint8_t* out) {
  T const low = static_cast<T>(lanes::low_mask(k));
  T bad = 0;  // OR of the low bits: one branch after the loop
  for (size_t j = 0; j < count; ++j)
    bad |= load_le<T>(in + j * sizeof(T)) & low;
  fail_if(bad != 0, errc::domain, "low_zero: some low bit is set");
  for (size_t j = 0; j < count; ++j) {
    store_le<N>(out + j * sizeof(N),
                static_cast<N>(load_le<T>(in + j * sizeof(T)) >> k));
  }
}

template <typename T, typename N>
void decode_lanes(uint8_t const* in, size_t count, unsigned k, uint8_t* out) {
  N const high = static_cast<N>(~lanes::low_mask(8 * sizeof(T) - k));
  N bad = 0;
  for (size_t j = 0; j < count; ++j)
    bad |= load_le<N>(in + j * sizeof(N)) & high;
  fail_if(bad != 0, errc::corrupt, "low_zero: value wider than its bits");
  for (size_t j = 0; j < count; ++j) {
    store_le<T>(out + j * sizeof(T),
                static_cast<T>(T{load_le<N>(in + j * sizeof(N))} << k));
  }
}

class low_zero_op final : public op_def {
 public:
  opcode code() const override { return opcode::low_zero; }
  std::string_view name() const override { return "low_zero"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    lanes::expect_valid_width(in);
    lanes::expect_params(n, 1, "low_zero takes one parameter (k)");
    uint64_t const k = n.params[0];
    fail_if(k == 0 || k >= 8u * in.width, errc::bad_program,
            "low_zero: k must be in 1 .. 8 * width - 1");
    unsigned const bits = 8 * in.width - static_cast<unsigned>(k);
    return {value_type{lanes::narrowest_width(bits), meaning::uint}};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const override {
    value_type const t = child_types(n, in.type)[0];
    unsigned const k = static_cast<unsigned>(n.params[0]);
    size_t const count = in.count();
    stream narrow{bytes(count * t.width), t};
    dispatch(in.type.width, t.width, [&]<typename T, typename N>() {
      encode_lanes<T, N>(in.data.data(), count, k, narrow.data.data());
    });
    out.push_back(std::move(narrow));
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    value_type const t = child_types(n, in)[0];
    return {lanes::element_count(out_size, in) * t.width};
  }

  void decode(node const& n, value_type in, std::span<stream const> children,
              size_t out_size, byte_view, uint8_t* out) const override {
    value_type const t = child_types(n, in)[0];
    unsigned const k = static_cast<unsigned>(n.params[0]);
    size_t const count = lanes::element_count(out_size, in);
    fail_if(children.size() != 1 || children[0].data.size() != count * t.width,
            errc::corrupt, "low_zero child size does not match");
    dispatch(in.width, t.width, [&]<typename T, typename N>() {
      decode_lanes<T, N>(children[0].data.data(), count, k, out);
    });
  }

 private:
  // Calls f<T, N>() for the input lane T and the narrower-or-equal lane N.
  template <typename F>
  static void dispatch(unsigned width, unsigned narrow, F&& f) {
    lanes::with_lane(width, [&]<typename T>() {
      lanes::with_lane(narrow, [&]<typename N>() {
        if constexpr (sizeof(N) <= sizeof(T)) {
          f.template operator()<T, N>();
        } else {
          fail(errc::bad_program, "low_zero: lane wider than its input");
        }
      });
    });
  }
};

}  // namespace

op_def const& low_zero_op_def() {
  static low_zero_op const instance;
  return instance;
}

}  // namespace brevis::codec
