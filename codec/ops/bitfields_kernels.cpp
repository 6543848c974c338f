#include "codec/ops/bitfields_kernels.h"

#include <atomic>

#include "codec/core/bytes.h"

namespace brevis::codec::bitfields_kernels {
namespace {

std::atomic<unsigned> cap{2};

// The loops, written once and compiled per instruction set (the wrappers
// below): plain 16-bit arithmetic the compiler vectorizes.
template <typename L, typename H, unsigned LowBits>
[[gnu::always_inline]] inline void split_fixed(uint8_t const* in, size_t count,
                                               uint8_t* low, uint8_t* high) {
  constexpr uint16_t mask = static_cast<uint16_t>((1u << LowBits) - 1);
  for (size_t i = 0; i < count; ++i) {
    uint16_t const x = load_le<uint16_t>(in + 2 * i);
    store_le<L>(low + i * sizeof(L), static_cast<L>(x & mask));
    store_le<H>(high + i * sizeof(H), static_cast<H>(x >> LowBits));
  }
}

// A variable right shift GCC widens to 32-bit lanes: bf16's and fp16's
// splits (7 and 10 low bits) get constant ones.
template <typename L, typename H>
[[gnu::always_inline]] inline void split_body(uint8_t const* in, size_t count,
                                              unsigned low_bits, uint8_t* low,
                                              uint8_t* high) {
  if (low_bits == 7) return split_fixed<L, H, 7>(in, count, low, high);
  if (low_bits == 10) return split_fixed<L, H, 10>(in, count, low, high);
  uint16_t const mask = static_cast<uint16_t>((1u << low_bits) - 1);
  for (size_t i = 0; i < count; ++i) {
    uint16_t const x = load_le<uint16_t>(in + 2 * i);
    store_le<L>(low + i * sizeof(L), static_cast<L>(x & mask));
    store_le<H>(high + i * sizeof(H), static_cast<H>(x >> low_bits));
  }
}

// Out-of-range bits are OR-ed together and checked once after the loop,
// which keeps it branch-free (the output is discarded when they are set).
template <typename L, typename H>
[[gnu::always_inline]] inline bool join_body(uint8_t const* low,
                                             uint8_t const* high, size_t count,
                                             unsigned low_bits, uint8_t* out) {
  // Masks rather than shifts for the check: the loop stays in 16-bit lanes.
  uint16_t const low_over = static_cast<uint16_t>(~((1u << low_bits) - 1));
  uint16_t const high_over =
      static_cast<uint16_t>(~((1u << (16 - low_bits)) - 1));
  // b << low_bits as a 16-bit product (a variable shift GCC widens to 32).
  uint16_t const scale = static_cast<uint16_t>(1u << low_bits);
  uint16_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    uint16_t const a = load_le<L>(low + i * sizeof(L));
    uint16_t const b = load_le<H>(high + i * sizeof(H));
    bad = static_cast<uint16_t>(bad | (a & low_over) | (b & high_over));
    store_le<uint16_t>(out + 2 * i, static_cast<uint16_t>(
                                        a | static_cast<uint16_t>(b * scale)));
  }
  return bad == 0;
}

template <typename L, typename H>
void split_portable(uint8_t const* in, size_t count, unsigned low_bits,
                    uint8_t* low, uint8_t* high) {
  split_body<L, H>(in, count, low_bits, low, high);
}
template <typename L, typename H>
[[gnu::target("avx2")]] void split_avx2(uint8_t const* in, size_t count,
                                        unsigned low_bits, uint8_t* low,
                                        uint8_t* high) {
  split_body<L, H>(in, count, low_bits, low, high);
}
template <typename L, typename H>
[[gnu::target("avx512f,avx512bw,avx512vl")]] void split_avx512(
    uint8_t const* in, size_t count, unsigned low_bits, uint8_t* low,
    uint8_t* high) {
  split_body<L, H>(in, count, low_bits, low, high);
}

template <typename L, typename H>
bool join_portable(uint8_t const* low, uint8_t const* high, size_t count,
                   unsigned low_bits, uint8_t* out) {
  return join_body<L, H>(low, high, count, low_bits, out);
}
template <typename L, typename H>
[[gnu::target("avx2")]] bool join_avx2(uint8_t const* low, uint8_t const* high,
                                       size_t count, unsigned low_bits,
                                       uint8_t* out) {
  return join_body<L, H>(low, high, count, low_bits, out);
}
template <typename L, typename H>
[[gnu::target("avx512f,avx512bw,avx512vl")]] bool join_avx512(
    uint8_t const* low, uint8_t const* high, size_t count, unsigned low_bits,
    uint8_t* out) {
  return join_body<L, H>(low, high, count, low_bits, out);
}

// 2 AVX-512 (with byte and word instructions), 1 AVX2, 0 neither; capped.
unsigned level() {
  static unsigned const cpu =
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")
          ? 2
      : __builtin_cpu_supports("avx2") ? 1
                                       : 0;
  unsigned const c = cap.load(std::memory_order_relaxed);
  return cpu < c ? cpu : c;
}

/// Calls f.template operator()<L, H>() with the lane types of the widths.
template <typename F>
decltype(auto) with_lanes(unsigned low_width, unsigned high_width, F&& f) {
  if (low_width == 1 && high_width == 1) {
    return f.template operator()<uint8_t, uint8_t>();
  }
  if (low_width == 1) return f.template operator()<uint8_t, uint16_t>();
  if (high_width == 1) return f.template operator()<uint16_t, uint8_t>();
  return f.template operator()<uint16_t, uint16_t>();
}

}  // namespace

void set_cap(unsigned level) { cap.store(level, std::memory_order_relaxed); }

void split16(uint8_t const* in, size_t count, unsigned low_bits,
             unsigned low_width, uint8_t* low, unsigned high_width,
             uint8_t* high) {
  unsigned const l = level();
  with_lanes(low_width, high_width, [&]<typename L, typename H>() {
    if (l >= 2) return split_avx512<L, H>(in, count, low_bits, low, high);
    if (l >= 1) return split_avx2<L, H>(in, count, low_bits, low, high);
    split_portable<L, H>(in, count, low_bits, low, high);
  });
}

bool join16(uint8_t const* low, unsigned low_width, uint8_t const* high,
            unsigned high_width, size_t count, unsigned low_bits,
            uint8_t* out) {
  unsigned const l = level();
  return with_lanes(low_width, high_width, [&]<typename L, typename H>() {
    if (l >= 2) return join_avx512<L, H>(low, high, count, low_bits, out);
    if (l >= 1) return join_avx2<L, H>(low, high, count, low_bits, out);
    return join_portable<L, H>(low, high, count, low_bits, out);
  });
}

}  // namespace brevis::codec::bitfields_kernels
