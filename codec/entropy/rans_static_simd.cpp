#include "codec/entropy/rans_static_simd.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#define BREVIS_RANS_X86 1
#include <immintrin.h>
#endif

namespace brevis::codec::rans_static::simd {
namespace {

std::atomic<unsigned> cap{tuned};
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<tuning> tuned_for{tuning::detected};  // tests set it, as cap

unsigned allowed() { return cap.load(std::memory_order_relaxed); }
tuning kind() { return tuned_for.load(std::memory_order_relaxed); }

}  // namespace

void set_cap(unsigned level) { cap.store(level, std::memory_order_relaxed); }
void set_tuning(tuning k) { tuned_for.store(k, std::memory_order_relaxed); }

#ifdef BREVIS_RANS_X86
namespace {
bool avx2_cpu() {
  static bool const yes = __builtin_cpu_supports("avx2");
  return yes;
}

// For each mask of lanes that renormalize, the index of each lane's word
// among the words the round reads (lanes in order take consecutive words).
struct word_shuffles {
  alignas(32) uint32_t index[256][8];
  constexpr word_shuffles() : index{} {
    for (unsigned m = 0; m < 256; ++m) {
      uint32_t k = 0;
      for (unsigned j = 0; j < 8; ++j) {
        index[m][j] = k;
        k += (m >> j) & 1;
      }
    }
  }
};
constexpr word_shuffles shuffles;

// Renormalization of 8 states after a step: the lanes that fell below 2^16
// take the next 16-bit words, in lane order, and `q` moves past them.
__attribute__((target("avx2"), always_inline)) inline __m256i renormalize_avx2(
    __m256i next, uint8_t const*& q) {
  __m256i const need =
      _mm256_cmpeq_epi32(_mm256_srli_epi32(next, 16), _mm256_setzero_si256());
  auto const m =
      static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(need)));
  __m256i words = _mm256_cvtepu16_epi32(
      _mm_loadu_si128(reinterpret_cast<__m128i const*>(q)));
  words = _mm256_permutevar8x32_epi32(
      words,
      _mm256_load_si256(reinterpret_cast<__m256i const*>(shuffles.index[m])));
  q += 2 * static_cast<unsigned>(__builtin_popcount(m));
  return _mm256_blendv_epi8(
      next, _mm256_or_si256(_mm256_slli_epi32(next, 16), words), need);
}

// Gathers from a zeroed merge source. The plain intrinsics leave the
// destination's previous contents as a source, and GCC 12 picks a register
// last written on another chain: a false dependency that serialized the
// groups' gathers (AVX2 rounds ran 1.5x slower).
template <int bytes>
__attribute__((target("avx2"), always_inline)) inline __m256i gather_avx2(
    void const* base, __m256i index) {
  // Both hidden from GCC, which otherwise sees that every lane is loaded
  // and drops the source again.
  __m256i zero = _mm256_setzero_si256();
  __m256i all = _mm256_set1_epi32(-1);
  asm("" : "+x"(zero), "+x"(all));
  return _mm256_mask_i32gather_epi32(zero, static_cast<int const*>(base), index,
                                     all, bytes);
}

// How the AVX2 decode kernels look up their tables: with gathers, or with
// eight scalar loads inserted into a vector. On Zen 2 (AVX2, no AVX-512)
// the loads are faster, most where one lookup waits on another or misses
// L1 (ns a symbol, brevis_rans_static_bench: 16-bit symbols from 2^16 slots
// 1.60 -> 1.37, from 2^13 1.16 -> 0.85; compact tables, 16-bit symbols at
// 2^16 2.28 -> 1.07, 8-bit at 2^15 1.52 -> 0.85; the narrow pair 0.92 ->
// 0.76; packed slots, when first measured, as fast with gathers as with
// the loads, which the read-back below then made faster), so AMD CPUs use
// them (zen_tuned); others keep the gathers, unmeasured there.
// With `loads` the indices are read back from a store of the index
// vector; left to itself GCC reads them out of the vector instead
// (`extracts`: vpextrd, two uops each). Packed slots, one lookup a symbol,
// decode 13-17% faster from the store (wide payloads, ns a symbol: 8-bit
// at 2^10 1.04-1.06 -> 0.87-0.88, at 2^12 1.05-1.06 -> 0.87-0.88, 16-bit
// at 2^13 1.06-1.08 -> 0.91-0.92). The slot tables (two lookups at 2^15
// and 2^16, mostly in L2) and the compact ones (the second lookup's index
// is the first one's result) keep the extracts: the store's forwarding
// latency on their chains made them 10% slower (but for the compact
// tables' first lookup, decode_rounds8_avx2_impl).
enum class lookups { gathers, loads, extracts };

// How Zen's kernels look up slot tables (packed or not).
constexpr lookups zen_lookups(bool packed) {
  return packed ? lookups::loads : lookups::extracts;
}

// table[index] of each lane, zero-extended to 32 bits. Gathers read 4 bytes
// at each entry: tables of narrower entries are padded to allow it.
template <lookups how, typename entry>
__attribute__((target("avx2"), always_inline)) inline __m256i lookup_avx2(
    entry const* table, __m256i index) {
  static_assert(std::is_unsigned_v<entry> && sizeof(entry) <= 4);
  if constexpr (how != lookups::gathers) {
    alignas(32) uint32_t at[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(at), index);
    if constexpr (how == lookups::loads) asm("" : "+m"(at));  // read back
    auto const e = [&](unsigned j) { return static_cast<int>(table[at[j]]); };
    return _mm256_setr_epi32(e(0), e(1), e(2), e(3), e(4), e(5), e(6), e(7));
  } else {
    __m256i const e = gather_avx2<sizeof(entry)>(table, index);
    if constexpr (sizeof(entry) == 4) {
      return e;
    } else {
      return _mm256_and_si256(
          e, _mm256_set1_epi32((1 << (8 * sizeof(entry))) - 1));
    }
  }
}

// The 8 lanes' values (each below 2^16) as 16-bit values, in order.
__attribute__((target("avx2"), always_inline)) inline __m128i narrow16_avx2(
    __m256i v) {
  return _mm256_castsi256_si128(
      _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08));
}

// The 16-bit values table[index] of the 8 lanes, in order.
template <lookups how>
__attribute__((target("avx2"), always_inline)) inline __m128i lookup16_avx2(
    uint16_t const* table, __m256i index) {
  if constexpr (how != lookups::gathers) {
    alignas(32) uint32_t at[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(at), index);
    if constexpr (how == lookups::loads) asm("" : "+m"(at));  // read back
    auto const e = [&](unsigned j) { return static_cast<short>(table[at[j]]); };
    return _mm_setr_epi16(e(0), e(1), e(2), e(3), e(4), e(5), e(6), e(7));
  } else {
    return narrow16_avx2(lookup_avx2<how>(table, index));
  }
}

// Stores 8 symbols (16-bit values, each below 2^(8 sizeof(sym))) as 8- or
// 16-bit values at `o`.
template <typename sym>
__attribute__((target("avx2"), always_inline)) inline void store_symbols_avx2(
    __m128i symbols, uint8_t* o) {
  if constexpr (sizeof(sym) == 2) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), symbols);
  } else {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o),
                     _mm_packus_epi16(symbols, symbols));
  }
}

// One step of 8 states from the slot tables: their symbols stored at `o`,
// the states advanced and renormalized from the words at `q`; the same
// arithmetic as the scalar loop.
template <typename sym, lookups how>
__attribute__((target("avx2"), always_inline)) inline __m256i decode_group_avx2(
    __m256i s, __m256i slot_mask, __m128i shift, uint32_t const* step_tab,
    uint16_t const* symbol_tab, uint8_t* o, uint8_t const*& q) {
  __m256i const low16 = _mm256_set1_epi32(0xffff);
  __m256i const slot = _mm256_and_si256(s, slot_mask);
  __m256i const e = lookup_avx2<how>(step_tab, slot);
  // The symbol table has one entry of padding, for gathers.
  __m128i const symbols = lookup16_avx2<how>(symbol_tab, slot);
  __m256i const next =
      _mm256_add_epi32(_mm256_mullo_epi32(_mm256_and_si256(e, low16),
                                          _mm256_srl_epi32(s, shift)),
                       _mm256_srli_epi32(e, 16));
  store_symbols_avx2<sym>(symbols, o);
  return renormalize_avx2(next, q);
}

// The fields of packed slots (coder::packed_field_bits): freq and
// slot - start of b bits each, then the symbol.
struct packed_fields {
  __m256i mask;          // 2^b - 1
  __m128i bias_shift;    // b
  __m128i symbol_shift;  // 2b
};

__attribute__((target("avx2"), always_inline)) inline packed_fields
packed_fields_of(unsigned b) {
  return {_mm256_set1_epi32(static_cast<int>((1u << b) - 1)),
          _mm_cvtsi32_si128(static_cast<int>(b)),
          _mm_cvtsi32_si128(static_cast<int>(2 * b))};
}

// The same from packed slots: one lookup yields the symbol and the step.
template <typename sym, lookups how>
__attribute__((target("avx2"), always_inline)) inline __m256i
decode_packed_group_avx2(__m256i s, __m256i slot_mask, __m128i shift,
                         uint32_t const* packed_tab, packed_fields const& f,
                         uint8_t* o, uint8_t const*& q) {
  __m256i const e =
      lookup_avx2<how>(packed_tab, _mm256_and_si256(s, slot_mask));
  __m128i const symbols = narrow16_avx2(_mm256_srl_epi32(e, f.symbol_shift));
  __m256i const next = _mm256_add_epi32(
      _mm256_mullo_epi32(_mm256_and_si256(e, f.mask),
                         _mm256_srl_epi32(s, shift)),
      _mm256_and_si256(_mm256_srl_epi32(e, f.bias_shift), f.mask));
  store_symbols_avx2<sym>(symbols, o);
  return renormalize_avx2(next, q);
}

// One step of 8 states of a stream from whichever tables it has (`f`: its
// packed fields, if packed).
template <typename sym, bool packed, lookups how>
__attribute__((target("avx2"), always_inline)) inline __m256i
decode_stream_group_avx2(__m256i s, __m256i slot_mask, __m128i shift,
                         slot_stream const& t, packed_fields const& f,
                         uint8_t* o, uint8_t const*& q) {
  if constexpr (packed) {
    return decode_packed_group_avx2<sym, how>(s, slot_mask, shift, t.packed, f,
                                              o, q);
  } else {
    return decode_group_avx2<sym, how>(s, slot_mask, shift, t.step, t.symbol, o,
                                       q);
  }
}

// Whole rounds of n_states symbols (wide_lanes, or lanes: one vector), 8
// states to a vector. Stops where fewer than a round of symbols or of the
// words a round may read remain; returns the symbols decoded.
// From packed slots if `packed_tab` is set (`packed`), else from the slot
// tables.
template <typename sym, bool packed, lookups how,
          unsigned n_states = wide_lanes>
__attribute__((target("avx2"))) size_t decode_rounds_avx2_impl(
    uint32_t* x, uint8_t const*& p, uint8_t const* end, size_t count,
    unsigned scale, uint32_t const* step_tab, uint16_t const* symbol_tab,
    uint32_t const* packed_tab, unsigned field_bits, uint8_t* out) {
  static_assert(n_states % 8 == 0);
  constexpr unsigned groups = n_states / 8;
  packed_fields const fields = packed_fields_of(field_bits);
  __m256i state[groups];
  for (unsigned g = 0; g < groups; ++g) {
    state[g] = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(x + 8 * g));
  }
  __m256i const slot_mask = _mm256_set1_epi32((1 << scale) - 1);
  __m128i const shift = _mm_cvtsi32_si128(static_cast<int>(scale));
  uint8_t const* q = p;
  size_t i = 0;
  while (count - i >= n_states &&
         static_cast<size_t>(end - q) >= 2 * n_states) {
    for (unsigned g = 0; g < groups; ++g) {
      uint8_t* const o = out + (i + 8 * g) * sizeof(sym);
      if constexpr (packed) {
        state[g] = decode_packed_group_avx2<sym, how>(
            state[g], slot_mask, shift, packed_tab, fields, o, q);
      } else {
        state[g] = decode_group_avx2<sym, how>(state[g], slot_mask, shift,
                                               step_tab, symbol_tab, o, q);
      }
    }
    i += n_states;
  }
  for (unsigned g = 0; g < groups; ++g) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 8 * g), state[g]);
  }
  p = q;
  return i;
}

// Two streams of `lanes` (8) states, a vector each: alone, a round waits on
// its lookups, then on its multiply, before the next can start (measured
// slower than the scalar loop); two independent chains fill each other's
// waits. Stops where either stream would stop alone. Only Zen runs these
// (narrow_pair_rounds), so they look up without gathers (zen_lookups).
template <typename sym_a, bool packed_a, typename sym_b, bool packed_b>
__attribute__((target("avx2"))) size_t decode_narrow_pair_avx2_impl(
    slot_stream& a, slot_stream& b) {
  static_assert(lanes == 8);
  __m256i xa = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(a.x));
  __m256i xb = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(b.x));
  __m256i const mask_a = _mm256_set1_epi32((1 << a.scale) - 1);
  __m256i const mask_b = _mm256_set1_epi32((1 << b.scale) - 1);
  __m128i const shift_a = _mm_cvtsi32_si128(static_cast<int>(a.scale));
  __m128i const shift_b = _mm_cvtsi32_si128(static_cast<int>(b.scale));
  packed_fields const fields_a = packed_fields_of(a.packed_bits);
  packed_fields const fields_b = packed_fields_of(b.packed_bits);
  uint8_t const* qa = a.p;
  uint8_t const* qb = b.p;
  size_t i = 0;
  while (a.count - i >= lanes && b.count - i >= lanes &&
         static_cast<size_t>(a.end - qa) >= 2 * lanes &&
         static_cast<size_t>(b.end - qb) >= 2 * lanes) {
    xa = decode_stream_group_avx2<sym_a, packed_a, zen_lookups(packed_a)>(
        xa, mask_a, shift_a, a, fields_a, a.out + i * sizeof(sym_a), qa);
    xb = decode_stream_group_avx2<sym_b, packed_b, zen_lookups(packed_b)>(
        xb, mask_b, shift_b, b, fields_b, b.out + i * sizeof(sym_b), qb);
    i += lanes;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.x), xa);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.x), xb);
  a.p = qa;
  b.p = qb;
  return i;
}

// The rounds of 8-bit symbols: the slot's symbol from the byte table, then
// its freq | start << 16 from the per-symbol table.
template <typename sym, lookups how>
__attribute__((target("avx2"))) size_t decode_rounds8_avx2_impl(
    uint32_t* x, uint8_t const*& p, uint8_t const* end, size_t count,
    unsigned scale, uint8_t const* symbol8, uint32_t const* freq_start,
    uint32_t const* symbol16, uint8_t* out) {
  constexpr unsigned groups = wide_lanes / 8;
  __m256i state[groups];
  for (unsigned g = 0; g < groups; ++g) {
    state[g] = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(x + 8 * g));
  }
  __m256i const slot_mask = _mm256_set1_epi32((1 << scale) - 1);
  __m256i const low16 = _mm256_set1_epi32(0xffff);
  __m128i const shift = _mm_cvtsi32_si128(static_cast<int>(scale));
  // The slots' lookup, off the chain of lookups that follows it, reads its
  // indices back from a store (on Zen 2, ns a symbol: 8-bit at 2^15
  // 1.12-1.13 -> 1.09-1.12, 16-bit at 2^16 1.54-1.58 -> 1.43-1.44).
  constexpr lookups first = how == lookups::extracts ? lookups::loads : how;
  uint8_t const* q = p;
  size_t i = 0;
  while (count - i >= wide_lanes &&
         static_cast<size_t>(end - q) >= 2 * wide_lanes) {
    for (unsigned g = 0; g < groups; ++g) {
      __m256i const s = state[g];
      __m256i const slot = _mm256_and_si256(s, slot_mask);
      // The byte table has 3 bytes of padding, for gathers.
      __m256i const symbols = lookup_avx2<first>(symbol8, slot);
      __m256i const fs = lookup_avx2<how>(freq_start, symbols);
      __m256i const next = _mm256_sub_epi32(
          _mm256_add_epi32(_mm256_mullo_epi32(_mm256_and_si256(fs, low16),
                                              _mm256_srl_epi32(s, shift)),
                           slot),
          _mm256_srli_epi32(fs, 16));
      __m256i const values =
          sizeof(sym) == 2 ? lookup_avx2<how>(symbol16, symbols) : symbols;
      store_symbols_avx2<sym>(narrow16_avx2(values),
                              out + (i + 8 * g) * sizeof(sym));
      state[g] = renormalize_avx2(next, q);
    }
    i += wide_lanes;
  }
  for (unsigned g = 0; g < groups; ++g) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 8 * g), state[g]);
  }
  p = q;
  return i;
}

// For each mask of 8 lanes that write a word, the byte shuffle that moves
// those lanes' words (in lane order) to the top of 16 bytes, the store of
// which then ends where the words end; the junk below them lands where
// later words or the states go.
struct word_compress {
  alignas(16) uint8_t index[256][16];
  constexpr word_compress() : index{} {
    for (unsigned m = 0; m < 256; ++m) {
      for (unsigned b = 0; b < 16; ++b) index[m][b] = 0x80;
      unsigned k = 8 - static_cast<unsigned>(std::popcount(m));
      for (unsigned j = 0; j < 8; ++j) {
        if (((m >> j) & 1) == 0) continue;
        index[m][2 * k] = static_cast<uint8_t>(2 * j);
        index[m][2 * k + 1] = static_cast<uint8_t>(2 * j + 1);
        ++k;
      }
    }
  }
};
constexpr word_compress compress_words;

// encode_step (below) on 8 states: AVX2 has neither unsigned compares, nor
// unsigned conversions, nor a compress-store.
__attribute__((target("avx2"), always_inline)) inline __m256i encode_step_avx2(
    __m256i s, __m256i freq, __m256i bias, __m128i x_max_shift,
    __m128i scale_shift, uint8_t*& q) {
  // The low 16 bits of each 32-bit lane into the low 8 bytes of its
  // 128-bit half.
  __m256i const pick_low = _mm256_setr_epi8(
      0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8,
      9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
  __m256i const limit = _mm256_sll_epi32(freq, x_max_shift);
  __m256i const r = _mm256_cmpeq_epi32(_mm256_max_epu32(s, limit), s);
  auto const m =
      static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(r)));
  __m128i const words = _mm256_castsi256_si128(
      _mm256_permute4x64_epi64(_mm256_shuffle_epi8(s, pick_low), 0x08));
  _mm_storeu_si128(
      reinterpret_cast<__m128i*>(q - 16),
      _mm_shuffle_epi8(words, _mm_load_si128(reinterpret_cast<__m128i const*>(
                                  compress_words.index[m]))));
  q -= 2 * static_cast<unsigned>(__builtin_popcount(m));
  s = _mm256_blendv_epi8(s, _mm256_srli_epi32(s, 16), r);
  // The state as a float: states of 2^31 or more convert as s - 2^32, then
  // 2^32 is added back. Two roundings, together below 1.5 * 2^-24 relative
  // (states there are at least 2^31, the first error at most 2^6, the
  // second 2^7): with the reciprocal's and the product's, the estimate
  // stays within 0.875 of the quotient (below 2^22), so the correction
  // below still lands exactly.
  __m256 const sf =
      _mm256_add_ps(_mm256_cvtepi32_ps(s),
                    _mm256_and_ps(_mm256_castsi256_ps(_mm256_srai_epi32(s, 31)),
                                  _mm256_set1_ps(4294967296.0f)));
  __m256 const inv =
      _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_cvtepi32_ps(freq));
  // Quotients are below 2^22: the signed conversion holds them.
  __m256i quot = _mm256_cvttps_epi32(_mm256_mul_ps(sf, inv));
  __m256i rem = _mm256_sub_epi32(s, _mm256_mullo_epi32(quot, freq));
  __m256i const over = _mm256_srai_epi32(rem, 31);  // rem < 0: one too many
  quot = _mm256_add_epi32(quot, over);
  rem = _mm256_add_epi32(rem, _mm256_and_si256(over, freq));
  __m256i const under = _mm256_cmpgt_epi32(
      rem, _mm256_sub_epi32(freq, _mm256_set1_epi32(1)));  // one too few
  quot = _mm256_sub_epi32(quot, under);
  rem = _mm256_sub_epi32(rem, _mm256_and_si256(under, freq));
  return _mm256_add_epi32(
      _mm256_add_epi32(_mm256_sll_epi32(quot, scale_shift), rem), bias);
}

// The rounds of wide payloads, a block at a time: a scalar pass looks each
// symbol's bias | cmpl << 16 up into a buffer in L1 (0 for an absent
// symbol), by the symbol (8-bit symbols from a table of all 256, 16-bit
// ones below `table_end`) or if `index` through it (16-bit symbols below
// `table_end`); then the vector rounds load it. Measured on Zen 2 (ns a
// symbol, blazepose-heavy bf16 streams) against gathers, which cost Zen 2
// ~0.45 ns a symbol: 8-bit 0.87-0.90 against 1.05-1.08, whole bf16 words
// by index 1.7 against 2.1. Returns true if some symbol is absent.
template <typename sym>
__attribute__((target("avx2"))) bool encode_rounds_buffered_avx2_impl(
    uint32_t* x, uint8_t*& p, uint8_t const* in, size_t rounds_end,
    uint32_t total, uint32_t const* index, uint32_t table_end,
    uint32_t const* bias_cmpl) {
  constexpr unsigned groups = wide_lanes / 8;
  constexpr size_t block = 2048;  // symbols: 8 KiB of entries
  static_assert(block % wide_lanes == 0);
  alignas(32) uint32_t entries[block];
  __m256i state[groups];
  for (unsigned g = 0; g < groups; ++g)
    state[g] = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(x + 8 * g));
  __m256i const low16 = _mm256_set1_epi32(0xffff);
  __m256i const totals = _mm256_set1_epi32(static_cast<int>(total));
  int const scale = std::countr_zero(total);
  __m128i const x_max_shift = _mm_cvtsi32_si128(32 - scale);
  __m128i const scale_shift = _mm_cvtsi32_si128(scale);
  __m256i absent = _mm256_setzero_si256();
  uint8_t* q = p;
  for (size_t end = rounds_end; end > 0;) {
    size_t const start = end > block ? end - block : 0;
    size_t const n = end - start;
    uint8_t const* const src = in + start * sizeof(sym);
    if constexpr (sizeof(sym) == 1) {
      for (size_t i = 0; i < n; ++i) entries[i] = bias_cmpl[src[i]];
    } else if (index == nullptr) {
      for (size_t i = 0; i < n; ++i) {
        uint16_t s;
        std::memcpy(&s, src + 2 * i, 2);  // x86: little-endian
        entries[i] = s < table_end ? bias_cmpl[s] : 0;
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        uint16_t s;
        std::memcpy(&s, src + 2 * i, 2);
        uint32_t const idx = s < table_end ? index[s] : ~uint32_t{0};
        entries[i] = idx == ~uint32_t{0} ? 0 : bias_cmpl[idx];
      }
    }
    for (size_t i = n; i > 0;) {
      i -= wide_lanes;
      for (unsigned g = groups; g-- > 0;) {
        __m256i const bc = _mm256_load_si256(
            reinterpret_cast<__m256i const*>(entries + i + 8 * g));
        absent = _mm256_or_si256(
            absent, _mm256_cmpeq_epi32(bc, _mm256_setzero_si256()));
        __m256i const freq =
            _mm256_sub_epi32(totals, _mm256_srli_epi32(bc, 16));
        state[g] = encode_step_avx2(state[g], freq, _mm256_and_si256(bc, low16),
                                    x_max_shift, scale_shift, q);
      }
    }
    end = start;
  }
  for (unsigned g = 0; g < groups; ++g)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 8 * g), state[g]);
  p = q;
  return !_mm256_testz_si256(absent, absent);
}

// Whole rounds of `groups` * 8 lanes (narrow payloads: one group), each
// group's bias | cmpl << 16 gathered by the symbol (8-bit symbols from a
// table of all 256, 16-bit ones below `table_end`), or if `index` through
// it (16-bit symbols below `table_end`, ~0 for absent ones). Off the
// state's chain, the gathers overlap its latency, which bounds a single
// group. Returns true if some symbol is absent.
template <typename sym, unsigned groups>
__attribute__((target("avx2"))) bool encode_rounds_gather_avx2_impl(
    uint32_t* x, uint8_t*& p, uint8_t const* in, size_t rounds_end,
    uint32_t total, uint32_t const* index, uint32_t table_end,
    uint32_t const* bias_cmpl) {
  constexpr unsigned n_lanes = 8 * groups;
  __m256i state[groups];
  for (unsigned g = 0; g < groups; ++g)
    state[g] = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(x + 8 * g));
  __m256i const low16 = _mm256_set1_epi32(0xffff);
  __m256i const all_ones = _mm256_set1_epi32(-1);
  __m256i const totals = _mm256_set1_epi32(static_cast<int>(total));
  __m256i const last = _mm256_set1_epi32(static_cast<int>(table_end) - 1);
  int const scale = std::countr_zero(total);
  __m128i const x_max_shift = _mm_cvtsi32_si128(32 - scale);
  __m128i const scale_shift = _mm_cvtsi32_si128(scale);
  __m256i absent = _mm256_setzero_si256();
  uint8_t* q = p;
  for (size_t i = rounds_end; i > 0;) {
    i -= n_lanes;
    for (unsigned g = groups; g-- > 0;) {
      __m256i bc;
      if constexpr (sizeof(sym) == 1) {
        __m256i const s = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<__m128i const*>(in + i + 8 * g)));
        bc = gather_avx2<4>(bias_cmpl, s);
      } else {
        __m256i const s = _mm256_cvtepu16_epi32(_mm_loadu_si128(
            reinterpret_cast<__m128i const*>(in + 2 * (i + 8 * g))));
        // Symbols past the table are absent: looked up as 0, then dropped.
        __m256i const past = _mm256_cmpgt_epi32(s, last);
        __m256i idx = _mm256_andnot_si256(past, s);
        __m256i missing = past;
        if (index) {
          idx = _mm256_or_si256(past, gather_avx2<4>(index, idx));
          missing = _mm256_cmpeq_epi32(idx, all_ones);
          idx = _mm256_andnot_si256(missing, idx);
        }
        bc = _mm256_andnot_si256(missing, gather_avx2<4>(bias_cmpl, idx));
      }
      // 0: absent (tables by the symbol hold 0 for absent symbols; cmpl = 0
      // would mean freq = 2^scale, which two symbols or more never have).
      absent = _mm256_or_si256(absent,
                               _mm256_cmpeq_epi32(bc, _mm256_setzero_si256()));
      __m256i const freq = _mm256_sub_epi32(totals, _mm256_srli_epi32(bc, 16));
      state[g] = encode_step_avx2(state[g], freq, _mm256_and_si256(bc, low16),
                                  x_max_shift, scale_shift, q);
    }
  }
  for (unsigned g = 0; g < groups; ++g)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 8 * g), state[g]);
  p = q;
  return !_mm256_testz_si256(absent, absent);
}

// Wide payloads from the buffer, narrow ones (bound by their one chain of
// 8 states, which the scalar pass would only lengthen) with gathers:
// measured on Zen 2, ns a symbol, 8-bit 1.27 against 1.55 buffered, by
// index 2.05 against 2.4.
template <unsigned groups>
bool encode_rounds_avx2_by_width(unsigned width, uint32_t* x, uint8_t*& p,
                                 uint8_t const* in, size_t rounds_end,
                                 uint32_t total, uint32_t const* index,
                                 uint32_t index_end, uint32_t const* bias_cmpl,
                                 uint32_t direct_end) {
  uint32_t const* const by = direct_end > 0 ? nullptr : index;
  uint32_t const end = direct_end > 0 ? direct_end : index_end;
  if constexpr (groups == wide_lanes / 8) {
    return width == 1
               ? encode_rounds_buffered_avx2_impl<uint8_t>(
                     x, p, in, rounds_end, total, nullptr, 256, bias_cmpl)
               : encode_rounds_buffered_avx2_impl<uint16_t>(
                     x, p, in, rounds_end, total, by, end, bias_cmpl);
  } else {
    return width == 1
               ? encode_rounds_gather_avx2_impl<uint8_t, groups>(
                     x, p, in, rounds_end, total, nullptr, 256, bias_cmpl)
               : encode_rounds_gather_avx2_impl<uint16_t, groups>(
                     x, p, in, rounds_end, total, by, end, bias_cmpl);
  }
}

bool avx512_cpu() {
  static bool const yes = __builtin_cpu_supports("avx512f");
  return yes;
}

// GCC 12 warns inside its own AVX-512 headers (their "undefined" vectors).
#pragma GCC diagnostic push
#if !defined(__clang__)  // GCC only: clang (the fuzz build) has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// freq * x + add in every 32-bit lane (products below 2^32). With IFMA, two
// 52-bit multiply-adds (even lanes, then odd lanes moved down) and a shuffle:
// 6 cycles of latency on the state's chain instead of 11 (vpmulld takes 10),
// which bounds the rounds with the gather's. The kernels below are compiled
// for IFMA, but only the ifma instances use it (through this function).
template <bool ifma>
__attribute__((target("avx512f,avx512ifma"), always_inline)) inline __m512i
mul_add(__m512i freq, __m512i x, __m512i add) {
  if constexpr (ifma) {
    // The low 32 bits of a 64-bit lane's product and sum depend only on the
    // low 32 bits of its operands: the odd lane above them does not matter.
    __m512i const even = _mm512_madd52lo_epu64(add, freq, x);
    __m512i const odd = _mm512_madd52lo_epu64(_mm512_srli_epi64(add, 32),
                                              _mm512_srli_epi64(freq, 32),
                                              _mm512_srli_epi64(x, 32));
    return _mm512_mask_shuffle_epi32(even, 0xaaaa, odd, _MM_PERM_CDAB);
  } else {
    return _mm512_add_epi32(_mm512_mullo_epi32(freq, x), add);
  }
}

// One wide stream decoded from its slot tables, 16 lanes (a group) at a
// time; the lanes that renormalize take their words in order through an
// expand, with no shuffle table. The single-stream kernel runs its groups
// in turn, the pair kernel alternates two streams' groups.
template <typename sym, bool ifma>
struct slot_lanes {
  __m512i state[wide_lanes / 16];
  __m512i slot_mask;
  __m128i shift;
  uint32_t const* step_tab;
  uint16_t const* symbol_tab;
  uint8_t const* q;
  uint8_t* out;

  __attribute__((target("avx512f,avx512ifma"), always_inline)) inline void load(
      slot_stream const& s) {
    for (unsigned g = 0; g < wide_lanes / 16; ++g)
      state[g] = _mm512_loadu_si512(s.x + 16 * g);
    slot_mask = _mm512_set1_epi32((1 << s.scale) - 1);
    shift = _mm_cvtsi32_si128(static_cast<int>(s.scale));
    step_tab = s.step;
    symbol_tab = s.symbol;
    q = s.p;
    out = s.out;
  }
  __attribute__((target("avx512f,avx512ifma"), always_inline)) inline void
  store(slot_stream& s) const {
    for (unsigned g = 0; g < wide_lanes / 16; ++g)
      _mm512_storeu_si512(s.x + 16 * g, state[g]);
    s.p = q;
  }
  __attribute__((target("avx512f,avx512ifma"), always_inline)) inline void step(
      unsigned g, size_t i) {
    __m512i const low16 = _mm512_set1_epi32(0xffff);
    __m512i const state_min = _mm512_set1_epi32(static_cast<int>(state_low));
    __m512i const s = state[g];
    __m512i const slot = _mm512_and_si512(s, slot_mask);
    __m512i const e = _mm512_i32gather_epi32(slot, step_tab, 4);
    // Reads 4 bytes at each symbol (the table has one entry of padding).
    __m512i const symbols =
        _mm512_and_si512(_mm512_i32gather_epi32(slot, symbol_tab, 2), low16);
    __m512i const next =
        mul_add<ifma>(_mm512_and_si512(e, low16), _mm512_srl_epi32(s, shift),
                      _mm512_srli_epi32(e, 16));
    uint8_t* const o = out + (i + 16 * g) * sizeof(sym);
    if constexpr (sizeof(sym) == 2) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o),
                          _mm512_cvtepi32_epi16(symbols));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o),
                       _mm512_cvtepi32_epi8(symbols));
    }
    __mmask16 const need = _mm512_cmplt_epu32_mask(next, state_min);
    __m512i const words = _mm512_maskz_expand_epi32(
        need, _mm512_cvtepu16_epi32(
                  _mm256_loadu_si256(reinterpret_cast<__m256i const*>(q))));
    state[g] =
        _mm512_mask_or_epi32(next, need, _mm512_slli_epi32(next, 16), words);
    q += 2 * static_cast<unsigned>(__builtin_popcount(need));
  }
};

// Whole rounds of one stream, its groups in turn.
template <typename sym, bool ifma>
__attribute__((target("avx512f,avx512ifma"))) size_t decode_rounds_avx512_impl(
    uint32_t* x, uint8_t const*& p, uint8_t const* end, size_t count,
    unsigned scale, uint32_t const* step_tab, uint16_t const* symbol_tab,
    uint8_t* out) {
  slot_stream s{sizeof(sym), x,        p,          end, count,
                scale,       step_tab, symbol_tab, out};
  slot_lanes<sym, ifma> lanes;
  lanes.load(s);
  size_t i = 0;
  while (count - i >= wide_lanes &&
         static_cast<size_t>(end - lanes.q) >= 2 * wide_lanes) {
    for (unsigned g = 0; g < wide_lanes / 16; ++g) lanes.step(g, i);
    i += wide_lanes;
  }
  lanes.store(s);
  p = s.p;
  return i;
}

// The same rounds 8 lanes at a time, four groups of the 32 states (the
// AVX2 kernel's groups, with AVX-512's masks and expand): on Zen 5 a round
// waits on its gathers, and four chains of 8-lane gathers finish sooner than
// two of 16 lanes. Measured there (ns a symbol, bf16 streams, 16 lanes ->
// 8): u8 at 2^10 slots 0.75 -> 0.54, u16 at 2^13 0.74 -> 0.61, whole bf16
// words at 2^16 0.73 -> 0.73.
template <typename sym>
__attribute__((target("avx512f,avx512vl,avx2"))) size_t
decode_rounds_avx512vl_impl(uint32_t* x, uint8_t const*& p, uint8_t const* end,
                            size_t count, unsigned scale,
                            uint32_t const* step_tab,
                            uint16_t const* symbol_tab, uint8_t* out) {
  constexpr unsigned groups = wide_lanes / 8;
  __m256i state[groups];
  for (unsigned g = 0; g < groups; ++g)
    state[g] = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(x + 8 * g));
  __m256i const slot_mask = _mm256_set1_epi32((1 << scale) - 1);
  __m256i const low16 = _mm256_set1_epi32(0xffff);
  __m256i const state_min = _mm256_set1_epi32(static_cast<int>(state_low));
  __m128i const shift = _mm_cvtsi32_si128(static_cast<int>(scale));
  uint8_t const* q = p;
  size_t i = 0;
  while (count - i >= wide_lanes &&
         static_cast<size_t>(end - q) >= 2 * wide_lanes) {
    for (unsigned g = 0; g < groups; ++g) {
      __m256i const s = state[g];
      __m256i const slot = _mm256_and_si256(s, slot_mask);
      __m256i const e = gather_avx2<4>(step_tab, slot);
      // Reads 4 bytes at each symbol (the table has one entry of padding);
      // the conversions below keep the low bits.
      __m256i const symbols = gather_avx2<2>(symbol_tab, slot);
      __m256i const next =
          _mm256_add_epi32(_mm256_mullo_epi32(_mm256_and_si256(e, low16),
                                              _mm256_srl_epi32(s, shift)),
                           _mm256_srli_epi32(e, 16));
      uint8_t* const o = out + (i + 8 * g) * sizeof(sym);
      if constexpr (sizeof(sym) == 2) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o),
                         _mm256_cvtepi32_epi16(symbols));
      } else {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(o),
                         _mm256_cvtepi32_epi8(symbols));
      }
      __mmask8 const need = _mm256_cmplt_epu32_mask(next, state_min);
      __m256i const words = _mm256_maskz_expand_epi32(
          need, _mm256_cvtepu16_epi32(
                    _mm_loadu_si128(reinterpret_cast<__m128i const*>(q))));
      state[g] =
          _mm256_mask_or_epi32(next, need, _mm256_slli_epi32(next, 16), words);
      q += 2 * static_cast<unsigned>(__builtin_popcount(need));
    }
    i += wide_lanes;
  }
  for (unsigned g = 0; g < groups; ++g)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 8 * g), state[g]);
  p = q;
  return i;
}

// Two streams' rounds in one loop: each stream's groups wait on their
// gathers, one round after another, but the other stream's are independent,
// so twice as many gathers are in flight (measured, an 8-bit stream at
// 2^10 slots beside a 16-bit one: 0.48 against 0.61 ns a symbol at 2^13
// slots, 0.55 against 0.78 at 2^16).
template <typename sym_a, typename sym_b, bool ifma>
__attribute__((target("avx512f,avx512ifma"))) size_t decode_pair_rounds_impl(
    slot_stream& a, slot_stream& b) {
  slot_lanes<sym_a, ifma> la;
  slot_lanes<sym_b, ifma> lb;
  la.load(a);
  lb.load(b);
  size_t i = 0;
  while (a.count - i >= wide_lanes && b.count - i >= wide_lanes &&
         static_cast<size_t>(a.end - la.q) >= 2 * wide_lanes &&
         static_cast<size_t>(b.end - lb.q) >= 2 * wide_lanes) {
    for (unsigned g = 0; g < wide_lanes / 16; ++g) {
      la.step(g, i);
      lb.step(g, i);
    }
    i += wide_lanes;
  }
  la.store(a);
  lb.store(b);
  return i;
}

// The symbols' freq | start << 16 from the table kept in `pairs` register
// pairs (32 symbols a pair): every pair permuted at once, then chosen by the
// symbol's bits 5 to 7 in a tree of blends.
template <unsigned pairs>
__attribute__((target("avx512f"), always_inline)) inline __m512i
lookup_freq_start(__m512i const* table, __m512i symbols) {
  __m512i r[pairs];
  for (unsigned k = 0; k < pairs; ++k)
    r[k] = _mm512_permutex2var_epi32(table[2 * k], symbols, table[2 * k + 1]);
  unsigned n = pairs;
  for (int bit = 5; n > 1; ++bit) {
    __mmask16 const high =
        _mm512_test_epi32_mask(symbols, _mm512_set1_epi32(1 << bit));
    for (unsigned k = 0; 2 * k < n; ++k) {
      r[k] = 2 * k + 1 < n ? _mm512_mask_mov_epi32(r[2 * k], high, r[2 * k + 1])
                           : r[2 * k];
    }
    n = (n + 1) / 2;
  }
  return r[0];
}

// The rounds of 8-bit symbols, 16 lanes at a time: one gather (the slot's
// symbol, from a byte table mostly in L1), then the symbol's freq | start
// << 16 from registers: 32 symbols a pair of registers, `pairs` pairs (a
// second gather instead, even from L1, measured slower).
template <typename sym, unsigned pairs, bool ifma>
__attribute__((target("avx512f,avx512ifma"))) size_t decode_rounds8_avx512_impl(
    uint32_t* x, uint8_t const*& p, uint8_t const* end, size_t count,
    unsigned scale, uint8_t const* symbol8, uint32_t const* freq_start,
    uint32_t const* symbol16, uint8_t* out) {
  constexpr unsigned groups = wide_lanes / 16;
  __m512i state[groups];
  for (unsigned g = 0; g < groups; ++g)
    state[g] = _mm512_loadu_si512(x + 16 * g);
  __m512i table[2 * pairs];
  for (unsigned t = 0; t < 2 * pairs; ++t)
    table[t] = _mm512_loadu_si512(freq_start + 16 * t);
  // 16-bit symbols by their key, the same way.
  constexpr unsigned values = sizeof(sym) == 2 ? 2 * pairs : 0;
  __m512i value_table[values + 1];
  for (unsigned t = 0; t < values; ++t)
    value_table[t] = _mm512_loadu_si512(symbol16 + 16 * t);
  __m512i const slot_mask = _mm512_set1_epi32((1 << scale) - 1);
  __m512i const low16 = _mm512_set1_epi32(0xffff);
  __m512i const state_min = _mm512_set1_epi32(static_cast<int>(state_low));
  __m128i const shift = _mm_cvtsi32_si128(static_cast<int>(scale));
  uint8_t const* q = p;
  size_t i = 0;
  while (count - i >= wide_lanes &&
         static_cast<size_t>(end - q) >= 2 * wide_lanes) {
    for (unsigned g = 0; g < groups; ++g) {
      __m512i const s = state[g];
      __m512i const slot = _mm512_and_si512(s, slot_mask);
      // Reads 4 bytes at each slot (the table has 3 bytes of padding); the
      // neighbours' bytes above bit 7 stay (every use reads the low bits).
      __m512i const symbols = _mm512_i32gather_epi32(slot, symbol8, 1);
      __m512i const fs = lookup_freq_start<pairs>(table, symbols);
      __m512i const next =
          mul_add<ifma>(_mm512_and_si512(fs, low16), _mm512_srl_epi32(s, shift),
                        _mm512_sub_epi32(slot, _mm512_srli_epi32(fs, 16)));
      if constexpr (sizeof(sym) == 2) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * (i + 16 * g)),
                            _mm512_cvtepi32_epi16(lookup_freq_start<pairs>(
                                value_table, symbols)));
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 16 * g),
                         _mm512_cvtepi32_epi8(symbols));
      }
      __mmask16 const need = _mm512_cmplt_epu32_mask(next, state_min);
      __m512i const words = _mm512_maskz_expand_epi32(
          need, _mm512_cvtepu16_epi32(
                    _mm256_loadu_si256(reinterpret_cast<__m256i const*>(q))));
      state[g] =
          _mm512_mask_or_epi32(next, need, _mm512_slli_epi32(next, 16), words);
      q += 2 * static_cast<unsigned>(__builtin_popcount(need));
    }
    i += wide_lanes;
  }
  for (unsigned g = 0; g < groups; ++g)
    _mm512_storeu_si512(x + 16 * g, state[g]);
  p = q;
  return i;
}

template <typename sym, bool ifma>
size_t decode_rounds8_avx512_by_reach(uint32_t* x, uint8_t const*& p,
                                      uint8_t const* end, size_t count,
                                      unsigned scale, uint8_t const* symbol8,
                                      uint32_t const* freq_start,
                                      uint32_t const* symbol16,
                                      unsigned symbol_end, uint8_t* out) {
  switch ((symbol_end + 31) / 32) {
    case 1:
      return decode_rounds8_avx512_impl<sym, 1, ifma>(
          x, p, end, count, scale, symbol8, freq_start, symbol16, out);
    case 2:
      return decode_rounds8_avx512_impl<sym, 2, ifma>(
          x, p, end, count, scale, symbol8, freq_start, symbol16, out);
    case 3:
      return decode_rounds8_avx512_impl<sym, 3, ifma>(
          x, p, end, count, scale, symbol8, freq_start, symbol16, out);
    case 4:
      return decode_rounds8_avx512_impl<sym, 4, ifma>(
          x, p, end, count, scale, symbol8, freq_start, symbol16, out);
    case 5:
      return decode_rounds8_avx512_impl<sym, 5, ifma>(
          x, p, end, count, scale, symbol8, freq_start, symbol16, out);
    case 6:
      return decode_rounds8_avx512_impl<sym, 6, ifma>(
          x, p, end, count, scale, symbol8, freq_start, symbol16, out);
    case 7:
      return decode_rounds8_avx512_impl<sym, 7, ifma>(
          x, p, end, count, scale, symbol8, freq_start, symbol16, out);
    default:
      return decode_rounds8_avx512_impl<sym, 8, ifma>(
          x, p, end, count, scale, symbol8, freq_start, symbol16, out);
  }
}

bool avx512_ifma_cpu() {
  static bool const yes =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma");
  return yes;
}

bool avx512_bw_vl_cpu() {
  static bool const yes = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return yes;
}

// One group's encode step (16 states): the lanes whose state reaches
// freq << (32 - scale) write their low halves below `q`, in lane order; then
// state = (state / freq) << scale + state % freq + bias. Division runs in
// float and is corrected to the exact quotient (the estimate is within one:
// quotients are below 2^22, the float error below 2^-22 relative).
__attribute__((target("avx512f,avx512bw,avx512vl"),
               always_inline)) inline __m512i
encode_step(__m512i s, __m512i freq, __m512i bias, __m128i x_max_shift,
            __m128i scale_shift, uint8_t*& q) {
  __m512i const one = _mm512_set1_epi32(1);
  // x_max = freq << (32 - scale): computed, not looked up.
  __m512i const limit = _mm512_sll_epi32(freq, x_max_shift);
  __mmask16 const r = _mm512_cmpge_epu32_mask(s, limit);
  auto const n = static_cast<unsigned>(__builtin_popcount(r));
  q -= 2 * n;
  _mm256_mask_storeu_epi16(
      q, static_cast<__mmask16>((1u << n) - 1),
      _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(r, s)));
  s = _mm512_mask_srli_epi32(s, r, s, 16);
  // 1 / freq divided, not gathered from a table (the same correctly
  // rounded float; a gather of 16 lanes costs more than the division).
  __m512 const inv =
      _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_cvtepi32_ps(freq));
  __m512i quot = _mm512_cvttps_epu32(_mm512_mul_ps(_mm512_cvtepu32_ps(s), inv));
  __m512i rem = _mm512_sub_epi32(s, _mm512_mullo_epi32(quot, freq));
  __mmask16 const over = _mm512_cmplt_epi32_mask(rem, _mm512_setzero_si512());
  quot = _mm512_mask_sub_epi32(quot, over, quot, one);
  rem = _mm512_mask_add_epi32(rem, over, rem, freq);
  __mmask16 const under = _mm512_cmpge_epi32_mask(rem, freq);
  quot = _mm512_mask_add_epi32(quot, under, quot, one);
  rem = _mm512_mask_sub_epi32(rem, under, rem, freq);
  // s + quot * cmpl = quot * 2^scale + rem: a shift instead of a second
  // multiply on the state's chain.
  return _mm512_add_epi32(
      _mm512_add_epi32(_mm512_sll_epi32(quot, scale_shift), rem), bias);
}

// Encodes the whole rounds of 16-bit symbols [0, rounds_end) (after the
// scalar tail), 16 lanes at a time, each symbol's bias | cmpl << 16
// gathered from a table by the symbol: the same states and words as the
// scalar loop. Returns true if some symbol is
// absent from the table.
__attribute__((target("avx512f,avx512bw,avx512vl"))) bool
encode_rounds_avx512_impl(uint32_t* x, uint8_t*& p, uint8_t const* in,
                          size_t rounds_end, uint32_t total,
                          uint32_t const* index, uint32_t index_end,
                          uint32_t const* bias_cmpl, uint32_t direct_end) {
  constexpr unsigned groups = wide_lanes / 16;
  __m512i const index_ends = _mm512_set1_epi32(static_cast<int>(index_end));
  __m512i const direct_ends = _mm512_set1_epi32(static_cast<int>(direct_end));
  __m512i state[groups];
  for (unsigned g = 0; g < groups; ++g)
    state[g] = _mm512_loadu_si512(x + 16 * g);
  __m512i const low16 = _mm512_set1_epi32(0xffff);
  __m512i const all_ones = _mm512_set1_epi32(-1);
  __m512i const totals = _mm512_set1_epi32(static_cast<int>(total));
  int const scale = std::countr_zero(total);
  __m128i const x_max_shift = _mm_cvtsi32_si128(32 - scale);
  __m128i const scale_shift = _mm_cvtsi32_si128(scale);
  __mmask16 absent = 0;
  uint8_t* q = p;
  for (size_t i = rounds_end; i > 0;) {
    i -= wide_lanes;
    for (unsigned g = groups; g-- > 0;) {
      __m512i const symbols = _mm512_cvtepu16_epi32(_mm256_loadu_si256(
          reinterpret_cast<__m256i const*>(in + 2 * (i + 16 * g))));
      __m512i idx = symbols;
      if (direct_end > 0) {
        // By the symbol, as 8-bit ones: those past the tables are absent.
        __mmask16 const past = _mm512_cmpge_epu32_mask(symbols, direct_ends);
        absent |= past;
        idx = _mm512_mask_mov_epi32(idx, past, _mm512_setzero_si512());
      } else {
        // Symbols past the index (absent) get ~0 without a load.
        idx = _mm512_mask_i32gather_epi32(
            all_ones, _mm512_cmplt_epu32_mask(symbols, index_ends), symbols,
            index, 4);
        __mmask16 const bad = _mm512_cmpeq_epi32_mask(idx, all_ones);
        absent |= bad;
        idx = _mm512_mask_mov_epi32(idx, bad, _mm512_setzero_si512());
      }
      __m512i const bc = _mm512_i32gather_epi32(idx, bias_cmpl, 4);
      if (direct_end > 0) {
        // Tables by the symbol hold 0 for absent ones (cmpl = 0 would mean
        // freq = 2^scale, which a table of two symbols or more never has).
        absent |= _mm512_cmpeq_epi32_mask(bc, _mm512_setzero_si512());
      }
      __m512i const freq = _mm512_sub_epi32(totals, _mm512_srli_epi32(bc, 16));
      state[g] = encode_step(state[g], freq, _mm512_and_si512(bc, low16),
                             x_max_shift, scale_shift, q);
    }
  }
  for (unsigned g = 0; g < groups; ++g)
    _mm512_storeu_si512(x + 16 * g, state[g]);
  p = q;
  return absent != 0;
}

// The rounds of 16-bit symbols of a large alphabet (by index), a block at a
// time: a scalar pass looks up each symbol's bias | cmpl << 16 through the
// index into a buffer in L1, then the vector rounds load it (measured on
// Zen 5, full bf16 words at 2^16 slots: 1.58 against 1.92 ns a symbol with
// two gathers a group).
__attribute__((target("avx512f,avx512bw,avx512vl"))) bool
encode_rounds_indexed_impl(uint32_t* x, uint8_t*& p, uint8_t const* in,
                           size_t rounds_end, uint32_t total,
                           uint32_t const* index, uint32_t index_end,
                           uint32_t const* bias_cmpl) {
  constexpr unsigned groups = wide_lanes / 16;
  constexpr size_t block = 2048;  // symbols: 8 KiB of entries
  static_assert(block % wide_lanes == 0);
  alignas(64) uint32_t entries[block];
  __m512i state[groups];
  for (unsigned g = 0; g < groups; ++g)
    state[g] = _mm512_loadu_si512(x + 16 * g);
  __m512i const low16 = _mm512_set1_epi32(0xffff);
  __m512i const totals = _mm512_set1_epi32(static_cast<int>(total));
  int const scale = std::countr_zero(total);
  __m128i const x_max_shift = _mm_cvtsi32_si128(32 - scale);
  __m128i const scale_shift = _mm_cvtsi32_si128(scale);
  bool absent = false;
  uint8_t* q = p;
  for (size_t end = rounds_end; end > 0;) {
    size_t const start = end > block ? end - block : 0;
    for (size_t i = start; i < end; ++i) {
      uint16_t s;
      std::memcpy(&s, in + 2 * i, 2);  // x86: little-endian
      uint32_t const idx = s < index_end ? index[s] : ~uint32_t{0};
      absent |= idx == ~uint32_t{0};
      entries[i - start] = bias_cmpl[idx == ~uint32_t{0} ? 0 : idx];
    }
    for (size_t i = end; i > start;) {
      i -= wide_lanes;
      for (unsigned g = groups; g-- > 0;) {
        __m512i const bc = _mm512_load_si512(entries + (i - start) + 16 * g);
        __m512i const freq =
            _mm512_sub_epi32(totals, _mm512_srli_epi32(bc, 16));
        state[g] = encode_step(state[g], freq, _mm512_and_si512(bc, low16),
                               x_max_shift, scale_shift, q);
      }
    }
    end = start;
  }
  for (unsigned g = 0; g < groups; ++g)
    _mm512_storeu_si512(x + 16 * g, state[g]);
  p = q;
  return absent;
}

// Words of a 16-bit table of 64 * blocks entries (blocks <= 4), looked up
// by the low 8 bits of each 16-bit key: a two-source permute per 64
// entries, then blends by the key's bits 6 and 7.
template <unsigned blocks>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i
lookup_words(__m512i const* table, __m512i keys) {
  __m512i r[blocks];
  for (unsigned b = 0; b < blocks; ++b)
    r[b] = _mm512_permutex2var_epi16(table[2 * b], keys, table[2 * b + 1]);
  if constexpr (blocks == 1) {
    return r[0];
  } else {
    __mmask32 const bit6 = _mm512_test_epi16_mask(keys, _mm512_set1_epi16(64));
    __m512i const low = _mm512_mask_mov_epi16(r[0], bit6, r[1]);
    if constexpr (blocks == 2) {
      return low;
    } else {
      __mmask32 const bit7 =
          _mm512_test_epi16_mask(keys, _mm512_set1_epi16(128));
      __m512i const high =
          blocks == 4 ? _mm512_mask_mov_epi16(r[2], bit6, r[3]) : r[2];
      return _mm512_mask_mov_epi16(low, bit7, high);
    }
  }
}

// The rounds of symbols with keys below 64 * blocks (keyed_tables), each
// symbol's bias and freq from 16-bit tables in registers instead of
// gathers (measured on Zen 5, 8-bit mantissas of bf16 weights at 2^16
// slots: 0.51 against 1.15 ns a symbol). A round's 32 symbols are looked
// up at once as words, then unpacked into the two groups' bias | freq << 16
// (the keys first put in the order the unpacks take them in).
template <typename sym, unsigned blocks>
__attribute__((target("avx512f,avx512bw,avx512vl"))) bool
encode_rounds_keyed_impl(uint32_t* x, uint8_t*& p, uint8_t const* in,
                         size_t rounds_end, uint32_t total,
                         keyed_tables const& t) {
  constexpr unsigned groups = wide_lanes / 16;
  static_assert(groups == 2, "a round is two groups of 16 lanes");
  __m512i bias_table[2 * blocks], freq_table[2 * blocks];
  for (unsigned k = 0; k < 2 * blocks; ++k) {
    bias_table[k] = _mm512_loadu_si512(t.bias + 32 * k);
    freq_table[k] = _mm512_loadu_si512(t.freq + 32 * k);
  }
  // Word 8 L + k of the keys is symbol 4 L + k (group 0's lane 4 L + k) for
  // k < 4, else symbol 16 + 4 L + k - 4 (group 1's): the unpacks of 128-bit
  // lane L then give each group's lanes 4 L to 4 L + 3.
  __m512i const order = _mm512_set_epi16(
      31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8, 23, 22, 21,
      20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  __m512i const key_end = _mm512_set1_epi16(static_cast<short>(64 * blocks));
  __m512i const fold = _mm512_set1_epi16(static_cast<short>(t.fold));
  __m512i const half = _mm512_set1_epi16(0x100);
  __m512i const low8 = _mm512_set1_epi16(0xff);
  __m512i const fold_end = _mm512_set1_epi16(0x200);
  __m512i const fold_low0 = _mm512_set1_epi16(static_cast<short>(t.low[0]));
  __m512i const fold_low1 = _mm512_set1_epi16(static_cast<short>(t.low[1]));
  __m512i const low16 = _mm512_set1_epi32(0xffff);
  __m512i const totals = _mm512_set1_epi32(static_cast<int>(total));
  __m512i const direct_ends =
      _mm512_set1_epi32(static_cast<int>(t.bias_cmpl_end));
  int const scale = std::countr_zero(total);
  __m128i const x_max_shift = _mm_cvtsi32_si128(32 - scale);
  __m128i const scale_shift = _mm_cvtsi32_si128(scale);
  __m512i state[groups];
  for (unsigned g = 0; g < groups; ++g)
    state[g] = _mm512_loadu_si512(x + 16 * g);
  __mmask32 absent = 0;
  uint8_t* q = p;
  for (size_t i = rounds_end; i > 0;) {
    i -= wide_lanes;
    uint8_t const* const src = in + i * sizeof(sym);
    __m512i symbols;
    if constexpr (sizeof(sym) == 2) {
      symbols = _mm512_loadu_si512(src);
    } else {
      symbols = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<__m256i const*>(src)));
    }
    __m512i keys = symbols;
    __mmask32 escape = 0;
    if (sizeof(sym) == 2 && t.fold) {
      // Each half's offset from its window's start, the high half's after
      // the low half's keys; offsets of fold or more escape.
      __mmask32 const high = _mm512_test_epi16_mask(symbols, half);
      __m512i const offset =
          _mm512_sub_epi16(_mm512_and_si512(symbols, low8),
                           _mm512_mask_mov_epi16(fold_low0, high, fold_low1));
      escape = _mm512_cmpge_epu16_mask(offset, fold) |
               _mm512_cmpge_epu16_mask(symbols, fold_end);
      keys = _mm512_mask_add_epi16(offset, high, offset, fold);
    } else {
      absent |= _mm512_cmpge_epu16_mask(symbols, key_end);
    }
    keys = _mm512_permutexvar_epi16(order, keys);
    __m512i const bias = lookup_words<blocks>(bias_table, keys);
    __m512i const freq = lookup_words<blocks>(freq_table, keys);
    __m512i bias_freq[groups] = {_mm512_unpacklo_epi16(bias, freq),
                                 _mm512_unpackhi_epi16(bias, freq)};
    if (escape) [[unlikely]] {
      // Symbols outside the windows (bf16's zeros and infinities, rare):
      // gathered from the table by the symbol, as the other kernel does.
      for (unsigned g = 0; g < groups; ++g) {
        auto const lanes = static_cast<__mmask16>(escape >> (16 * g));
        __m512i idx = _mm512_cvtepu16_epi32(
            g == 0 ? _mm512_castsi512_si256(symbols)
                   : _mm512_extracti64x4_epi64(symbols, 1));
        __mmask16 const past = _mm512_cmpge_epu32_mask(idx, direct_ends);
        idx = _mm512_mask_mov_epi32(idx, past, _mm512_setzero_si512());
        __m512i const bc = _mm512_mask_i32gather_epi32(
            _mm512_setzero_si512(), lanes, idx, t.bias_cmpl, 4);
        // Past the table or 0 in it: absent (as in the gathering kernel).
        __mmask16 const missing =
            past | _mm512_cmpeq_epi32_mask(bc, _mm512_setzero_si512());
        absent |= static_cast<__mmask32>(lanes & missing) << (16 * g);
        __m512i const f = _mm512_and_si512(
            _mm512_sub_epi32(totals, _mm512_srli_epi32(bc, 16)), low16);
        bias_freq[g] = _mm512_mask_or_epi32(bias_freq[g], lanes,
                                            _mm512_and_si512(bc, low16),
                                            _mm512_slli_epi32(f, 16));
      }
    }
    for (unsigned g = groups; g-- > 0;) {
      // freq 0: absent (the tables' other keys, the gathers' zeros).
      absent |= static_cast<__mmask32>(_mm512_cmplt_epu32_mask(
                    bias_freq[g], _mm512_set1_epi32(0x10000)))
                << (16 * g);
      state[g] = encode_step(state[g], _mm512_srli_epi32(bias_freq[g], 16),
                             _mm512_and_si512(bias_freq[g], low16), x_max_shift,
                             scale_shift, q);
    }
  }
  for (unsigned g = 0; g < groups; ++g)
    _mm512_storeu_si512(x + 16 * g, state[g]);
  p = q;
  return absent != 0;
}

template <typename sym>
bool encode_rounds_keyed_by_reach(uint32_t* x, uint8_t*& p, uint8_t const* in,
                                  size_t rounds_end, uint32_t total,
                                  keyed_tables const& t) {
  switch (t.blocks) {
    case 1:
      return encode_rounds_keyed_impl<sym, 1>(x, p, in, rounds_end, total, t);
    case 2:
      return encode_rounds_keyed_impl<sym, 2>(x, p, in, rounds_end, total, t);
    case 3:
      return encode_rounds_keyed_impl<sym, 3>(x, p, in, rounds_end, total, t);
    default:
      return encode_rounds_keyed_impl<sym, 4>(x, p, in, rounds_end, total, t);
  }
}

// Fills the decode slots of every symbol 8 at a time, in order: a symbol's
// last vector may spill into the next symbols' slots, which they overwrite
// (no masked stores, and a trip count that is 1 for the few slots most
// symbols of large tables own, where the scalar loop mispredicted). Symbols
// whose vectors would pass the table's end are filled one slot at a time.
__attribute__((target("avx2"))) void fill_slots_avx2_impl(table const& t,
                                                          uint32_t* step,
                                                          uint16_t* symbol) {
  __m256i const offsets = _mm256_setr_epi32(0, 1 << 16, 2 << 16, 3 << 16,
                                            4 << 16, 5 << 16, 6 << 16, 7 << 16);
  __m256i const next8 = _mm256_set1_epi32(8 << 16);
  uint32_t const total = 1u << t.scale;
  uint32_t start = 0;
  size_t const k = t.symbols.size();
  for (size_t i = 0; i < k; ++i) {
    uint32_t const f = t.freqs[i];
    auto const s = static_cast<uint16_t>(t.symbols[i]);
    uint32_t const vectors = (f + 7) / 8;
    if (total - start < 8 * vectors) {
      for (uint32_t j = 0; j < f; ++j) {
        step[start + j] = f | j << 16;
        symbol[start + j] = s;
      }
    } else {
      __m256i v =
          _mm256_or_si256(_mm256_set1_epi32(static_cast<int>(f)), offsets);
      __m128i const sv = _mm_set1_epi16(static_cast<short>(s));
      uint32_t* st = step + start;
      uint16_t* sy = symbol + start;
      for (uint32_t j = 0; j < vectors; ++j, st += 8, sy += 8) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(st), v);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(sy), sv);
        v = _mm256_add_epi32(v, next8);
      }
    }
    start += f;
  }
}

// Fills the decode slots of every symbol 16 at a time, the last ones of a
// symbol through a mask (most symbols of large tables own a few slots).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
fill_slots_avx512_impl(table const& t, uint32_t* step, uint16_t* symbol) {
  __m512i const iota =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  uint32_t start = 0;
  for (size_t i = 0; i < t.symbols.size(); ++i) {
    uint32_t const f = t.freqs[i];
    __m512i const freq = _mm512_set1_epi32(static_cast<int>(f));
    __m256i const sym = _mm256_set1_epi16(static_cast<short>(t.symbols[i]));
    for (uint32_t k = 0; k < f; k += 16) {
      uint32_t const n = std::min<uint32_t>(16, f - k);
      auto const m = static_cast<__mmask16>((1u << n) - 1);
      __m512i const bias =
          _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(k)), iota);
      _mm512_mask_storeu_epi32(
          step + start + k, m,
          _mm512_or_si512(freq, _mm512_slli_epi32(bias, 16)));
      _mm256_mask_storeu_epi16(symbol + start + k, m, sym);
    }
    start += f;
  }
}
#pragma GCC diagnostic pop

}  // namespace

namespace {

// Zen 5 (measured, ns a symbol at 2^13 to 2^16 slots): vpmulld takes 3
// cycles there, so the IFMA multiply (two vpmadd52luq and a shuffle) costs
// the slot kernels more than it saves (0.86 against 0.94 without it); and
// its gathers are slow enough that the pair kernel keeps no more of them in
// flight than single streams do (0.80 singly against 0.90 paired). The
// compact kernel of 16-bit symbols still gains from IFMA (0.77 against
// 0.92 at 2^16 slots), that of 8-bit ones not (1.17 against 1.06 at 2^15).
bool zen_tuned() {
  static bool const amd = __builtin_cpu_is("amd");
  tuning const k = kind();
  return (k == tuning::detected ? amd : k != tuning::other) &&
         allowed() >= tuned;
}

// Zen 4 (family 19h with AVX-512; Zen 3, of the same family, has none)
// decodes a wide stream faster in 16-lane groups without IFMA, as the other
// AVX-512 CPUs do, than in Zen 5's 8-lane groups; and, as on Zen 5, two
// streams faster each alone than paired. Measured on an EPYC of family 25
// model 17 (ns a symbol, bf16 streams of 524288 symbols,
// brevis_rans_static_bench): 8-bit at 2^10 slots 0.70 against 0.76 in
// 8-lane groups, 16-bit at 2^13 0.75 against 0.78, 16-bit from compact
// tables at 2^16 0.72 against 0.77 with IFMA (which Zen 5 gains from
// there); the two streams 0.72 one after the other against 0.80 paired
// (and 1.12-1.29 from the 8-lane kernels, the default here before).
bool zen4_tuned() {
  static bool const family_19h = __builtin_cpu_is("amdfam19h");
  tuning const k = kind();
  return (k == tuning::detected ? family_19h : k == tuning::zen4) &&
         avx512_cpu() && zen_tuned();
}

}  // namespace

bool avx2() { return avx2_cpu() && allowed() >= 1; }
bool avx512() { return avx512_cpu() && allowed() >= 2; }
bool avx512_bw_vl() { return avx512_bw_vl_cpu() && allowed() >= 2; }
bool avx512_ifma() { return avx512_ifma_cpu() && allowed() >= 3; }
bool pair_rounds() { return avx512() && !zen_tuned(); }
bool narrow_encode_rounds() { return avx2() && zen_tuned(); }
bool narrow_pair_rounds() {
  return avx2() && zen_tuned() && (!avx512() || zen4_tuned());
}

namespace {

// decode_rounds_avx2_impl for the symbol width and the CPU's lookups.
template <bool packed, unsigned n_states = wide_lanes>
size_t decode_rounds_avx2_by(unsigned width, uint32_t* x, uint8_t const*& p,
                             uint8_t const* end, size_t count, unsigned scale,
                             uint32_t const* step, uint16_t const* symbol,
                             uint32_t const* packed_tab, unsigned field_bits,
                             uint8_t* out) {
  if (zen_tuned()) {
    constexpr lookups how = zen_lookups(packed);
    return width == 1
               ? decode_rounds_avx2_impl<uint8_t, packed, how, n_states>(
                     x, p, end, count, scale, step, symbol, packed_tab,
                     field_bits, out)
               : decode_rounds_avx2_impl<uint16_t, packed, how, n_states>(
                     x, p, end, count, scale, step, symbol, packed_tab,
                     field_bits, out);
  }
  return width == 1
             ? decode_rounds_avx2_impl<uint8_t, packed, lookups::gathers,
                                       n_states>(x, p, end, count, scale, step,
                                                 symbol, packed_tab, field_bits,
                                                 out)
             : decode_rounds_avx2_impl<uint16_t, packed, lookups::gathers,
                                       n_states>(x, p, end, count, scale, step,
                                                 symbol, packed_tab, field_bits,
                                                 out);
}

}  // namespace

size_t decode_rounds_avx2(unsigned width, uint32_t* x, uint8_t const*& p,
                          uint8_t const* end, size_t count, unsigned scale,
                          uint32_t const* step, uint16_t const* symbol,
                          uint8_t* out) {
  return decode_rounds_avx2_by<false>(width, x, p, end, count, scale, step,
                                      symbol, nullptr, 0, out);
}

size_t decode_packed_rounds_avx2(unsigned width, uint32_t* x, uint8_t const*& p,
                                 uint8_t const* end, size_t count,
                                 unsigned scale, uint32_t const* packed,
                                 unsigned field_bits, uint8_t* out) {
  return decode_rounds_avx2_by<true>(width, x, p, end, count, scale, nullptr,
                                     nullptr, packed, field_bits, out);
}

size_t decode_narrow_packed_rounds_avx2(unsigned width, uint32_t* x,
                                        uint8_t const*& p, uint8_t const* end,
                                        size_t count, unsigned scale,
                                        uint32_t const* packed,
                                        unsigned field_bits, uint8_t* out) {
  if (!narrow_pair_rounds()) return 0;  // where narrow rounds pay: Zen
  return decode_rounds_avx2_by<true, lanes>(width, x, p, end, count, scale,
                                            nullptr, nullptr, packed,
                                            field_bits, out);
}

size_t decode_rounds_avx512(unsigned width, uint32_t* x, uint8_t const*& p,
                            uint8_t const* end, size_t count, unsigned scale,
                            uint32_t const* step, uint16_t const* symbol,
                            uint8_t* out) {
  if (avx512_ifma() && !zen_tuned()) {
    return width == 1 ? decode_rounds_avx512_impl<uint8_t, true>(
                            x, p, end, count, scale, step, symbol, out)
                      : decode_rounds_avx512_impl<uint16_t, true>(
                            x, p, end, count, scale, step, symbol, out);
  }
  if (zen_tuned() && !zen4_tuned()) {
    return width == 1 ? decode_rounds_avx512vl_impl<uint8_t>(
                            x, p, end, count, scale, step, symbol, out)
                      : decode_rounds_avx512vl_impl<uint16_t>(
                            x, p, end, count, scale, step, symbol, out);
  }
  return width == 1 ? decode_rounds_avx512_impl<uint8_t, false>(
                          x, p, end, count, scale, step, symbol, out)
                    : decode_rounds_avx512_impl<uint16_t, false>(
                          x, p, end, count, scale, step, symbol, out);
}

size_t decode_rounds8_avx2(uint32_t* x, uint8_t const*& p, uint8_t const* end,
                           size_t count, unsigned scale, uint8_t const* symbol8,
                           uint32_t const* freq_start, uint32_t const* symbol16,
                           uint8_t* out) {
  if (zen_tuned()) {
    return symbol16 ? decode_rounds8_avx2_impl<uint16_t, lookups::extracts>(
                          x, p, end, count, scale, symbol8, freq_start,
                          symbol16, out)
                    : decode_rounds8_avx2_impl<uint8_t, lookups::extracts>(
                          x, p, end, count, scale, symbol8, freq_start,
                          symbol16, out);
  }
  return symbol16
             ? decode_rounds8_avx2_impl<uint16_t, lookups::gathers>(
                   x, p, end, count, scale, symbol8, freq_start, symbol16, out)
             : decode_rounds8_avx2_impl<uint8_t, lookups::gathers>(
                   x, p, end, count, scale, symbol8, freq_start, symbol16, out);
}

size_t decode_rounds8_avx512(uint32_t* x, uint8_t const*& p, uint8_t const* end,
                             size_t count, unsigned scale,
                             uint8_t const* symbol8, uint32_t const* freq_start,
                             uint32_t const* symbol16, unsigned key_end,
                             uint8_t* out) {
  bool const ifma =
      avx512_ifma() && !(zen_tuned() && (!symbol16 || zen4_tuned()));
  if (symbol16) {
    return ifma ? decode_rounds8_avx512_by_reach<uint16_t, true>(
                      x, p, end, count, scale, symbol8, freq_start, symbol16,
                      key_end, out)
                : decode_rounds8_avx512_by_reach<uint16_t, false>(
                      x, p, end, count, scale, symbol8, freq_start, symbol16,
                      key_end, out);
  }
  return ifma ? decode_rounds8_avx512_by_reach<uint8_t, true>(
                    x, p, end, count, scale, symbol8, freq_start, symbol16,
                    key_end, out)
              : decode_rounds8_avx512_by_reach<uint8_t, false>(
                    x, p, end, count, scale, symbol8, freq_start, symbol16,
                    key_end, out);
}

namespace {

template <bool ifma>
size_t decode_pair_rounds_by_width(slot_stream& a, slot_stream& b) {
  if (a.width == 1) {
    return b.width == 1
               ? decode_pair_rounds_impl<uint8_t, uint8_t, ifma>(a, b)
               : decode_pair_rounds_impl<uint8_t, uint16_t, ifma>(a, b);
  }
  return b.width == 1 ? decode_pair_rounds_impl<uint16_t, uint8_t, ifma>(a, b)
                      : decode_pair_rounds_impl<uint16_t, uint16_t, ifma>(a, b);
}

}  // namespace

namespace {

// decode_narrow_pair_avx2_impl for b's symbol width and tables, a's known.
template <typename sym_a, bool packed_a>
size_t narrow_pair_by_b(slot_stream& a, slot_stream& b) {
  if (b.width == 1) {
    return b.packed
               ? decode_narrow_pair_avx2_impl<sym_a, packed_a, uint8_t, true>(a,
                                                                              b)
               : decode_narrow_pair_avx2_impl<sym_a, packed_a, uint8_t, false>(
                     a, b);
  }
  return b.packed
             ? decode_narrow_pair_avx2_impl<sym_a, packed_a, uint16_t, true>(a,
                                                                             b)
             : decode_narrow_pair_avx2_impl<sym_a, packed_a, uint16_t, false>(
                   a, b);
}

}  // namespace

size_t decode_narrow_pair_rounds_avx2(slot_stream& a, slot_stream& b) {
  if (!narrow_pair_rounds()) return 0;
  if (a.width == 1) {
    return a.packed ? narrow_pair_by_b<uint8_t, true>(a, b)
                    : narrow_pair_by_b<uint8_t, false>(a, b);
  }
  return a.packed ? narrow_pair_by_b<uint16_t, true>(a, b)
                  : narrow_pair_by_b<uint16_t, false>(a, b);
}

size_t decode_pair_rounds_avx512(slot_stream& a, slot_stream& b) {
  if (!pair_rounds()) return 0;
  return avx512_ifma() ? decode_pair_rounds_by_width<true>(a, b)
                       : decode_pair_rounds_by_width<false>(a, b);
}

bool encode_rounds_avx2(unsigned width, unsigned n_lanes, uint32_t* x,
                        uint8_t*& p, uint8_t const* in, size_t rounds_end,
                        uint32_t total, uint32_t const* index,
                        uint32_t index_end, uint32_t const* bias_cmpl,
                        uint32_t direct_end) {
  return n_lanes == wide_lanes ? encode_rounds_avx2_by_width<wide_lanes / 8>(
                                     width, x, p, in, rounds_end, total, index,
                                     index_end, bias_cmpl, direct_end)
                               : encode_rounds_avx2_by_width<lanes / 8>(
                                     width, x, p, in, rounds_end, total, index,
                                     index_end, bias_cmpl, direct_end);
}

bool encode_rounds_avx512(uint32_t* x, uint8_t*& p, uint8_t const* in,
                          size_t rounds_end, uint32_t total,
                          uint32_t const* index, uint32_t index_end,
                          uint32_t const* bias_cmpl, uint32_t direct_end) {
  return direct_end == 0
             ? encode_rounds_indexed_impl(x, p, in, rounds_end, total, index,
                                          index_end, bias_cmpl)
             : encode_rounds_avx512_impl(x, p, in, rounds_end, total, index,
                                         index_end, bias_cmpl, direct_end);
}

bool encode_rounds_keyed_avx512(unsigned width, uint32_t* x, uint8_t*& p,
                                uint8_t const* in, size_t rounds_end,
                                uint32_t total, keyed_tables const& t) {
  return width == 1 ? encode_rounds_keyed_by_reach<uint8_t>(
                          x, p, in, rounds_end, total, t)
                    : encode_rounds_keyed_by_reach<uint16_t>(
                          x, p, in, rounds_end, total, t);
}

void fill_slots_avx512(table const& t, uint32_t* step, uint16_t* symbol) {
  fill_slots_avx512_impl(t, step, symbol);
}

void fill_slots_avx2(table const& t, uint32_t* step, uint16_t* symbol) {
  fill_slots_avx2_impl(t, step, symbol);
}

#else  // no vector kernels: the scalar paths run

bool avx2() { return false; }
bool avx512() { return false; }
bool avx512_bw_vl() { return false; }
bool avx512_ifma() { return false; }
bool pair_rounds() { return false; }
bool narrow_encode_rounds() { return false; }
size_t decode_rounds_avx2(unsigned, uint32_t*, uint8_t const*&, uint8_t const*,
                          size_t, unsigned, uint32_t const*, uint16_t const*,
                          uint8_t*) {
  return 0;
}
size_t decode_rounds_avx512(unsigned, uint32_t*, uint8_t const*&,
                            uint8_t const*, size_t, unsigned, uint32_t const*,
                            uint16_t const*, uint8_t*) {
  return 0;
}
size_t decode_packed_rounds_avx2(unsigned, uint32_t*, uint8_t const*&,
                                 uint8_t const*, size_t, unsigned,
                                 uint32_t const*, unsigned, uint8_t*) {
  return 0;
}
size_t decode_rounds8_avx2(uint32_t*, uint8_t const*&, uint8_t const*, size_t,
                           unsigned, uint8_t const*, uint32_t const*,
                           uint32_t const*, uint8_t*) {
  return 0;
}
size_t decode_rounds8_avx512(uint32_t*, uint8_t const*&, uint8_t const*, size_t,
                             unsigned, uint8_t const*, uint32_t const*,
                             uint32_t const*, unsigned, uint8_t*) {
  return 0;
}
size_t decode_pair_rounds_avx512(slot_stream&, slot_stream&) { return 0; }
bool narrow_pair_rounds() { return false; }
size_t decode_narrow_pair_rounds_avx2(slot_stream&, slot_stream&) { return 0; }

bool encode_rounds_avx512(uint32_t*, uint8_t*&, uint8_t const*, size_t,
                          uint32_t, uint32_t const*, uint32_t, uint32_t const*,
                          uint32_t) {
  return false;
}
bool encode_rounds_keyed_avx512(unsigned, uint32_t*, uint8_t*&, uint8_t const*,
                                size_t, uint32_t, keyed_tables const&) {
  return false;
}
bool encode_rounds_avx2(unsigned, unsigned, uint32_t*, uint8_t*&,
                        uint8_t const*, size_t, uint32_t, uint32_t const*,
                        uint32_t, uint32_t const*, uint32_t) {
  return false;
}
void fill_slots_avx512(table const&, uint32_t*, uint16_t*) {}
void fill_slots_avx2(table const&, uint32_t*, uint16_t*) {}

#endif

}  // namespace brevis::codec::rans_static::simd
