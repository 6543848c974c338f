#include "codec/leaves/bits_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define BREVIS_BITS_X86 1
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "codec/core/bytes.h"

namespace brevis::codec::bits_kernels {
namespace {

std::atomic<unsigned> kernel_cap{3};

uint64_t low_mask(unsigned bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

uint64_t load_lane(uint8_t const* p, unsigned width) {
  switch (width) {
    case 1:
      return *p;
    case 2:
      return load_le<uint16_t>(p);
    case 4:
      return load_le<uint32_t>(p);
    default:
      return load_le<uint64_t>(p);
  }
}

void store_lane(uint8_t* p, unsigned width, uint64_t v) {
  switch (width) {
    case 1:
      *p = static_cast<uint8_t>(v);
      return;
    case 2:
      return store_le<uint16_t>(p, static_cast<uint16_t>(v));
    case 4:
      return store_le<uint32_t>(p, static_cast<uint32_t>(v));
    default:
      return store_le<uint64_t>(p, v);
  }
}

// Up to 8 bytes at `p` (fewer where the payload ends), little-endian.
uint64_t load_upto8(uint8_t const* p, size_t avail) {
  if (avail >= 8) return load_le<uint64_t>(p);
  uint64_t v = 0;
  for (size_t k = 0; k < avail; ++k) v |= uint64_t{p[k]} << (8 * k);
  return v;
}

// The field at bit `pos` of the `size` bytes at `in`; its bits lie inside.
uint64_t read_field(uint8_t const* in, size_t size, uint64_t pos,
                    unsigned bits) {
  size_t const at = static_cast<size_t>(pos >> 3);
  unsigned const shift = static_cast<unsigned>(pos & 7);
  uint64_t v = load_upto8(in + at, size - at) >> shift;
  if (shift + bits > 64) v |= uint64_t{in[at + 8]} << (64 - shift);
  return v & low_mask(bits);
}

// Values from `first` on, one at a time: every width and b, and the tails.
void unpack_from(uint8_t const* in, size_t size, size_t first, size_t count,
                 unsigned bits, unsigned width, uint8_t* out) {
  for (size_t i = first; i < count; ++i) {
    store_lane(out + i * width, width,
               read_field(in, size, uint64_t{i} * bits, bits));
  }
}

// 8-bit lanes, 8 values (b bytes) a step, from one 8-byte load: plain
// shifts the compiler unrolls. Returns the values done.
size_t unpack8_portable(uint8_t const* in, size_t size, size_t count,
                        unsigned bits, uint8_t* out) {
  uint8_t const mask = static_cast<uint8_t>(low_mask(bits));
  size_t g = 0;
  for (; (g + 1) * 8 <= count && g * bits + 8 <= size; ++g) {
    uint64_t const x = load_le<uint64_t>(in + g * bits);
    for (unsigned t = 0; t < 8; ++t) {
      out[g * 8 + t] = static_cast<uint8_t>((x >> (t * bits)) & mask);
    }
  }
  return g * 8;
}

#ifdef BREVIS_BITS_X86
// The same with one pdep a step.
[[gnu::target("bmi2")]] size_t unpack8_bmi2(uint8_t const* in, size_t size,
                                            size_t count, unsigned bits,
                                            uint8_t* out) {
  uint64_t const mask = 0x0101010101010101ull * low_mask(bits);
  size_t g = 0;
  for (; (g + 1) * 8 <= count && g * bits + 8 <= size; ++g) {
    store_le<uint64_t>(out + g * 8,
                       _pdep_u64(load_le<uint64_t>(in + g * bits), mask));
  }
  return g * 8;
}

// Two groups of 8 values (b bytes each, from `p`) into the 16-bit lanes'
// high bytes, shifted down: see unpack8_avx2.
[[gnu::target("avx2")]] inline __m256i two_groups(uint8_t const* p,
                                                  unsigned bits,
                                                  __m256i shuffle,
                                                  __m256i multiply) {
  __m128i const lo = _mm_loadu_si128(reinterpret_cast<__m128i const*>(p));
  __m128i const hi =
      _mm_loadu_si128(reinterpret_cast<__m128i const*>(p + bits));
  __m256i const x = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  return _mm256_srli_epi16(
      _mm256_mullo_epi16(_mm256_shuffle_epi8(x, shuffle), multiply), 8);
}

// 32 values (4b bytes) a step, for CPUs without fast pdep (Zen 1 and 2).
// Each 128-bit half holds one group of 8 values (b bytes): vpshufb puts the
// two bytes around value t's bit offset o_t in its 16-bit lane, vpmullw by
// 2^(8 - o_t % 8) moves the value's bits to the lane's high byte, and a
// shift, a pack and a mask leave it in a byte.
[[gnu::target("avx2")]] size_t unpack8_avx2(uint8_t const* in, size_t size,
                                            size_t count, unsigned bits,
                                            uint8_t* out) {
  alignas(32) uint8_t pick[32];
  alignas(32) uint16_t scale[16];
  for (unsigned half = 0; half < 2; ++half) {
    for (unsigned t = 0; t < 8; ++t) {
      unsigned const o = bits * t;
      pick[16 * half + 2 * t] = static_cast<uint8_t>(o / 8);
      pick[16 * half + 2 * t + 1] = static_cast<uint8_t>(o / 8 + 1);
      scale[8 * half + t] = static_cast<uint16_t>(1u << (8 - o % 8));
    }
  }
  __m256i const shuffle =
      _mm256_load_si256(reinterpret_cast<__m256i const*>(pick));
  __m256i const multiply =
      _mm256_load_si256(reinterpret_cast<__m256i const*>(scale));
  __m256i const mask = _mm256_set1_epi8(static_cast<char>(low_mask(bits)));
  size_t const group = bits;  // bytes of 8 values
  size_t g = 0;
  // Each step reads 16 bytes from its last group's start: all in the payload.
  for (; (g + 1) * 32 <= count && (4 * g + 3) * group + 16 <= size; ++g) {
    uint8_t const* p = in + 4 * g * group;
    __m256i const a = two_groups(p, bits, shuffle, multiply);  // groups 0, 1
    __m256i const b = two_groups(p + 2 * group, bits, shuffle, multiply);
    // packus interleaves the halves (0, 2 | 1, 3); vpermq restores order.
    __m256i const v = _mm256_and_si256(
        _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), 0xd8), mask);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + g * 32), v);
  }
  return g * 32;
}

// GCC 12 warns inside its own AVX-512 headers (their "undefined" vectors);
// clang (the fuzz build) has no such warning, and would warn of the pragma.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// 64 values (8b bytes) a step: each qword gathers its 8 values' b bytes
// (vpermb), then vpmultishiftqb picks the byte at every value's bit offset.
[[gnu::target("avx512f,avx512bw,avx512vbmi")]] size_t unpack8_vbmi(
    uint8_t const* in, size_t count, unsigned bits, uint8_t* out) {
  alignas(64) uint8_t index[64];
  alignas(64) uint8_t offset[64];
  for (unsigned j = 0; j < 8; ++j) {
    for (unsigned t = 0; t < 8; ++t) {
      index[8 * j + t] = static_cast<uint8_t>(bits * j + t);
      offset[8 * j + t] = static_cast<uint8_t>(bits * t);
    }
  }
  __m512i const gather = _mm512_load_si512(index);
  __m512i const shifts = _mm512_load_si512(offset);
  __m512i const mask = _mm512_set1_epi8(static_cast<char>(low_mask(bits)));
  __mmask64 const load_mask =
      bits == 8 ? ~__mmask64{0} : (__mmask64{1} << (8 * bits)) - 1;
  size_t g = 0;
  for (; (g + 1) * 64 <= count; ++g) {
    __m512i const x = _mm512_maskz_loadu_epi8(load_mask, in + g * 8 * bits);
    __m512i const q = _mm512_permutexvar_epi8(gather, x);
    __m512i const v =
        _mm512_and_si512(_mm512_multishift_epi64_epi8(shifts, q), mask);
    _mm512_storeu_si512(out + g * 64, v);
  }
  return g * 64;
}
#pragma GCC diagnostic pop

#endif  // BREVIS_BITS_X86

// Values from `first` on, one at a time, into a zeroed `out`. Returns the
// OR of the bits above `bits` of every value.
uint64_t pack_from(uint8_t const* in, unsigned width, size_t first,
                   size_t count, unsigned bits, uint8_t* out) {
  uint64_t const mask = low_mask(bits);
  uint64_t over = 0;
  for (size_t i = first; i < count; ++i) {
    uint64_t const v = load_lane(in + i * width, width);
    over |= v & ~mask;
    uint64_t const pos = uint64_t{i} * bits;
    size_t const at = static_cast<size_t>(pos >> 3);
    unsigned const shift = static_cast<unsigned>(pos & 7);
    // The field spans at most 9 bytes from `at`.
    unsigned const span = (shift + bits + 7) / 8;
    uint64_t const low = (v & mask) << shift;
    for (unsigned k = 0; k < span && k < 8; ++k) {
      out[at + k] |= static_cast<uint8_t>(low >> (8 * k));
    }
    if (span > 8) {
      out[at + 8] |= static_cast<uint8_t>((v & mask) >> (64 - shift));
    }
  }
  return over;
}

// 8-bit lanes, 8 values a step into b bytes. Returns the values done; ORs
// their bits above `bits` into `over`.
size_t pack8_portable(uint8_t const* in, size_t count, unsigned bits,
                      uint8_t* out, uint64_t& over) {
  uint64_t const mask = 0x0101010101010101ull * low_mask(bits);
  size_t g = 0;
  uint64_t bad = 0;
  for (; (g + 1) * 8 <= count; ++g) {
    uint64_t const x = load_le<uint64_t>(in + g * 8);
    bad |= x & ~mask;
    uint64_t packed = 0;
    for (unsigned t = 0; t < 8; ++t) {
      packed |= ((x >> (8 * t)) & 0xff & low_mask(bits)) << (t * bits);
    }
    uint8_t word[8];
    store_le<uint64_t>(word, packed);
    std::memcpy(out + g * bits, word, bits);
  }
  over |= bad;
  return g * 8;
}

#ifdef BREVIS_BITS_X86
[[gnu::target("bmi2")]] size_t pack8_bmi2(uint8_t const* in, size_t count,
                                          unsigned bits, uint8_t* out,
                                          uint64_t& over) {
  uint64_t const mask = 0x0101010101010101ull * low_mask(bits);
  size_t g = 0;
  uint64_t bad = 0;
  for (; (g + 1) * 8 <= count; ++g) {
    uint64_t const x = load_le<uint64_t>(in + g * 8);
    bad |= x & ~mask;
    uint8_t word[8];
    store_le<uint64_t>(word, _pext_u64(x, mask));
    std::memcpy(out + g * bits, word, bits);
  }
  over |= bad;
  return g * 8;
}
#endif  // BREVIS_BITS_X86

// The unpacking kernels, fastest first where the CPU has them: 3 VBMI (with
// BMI2), 2 BMI2 where pdep is fast, 1 AVX2, 0 portable; capped. Unpacking
// 7-bit values (brevis_program_decode_bench): on Zen 5, portable 0.36 ns a
// value, pdep 0.07, VBMI 0.03; on Zen 2 (pdep/pext in microcode, hundreds
// of cycles for these masks), portable 0.47, AVX2 0.065. Packing has no
// AVX2 path: below 2 it takes the portable loop. (x86 only: elsewhere only
// the portable loops exist.)
#ifdef BREVIS_BITS_X86
unsigned level() {
  // Bit k set: the CPU has level k's instructions (and, for 2 and 3, fast
  // pdep). A cap below the CPU's best may land on a level it lacks (a CPU
  // of fast pdep without AVX2, capped to 1): then the next one down.
  static unsigned const has = [] {
    bool const fast_pdep = __builtin_cpu_supports("bmi2") &&
                           !__builtin_cpu_is("znver1") &&
                           !__builtin_cpu_is("znver2");
    bool const vbmi = __builtin_cpu_supports("avx512vbmi") &&
                      __builtin_cpu_supports("avx512bw");
    return 1u | (__builtin_cpu_supports("avx2") ? 2u : 0u) |
           (fast_pdep ? 4u : 0u) | (fast_pdep && vbmi ? 8u : 0u);
  }();
  unsigned const c = std::min(kernel_cap.load(std::memory_order_relaxed), 3u);
  return static_cast<unsigned>(std::bit_width(has & ((2u << c) - 1))) - 1;
}
#endif  // BREVIS_BITS_X86

}  // namespace

size_t packed_size(size_t count, unsigned bits) noexcept {
  return count / 8 * bits + ((count % 8) * bits + 7) / 8;
}

bool pack(uint8_t const* in, unsigned width, size_t count, unsigned bits,
          uint8_t* out) noexcept {
  size_t const size = packed_size(count, bits);
  if (size > 0) std::memset(out, 0, size);
  uint64_t over = 0;
  size_t done = 0;
  if (width == 1) {
#ifdef BREVIS_BITS_X86
    done = level() >= 2 ? pack8_bmi2(in, count, bits, out, over)
                        : pack8_portable(in, count, bits, out, over);
#else
    done = pack8_portable(in, count, bits, out, over);
#endif
  }
  over |= pack_from(in, width, done, count, bits, out);
  return over == 0;
}

bool unpack(uint8_t const* in, size_t count, unsigned bits, unsigned width,
            uint8_t* out) noexcept {
  size_t const size = packed_size(count, bits);
  size_t done = 0;
  if (width == 1) {
#ifdef BREVIS_BITS_X86
    unsigned const l = level();
    if (l >= 3) done = unpack8_vbmi(in, count, bits, out);
    if (l == 1) done = unpack8_avx2(in, size, count, bits, out);
    // The rest of each path's groups of 8: pdep, or the portable loop.
    size_t const at = done / 8 * bits;
    done += l >= 2 ? unpack8_bmi2(in + at, size - at, count - done, bits,
                                  out + done)
                   : unpack8_portable(in + at, size - at, count - done, bits,
                                      out + done);
#else
    done = unpack8_portable(in, size, count, bits, out);
#endif
  }
  unpack_from(in, size, done, count, bits, width, out);
  unsigned const tail_bits = static_cast<unsigned>((count % 8) * bits % 8);
  return tail_bits == 0 || (in[size - 1] >> tail_bits) == 0;
}

void set_cap(unsigned limit) noexcept {
  kernel_cap.store(limit, std::memory_order_relaxed);
}

}  // namespace brevis::codec::bits_kernels
