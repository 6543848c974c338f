#pragma once
// Vector kernels of the rans_static coder (codec/entropy/rans_static.h) for
// x86-64 CPUs with AVX2 or AVX-512, chosen at run time; the coder keeps a
// scalar path for other CPUs and for the ends of payloads. Every kernel
// reads and writes exactly what the scalar loops would (the tests compare
// them), so the payload format does not depend on the CPU.

#include <cstddef>
#include <cstdint>

#include "codec/entropy/rans_static.h"

namespace brevis::codec::rans_static::simd {

inline constexpr uint32_t state_low = 1u << 16;  // states live in [2^16, 2^32)

/// The default level: every kernel the CPU has, each where it was measured
/// faster on this CPU's kind (AMD: see zen_tuned in the .cpp).
inline constexpr unsigned tuned = simd_tuned;
/// Whether a kernel may run: the CPU has its instructions, and set_cap
/// allows them (0 scalar, 1 AVX2, 2 AVX-512, 3 AVX-512 with IFMA, `tuned`).
bool avx2();          // decode_rounds_avx2, fill_slots_avx2, encode (wide)
bool avx512();        // decode_rounds_avx512
bool avx512_bw_vl();  // encode_rounds_avx512, fill_slots_avx512
bool avx512_ifma();   // the decode kernels' IFMA instances
bool pair_rounds();   // decode_pair_rounds_avx512
// The AVX2 kernels of narrow payloads (one vector of 8 states): measured
// faster on Zen 2 (an EPYC of family 23 model 49; older notes call it Zen
// 3) and, for the pair, on Zen 4 (below). Intel's gathers are slow since
// the GDS microcode fix, so there (unmeasured) narrow payloads stay on the
// scalar loops.
bool narrow_encode_rounds();  // encode_rounds_avx2 on narrow payloads
// decode_narrow_pair_rounds_avx2 and decode_narrow_packed_rounds_avx2: on
// Zen without AVX-512, and on Zen 4, where the pair of a bf16 tensor's
// 8-bit and 9-bit fields decodes at 1.1-1.3 ns a symbol against 2.0-2.3 in
// the scalar loops (brevis_rans_static_bench, 30000 symbols; Zen 5 not
// measured, so not there). AVX-512 machines have no packed slots: only
// the pair runs there.
bool narrow_pair_rounds();
void set_cap(unsigned level);
/// rans_static::tune_for's kind.
void set_tuning(tuning kind);

/// Decodes whole rounds of wide_lanes symbols of `width` bytes (1 or 2)
/// into `out`, from the states `x` and the words at `p` (advanced), while a
/// round of symbols and the words a round may read (2 * wide_lanes bytes)
/// remain before `count` and `end`. `step` and `symbol` are the coder's
/// 2^scale decode slots (`symbol` with one entry of padding). Returns the
/// symbols decoded; the caller finishes the rest.
size_t decode_rounds_avx2(unsigned width, uint32_t* x, uint8_t const*& p,
                          uint8_t const* end, size_t count, unsigned scale,
                          uint32_t const* step, uint16_t const* symbol,
                          uint8_t* out);
/// decode_rounds_avx2 from the coder's packed slots (2^scale of them):
/// freq | (slot - start) << b | symbol << 2b, b = `field_bits`.
size_t decode_packed_rounds_avx2(unsigned width, uint32_t* x, uint8_t const*& p,
                                 uint8_t const* end, size_t count,
                                 unsigned scale, uint32_t const* packed,
                                 unsigned field_bits, uint8_t* out);
/// The same for a narrow payload (`lanes` states, one vector): 0 unless
/// narrow_pair_rounds().
size_t decode_narrow_packed_rounds_avx2(unsigned width, uint32_t* x,
                                        uint8_t const*& p, uint8_t const* end,
                                        size_t count, unsigned scale,
                                        uint32_t const* packed,
                                        unsigned field_bits, uint8_t* out);
size_t decode_rounds_avx512(unsigned width, uint32_t* x, uint8_t const*& p,
                            uint8_t const* end, size_t count, unsigned scale,
                            uint32_t const* step, uint16_t const* symbol,
                            uint8_t* out);

/// One of two wide streams decoded together from slot tables: the arguments
/// of decode_rounds_avx512 (`x` and `p` advanced by the call).
struct slot_stream {
  unsigned width;
  uint32_t* x;
  uint8_t const* p;
  uint8_t const* end;
  size_t count;
  unsigned scale;
  uint32_t const* step;
  uint16_t const* symbol;
  uint8_t* out;
  // Packed slots instead of step and symbol (decode_packed_rounds_avx2's),
  // and their field bits: only the narrow AVX2 pair takes them.
  uint32_t const* packed = nullptr;
  unsigned packed_bits = 0;
};
/// Whole rounds of both streams, alternating their groups so that twice as
/// many gathers are in flight; stops where either stream would stop alone.
/// Returns the symbols decoded from each (as many from both; 0 unless
/// pair_rounds()): the callers finish each stream alone.
size_t decode_pair_rounds_avx512(slot_stream& a, slot_stream& b);
/// The same for two narrow streams (`lanes` states each, so one vector of
/// states each) with AVX2: 0 unless narrow_pair_rounds().
size_t decode_narrow_pair_rounds_avx2(slot_stream& a, slot_stream& b);

/// The same from the coder's compact tables: `symbol8` the key of each
/// slot's symbol (3 bytes of padding), `freq_start` per key
/// freq | start << 16; the key is the symbol if `symbol16` is null (8-bit
/// symbols), else 16-bit symbols are symbol16[key]. `key_end` is 1 + the
/// largest key (the AVX-512 kernel keeps the tables up to it in registers).
size_t decode_rounds8_avx2(uint32_t* x, uint8_t const*& p, uint8_t const* end,
                           size_t count, unsigned scale, uint8_t const* symbol8,
                           uint32_t const* freq_start, uint32_t const* symbol16,
                           uint8_t* out);
size_t decode_rounds8_avx512(uint32_t* x, uint8_t const*& p, uint8_t const* end,
                             size_t count, unsigned scale,
                             uint8_t const* symbol8, uint32_t const* freq_start,
                             uint32_t const* symbol16, unsigned key_end,
                             uint8_t* out);

/// Encodes the 16-bit symbols [0, rounds_end) of `in` (a multiple of
/// wide_lanes, after the scalar tail) backwards from the states `x`, writing
/// words below `p` (moved down). `index` maps symbols below index_end to
/// their index (~0 if absent; symbols past it are absent), and `bias_cmpl`
/// holds bias | cmpl << 16 by index; or with direct_end > 0 by the symbol
/// itself, in a table of direct_end entries (0 for absent symbols, and
/// symbols past it absent), which saves a lookup. Returns true if some
/// symbol is absent from the table (the payload is then junk). (8-bit
/// symbols always have keyed tables, below.)
bool encode_rounds_avx512(uint32_t* x, uint8_t*& p, uint8_t const* in,
                          size_t rounds_end, uint32_t total,
                          uint32_t const* index, uint32_t index_end,
                          uint32_t const* bias_cmpl, uint32_t direct_end = 0);

/// encode_rounds_avx512 for CPUs with AVX2, 8 states a vector, in payloads
/// of `n_lanes` states (lanes or wide_lanes; rounds_end a multiple of it),
/// of symbols of `width` bytes (1 or 2). 8-bit symbols are always by the
/// symbol: `bias_cmpl` then has 256 entries (direct_end is ignored).
/// Writes up to 16 bytes below the words it emits (a whole shuffled vector
/// ending where they end): the caller's buffer must hold, below `p`, room
/// for 2 bytes a symbol plus the states (encode_impl's `room`), so those
/// bytes land where later words or the states go.
bool encode_rounds_avx2(unsigned width, unsigned n_lanes, uint32_t* x,
                        uint8_t*& p, uint8_t const* in, size_t rounds_end,
                        uint32_t total, uint32_t const* index,
                        uint32_t index_end, uint32_t const* bias_cmpl,
                        uint32_t direct_end = 0);

/// Tables small enough for the vector encoder to keep in registers: 16-bit
/// bias and freq (0: absent) of 64 * blocks keys (blocks 1 to 4). A key is
/// the symbol itself (symbols past the keys absent), or if `fold` (64 or
/// 128; 16-bit symbols, bf16's sign and exponent) o + fold * (s >> 8) for
/// o = (s & 255) - low[s >> 8] < fold and s < 2^9. Other symbols escape to
/// `bias_cmpl`, by the symbol (bias_cmpl_end entries, as
/// encode_rounds_avx512's direct table).
struct keyed_tables {
  uint16_t const* bias;
  uint16_t const* freq;
  unsigned blocks;
  unsigned fold;
  uint16_t low[2];
  uint32_t const* bias_cmpl;
  uint32_t bias_cmpl_end;
};
/// encode_rounds_avx512 from keyed tables.
bool encode_rounds_keyed_avx512(unsigned width, uint32_t* x, uint8_t*& p,
                                uint8_t const* in, size_t rounds_end,
                                uint32_t total, keyed_tables const& t);

/// Writes the decode slots of table `t` (2^scale of each array).
void fill_slots_avx512(table const& t, uint32_t* step, uint16_t* symbol);
void fill_slots_avx2(table const& t, uint32_t* step, uint16_t* symbol);

}  // namespace brevis::codec::rans_static::simd
