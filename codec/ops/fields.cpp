// fields: splits float elements into sign (u8, 0 or 1), exponent and mantissa
// streams, each in the narrowest lane that holds it. The exponent carries
// nearly all the redundancy of trained weights; apart, each field gets a leaf
// suited to it. Decode checks every field fits its bits: a corrupt payload
// must fail, not silently produce other floats.
#include "codec/core/target_clones.h"
#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

// Bit layout of a float format and the lane types of its fields.
template <typename Word, typename Exp, typename Man, unsigned EBits,
          unsigned MBits>
struct layout {
  using word = Word;
  using exp = Exp;
  using man = Man;
  static constexpr unsigned ebits = EBits;
  static constexpr unsigned mbits = MBits;
};

using bf16_layout = layout<uint16_t, uint8_t, uint8_t, 8, 7>;
using fp16_layout = layout<uint16_t, uint8_t, uint16_t, 5, 10>;
using fp32_layout = layout<uint32_t, uint8_t, uint32_t, 8, 23>;
using fp64_layout = layout<uint64_t, uint16_t, uint64_t, 11, 52>;
using f8e4m3_layout = layout<uint8_t, uint8_t, uint8_t, 4, 3>;
using f8e5m2_layout = layout<uint8_t, uint8_t, uint8_t, 5, 2>;
// The search (float_mantissa_bits) costs the same fields.
static_assert(bf16_layout::mbits == float_mantissa_bits(meaning::bf16) &&
              fp16_layout::mbits == float_mantissa_bits(meaning::fp16) &&
              fp32_layout::mbits == float_mantissa_bits(meaning::fp32) &&
              fp64_layout::mbits == float_mantissa_bits(meaning::fp64) &&
              f8e4m3_layout::mbits == float_mantissa_bits(meaning::f8e4m3) &&
              f8e5m2_layout::mbits == float_mantissa_bits(meaning::f8e5m2));

/// Calls f.template operator()<L>() with L the layout of float meaning m.
template <typename F>
decltype(auto) with_layout(meaning m, F&& f) {
  switch (m) {
    case meaning::bf16:
      return f.template operator()<bf16_layout>();
    case meaning::fp16:
      return f.template operator()<fp16_layout>();
    case meaning::fp32:
      return f.template operator()<fp32_layout>();
    case meaning::fp64:
      return f.template operator()<fp64_layout>();
    case meaning::f8e4m3:
      return f.template operator()<f8e4m3_layout>();
    case meaning::f8e5m2:
      return f.template operator()<f8e5m2_layout>();
    default:
      break;
  }
  fail(errc::bad_program, "fields needs a float input");
}

// Arithmetic stays in the element's own width so that the loops vectorize
// with as many lanes as possible (every field fits in it).
template <typename L>
void split(uint8_t const* in, size_t count, uint8_t* sign, uint8_t* exp,
           uint8_t* man) {
  using W = typename L::word;
  using E = typename L::exp;
  using M = typename L::man;
  constexpr W emask = static_cast<W>((uint64_t{1} << L::ebits) - 1);
  constexpr W mmask = static_cast<W>((uint64_t{1} << L::mbits) - 1);
  for (size_t i = 0; i < count; ++i) {
    W const x = load_le<W>(in + i * sizeof(W));
    sign[i] = static_cast<uint8_t>(x >> (L::ebits + L::mbits));
    store_le<E>(exp + i * sizeof(E), static_cast<E>((x >> L::mbits) & emask));
    store_le<M>(man + i * sizeof(M), static_cast<M>(x & mmask));
  }
}

// Decoding runs this at every chunk: an AVX2 clone (chosen at load time)
// does twice the lanes of the portable SSE2 build. Returns false when some
// field is out of range (clones must not throw: GCC 12 then terminates).
template <typename L>
BREVIS_AVX2_CLONES bool join(uint8_t const* sign, uint8_t const* exp,
                             uint8_t const* man, size_t count, uint8_t* out) {
  using W = typename L::word;
  using E = typename L::exp;
  using M = typename L::man;
  // Out-of-range bits are collected and checked once after the loop, which
  // keeps the loop branch-free (the output is discarded when it throws).
  W bad = 0;
  for (size_t i = 0; i < count; ++i) {
    W const s = sign[i];
    W const e = load_le<E>(exp + i * sizeof(E));
    W const m = load_le<M>(man + i * sizeof(M));
    bad = static_cast<W>(bad | (s >> 1) | (e >> L::ebits) | (m >> L::mbits));
    W const x =
        static_cast<W>((s << (L::ebits + L::mbits)) | (e << L::mbits) | m);
    store_le<W>(out + i * sizeof(W), x);
  }
  return bad == 0;
}

class fields_op final : public op_def {
 public:
  opcode code() const override { return opcode::fields; }
  std::string_view name() const override { return "fields"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 0, "fields takes no parameters");
    fail_if(!is_float(in.kind), errc::bad_program,
            "fields needs a float input");
    fail_if(in.width != meaning_width(in.kind), errc::bad_program,
            "fields input width does not match its float format");
    return with_layout(in.kind, []<typename L>() {
      return std::vector<value_type>{
          op_util::uint_type(1), op_util::uint_type(sizeof(typename L::exp)),
          op_util::uint_type(sizeof(typename L::man))};
    });
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes& side) const override {
    encode_view(n, in.data, in.type, out, side);
  }

  void encode_view(node const& n, byte_view in, value_type type,
                   std::vector<stream>& out, bytes&) const override {
    std::vector<value_type> const types = child_types(n, type);
    size_t const count = op_util::element_count(in.size(), type);
    stream sign = op_util::make_stream(count, types[0]);
    stream exp = op_util::make_stream(count * types[1].width, types[1]);
    stream man = op_util::make_stream(count * types[2].width, types[2]);
    with_layout(type.kind, [&]<typename L>() {
      split<L>(in.data(), count, sign.data.data(), exp.data.data(),
               man.data.data());
    });
    out.push_back(std::move(sign));
    out.push_back(std::move(exp));
    out.push_back(std::move(man));
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    return {count, count * types[1].width, count * types[2].width};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    op_util::expect_children(
        children, {count, count * types[1].width, count * types[2].width},
        name());
    with_layout(in.kind, [&]<typename L>() {
      fail_if(!join<L>(children[0].data.data(), children[1].data.data(),
                       children[2].data.data(), count, out),
              errc::corrupt, "float field out of range");
    });
  }
};

}  // namespace

op_def const& fields_op_def() {
  static fields_op const instance;
  return instance;
}

}  // namespace brevis::codec
