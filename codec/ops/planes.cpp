// planes: splits elements of N bytes into N byte streams, plane k holding
// byte k (little-endian) of every element. High bytes of floats (sign and
// exponent) are far more predictable than low ones; grouped, a byte-wise
// coder sees that.
#include <array>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

// Elements are moved through small local tiles so that the compiler knows the
// planes do not alias each other or the input, and vectorizes the shuffles.
constexpr size_t tile = 64;

template <size_t N>
void split(uint8_t const* in, size_t count, std::array<uint8_t*, N> planes) {
  size_t i = 0;
  for (; i + tile <= count; i += tile) {
    uint8_t src[tile * N];
    uint8_t dst[N][tile];
    std::memcpy(src, in + i * N, sizeof(src));
    for (size_t j = 0; j < tile; ++j) {
      for (size_t k = 0; k < N; ++k) dst[k][j] = src[j * N + k];
    }
    for (size_t k = 0; k < N; ++k) std::memcpy(planes[k] + i, dst[k], tile);
  }
  for (; i < count; ++i) {
    for (size_t k = 0; k < N; ++k) planes[k][i] = in[i * N + k];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) inline __m256i load256(uint8_t const* p) {
  return _mm256_loadu_si256(reinterpret_cast<__m256i const*>(p));
}
__attribute__((target("avx2"))) inline void store256(uint8_t* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

// Decoding interleaves 2 or 4 planes (fp16/bf16, fp32) at every chunk;
// unpacks of 32 elements at a time run several times faster than the tiles
// (the portable build is SSE2 only). Returns the elements done.
template <size_t N>
__attribute__((target("avx2"))) size_t join_avx2(
    std::array<uint8_t const*, N> planes, size_t count, uint8_t* out) {
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    // Unpacks work within 128-bit halves: elements 0-7 and 16-23 in the
    // low unpack, 8-15 and 24-31 in the high one; the permutes reorder.
    __m256i const a = load256(planes[0] + i), b = load256(planes[1] + i);
    __m256i const ab_lo = _mm256_unpacklo_epi8(a, b);
    __m256i const ab_hi = _mm256_unpackhi_epi8(a, b);
    if constexpr (N == 2) {
      store256(out + 2 * i, _mm256_permute2x128_si256(ab_lo, ab_hi, 0x20));
      store256(out + 2 * i + 32, _mm256_permute2x128_si256(ab_lo, ab_hi, 0x31));
    } else {
      __m256i const c = load256(planes[2] + i), d = load256(planes[3] + i);
      __m256i const cd_lo = _mm256_unpacklo_epi8(c, d);
      __m256i const cd_hi = _mm256_unpackhi_epi8(c, d);
      __m256i const r0 = _mm256_unpacklo_epi16(ab_lo, cd_lo);  // 0-3, 16-19
      __m256i const r1 = _mm256_unpackhi_epi16(ab_lo, cd_lo);  // 4-7, 20-23
      __m256i const r2 = _mm256_unpacklo_epi16(ab_hi, cd_hi);  // 8-11, 24-27
      __m256i const r3 = _mm256_unpackhi_epi16(ab_hi, cd_hi);  // 12-15, 28-31
      store256(out + 4 * i, _mm256_permute2x128_si256(r0, r1, 0x20));
      store256(out + 4 * i + 32, _mm256_permute2x128_si256(r2, r3, 0x20));
      store256(out + 4 * i + 64, _mm256_permute2x128_si256(r0, r1, 0x31));
      store256(out + 4 * i + 96, _mm256_permute2x128_si256(r2, r3, 0x31));
    }
  }
  return i;
}
#endif

template <size_t N>
void join(std::array<uint8_t const*, N> planes, size_t count, uint8_t* out) {
  size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (N == 2 || N == 4) {
    static bool const avx2 = __builtin_cpu_supports("avx2");
    if (avx2) i = join_avx2<N>(planes, count, out);
  }
#endif
  for (; i + tile <= count; i += tile) {
    uint8_t src[N][tile];
    uint8_t dst[tile * N];
    for (size_t k = 0; k < N; ++k) std::memcpy(src[k], planes[k] + i, tile);
    for (size_t j = 0; j < tile; ++j) {
      for (size_t k = 0; k < N; ++k) dst[j * N + k] = src[k][j];
    }
    std::memcpy(out + i * N, dst, sizeof(dst));
  }
  for (; i < count; ++i) {
    for (size_t k = 0; k < N; ++k) out[i * N + k] = planes[k][i];
  }
}

class planes_op final : public op_def {
 public:
  opcode code() const override { return opcode::planes; }
  std::string_view name() const override { return "planes"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_params(n, 0, "planes takes no parameters");
    op_util::expect_valid_width(in);
    fail_if(in.width < 2, errc::bad_program, "planes needs lanes of 2+ bytes");
    return std::vector<value_type>(in.width, op_util::uint_type(1));
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes& side) const override {
    encode_view(n, in.data, in.type, out, side);
  }

  void encode_view(node const& n, byte_view in, value_type type,
                   std::vector<stream>& out, bytes&) const override {
    std::vector<value_type> const types = child_types(n, type);
    size_t const count = op_util::element_count(in.size(), type);
    size_t const first = out.size();
    for (value_type t : types) out.push_back(op_util::make_stream(count, t));
    op_util::with_lane(type.width, [&]<typename T>() {
      constexpr size_t N = sizeof(T);
      std::array<uint8_t*, N> planes;
      for (size_t k = 0; k < N; ++k) planes[k] = out[first + k].data.data();
      if constexpr (N > 1) split<N>(in.data(), count, planes);
    });
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    return std::vector<size_t>(types.size(), count);
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    op_util::expect_children(children, std::vector<size_t>(types.size(), count),
                             name());
    op_util::with_lane(in.width, [&]<typename T>() {
      constexpr size_t N = sizeof(T);
      std::array<uint8_t const*, N> planes;
      for (size_t k = 0; k < N; ++k) planes[k] = children[k].data.data();
      if constexpr (N > 1) join<N>(planes, count, out);
    });
  }
};

}  // namespace

op_def const& planes_op_def() {
  static planes_op const instance;
  return instance;
}

}  // namespace brevis::codec
