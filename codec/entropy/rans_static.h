#pragma once
// A static order-0 rANS coder over 8- or 16-bit symbols, with a frequency
// table supplied from outside (the program blob holds it once per tensor).
//
// Coder: 32-bit states in [2^16, 2^32), 16-bit renormalization, L states
// interleaved round-robin (symbol i belongs to state i % L) so that decoding
// is throughput-bound rather than latency-bound: L = 8 below wide_at
// symbols (2^16 by default; the rans_static leaf's parameter lowers it),
// where the states' bytes would show, else 32 (a round of 32 table lookups
// keeps the memory system busy; AVX-512 or AVX2 decode it 16 or 8 lanes
// at a time where the CPU has them).
// Frequencies sum to 2^scale, scale <= 16, which guarantees at most one
// 16-bit word per symbol.
//
// Payload (count > 0 and more than one symbol in the table):
//   L final encoder states, u32 LE each, then the renormalization words, u16
//   LE, in the order the decoder consumes them. A table with a single symbol
//   codes any count in zero bytes (the symbol costs no information).
// The decoder checks that every word is consumed and that every state ends at
// its initial value 2^16, so most corruption is detected.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/core/init_once.h"

namespace brevis::codec::rans_static {

inline constexpr unsigned max_scale = 16;
/// States of payloads of fewer than wide_at symbols (wide_from by default).
inline constexpr unsigned lanes = 8;
/// States of payloads of at least wide_at symbols.
inline constexpr unsigned wide_lanes = 32;
/// log2 of wide_from: the format's default, which a leaf may lower (its
/// one parameter, FORMAT.md section 4.6).
inline constexpr unsigned wide_from_log2 = 16;
inline constexpr uint64_t wide_from = uint64_t{1} << wide_from_log2;
/// limit_simd's default level.
inline constexpr unsigned simd_tuned = 4;

/// The number of interleaved states for a payload of `count` symbols, wide
/// from `wide_at` symbols on.
constexpr unsigned lanes_for(uint64_t count, uint64_t wide_at = wide_from) {
  return count >= wide_at ? wide_lanes : lanes;
}

/// A normalized frequency table: symbols strictly increasing, every freq >= 1,
/// freqs summing to exactly 2^scale.
struct table {
  unsigned scale = max_scale;
  std::vector<uint32_t> symbols;
  std::vector<uint32_t> freqs;

  friend bool operator==(table const&, table const&) = default;
};

/// Throws errc::corrupt unless `t` is a valid table for symbols of
/// `symbol_bits` bits (8 or 16).
void validate(table const& t, unsigned symbol_bits);

/// Histogram of the symbols (lanes of `width` bytes, 1 or 2) of `data`;
/// `hist` gets 2^(8 width) entries.
void histogram(byte_view data, unsigned width, std::vector<uint64_t>& hist);

/// The frequencies summing to 2^scale that minimize the coded size of a
/// source with histogram `hist` (indexed by symbol), every present symbol
/// getting at least 1. Requires 1 <= present symbols <= 2^scale.
table normalize(std::span<uint64_t const> hist, unsigned scale);
/// The same from the present symbols (increasing) and their counts (> 0).
table normalize(std::span<uint32_t const> symbols,
                std::span<uint64_t const> counts, unsigned scale);
/// Frequencies as normalize's, within ~1e-5 of its optimum rather than at
/// it: a few linear passes instead of heap moves (the fp16 tables of the
/// four slowest corpus files: 54 -> 27 ms). For tables that are quantized
/// next, which moves large frequencies by more than that: quantized, the
/// corpus's 16-bit tables of 300 symbols or more code 0.007% smaller
/// (estimate), and its bf16/fp16 files compress to +118 B of 294 MB.
table normalize_near(std::span<uint32_t const> symbols,
                     std::span<uint64_t const> counts, unsigned scale);

/// Coded payload size in bits of a source with histogram `hist` under `t`
/// (counts of symbols absent from `t` are ignored), framing included.
double coded_bits(std::span<uint64_t const> hist, table const& t);
/// The same with counts[i] the count of t.symbols[i].
double coded_bits_of_counts(std::span<uint64_t const> counts, table const& t);

/// Order-0 empirical entropy of a histogram, in bits (the whole source).
double entropy_bits(std::span<uint64_t const> hist);

/// Caps the vector code coding may use: 0 scalar, 1 up to AVX2, 2 up to
/// AVX-512 without IFMA, 3 up to AVX-512 with IFMA, 4 (the default) the
/// kernels measured fastest on this kind of CPU among those (each only where
/// the CPU has it). For tests, which check that every path codes the same:
/// a CPU with IFMA would otherwise never run the AVX-512 kernels that CPUs
/// without it run (and, with tune_for below, nor one kind of CPU the
/// kernels tuned for another).
void limit_simd(unsigned level);

/// The kind of CPU whose kernels the tuned level picks: the one detected
/// (the default), or for tests another, so that one machine runs what each
/// kind runs (each kernel still only where the CPU has its instructions):
/// `other` as Intel's, `zen` as Zen 2 and Zen 5, `zen4` as Zen 4.
enum class tuning { detected, other, zen, zen4 };
void tune_for(tuning kind);

/// Per-table precomputed state for coding; cheap to build (proportional to
/// the alphabet and to 2^scale), immutable afterwards, shareable by threads.
class coder {
 public:
  /// `t` must have passed validate(t, 8 * width). Taken by value: a parsed
  /// table moves in (a 16-bit one is up to 512 KiB to copy).
  coder(table t, unsigned width);
  ~coder();
  coder(coder const&) = delete;
  coder& operator=(coder const&) = delete;

  unsigned width() const { return width_; }
  /// The bytes of the tables decoding builds (whether built yet or not).
  size_t decode_table_bytes() const;
  /// Whether decoding has built them (a coder that only encoded has not).
  bool decoder_built() const { return dec_once_.done(); }
  /// The bytes of the tables encoding has built (0 before it first ran).
  size_t encode_table_bytes() const;

  /// Appends the payload coding data.size() / width symbols (data is a whole
  /// number of lanes), with wide_lanes states from `wide_at` symbols on
  /// (lanes_for). Throws errc::domain on a symbol absent from the table.
  void encode(byte_view data, bytes& out, uint64_t wide_at = wide_from) const;

  /// Decodes exactly `count` symbols (count * width bytes into `out`) of a
  /// payload encoded with the same `wide_at`. Throws errc::corrupt or
  /// errc::truncated on a malformed payload, never reading outside it.
  void decode(byte_view payload, size_t count, uint8_t* out,
              uint64_t wide_at = wide_from) const;

  /// The arguments of one decode call.
  struct decode_job {
    coder const* c;
    byte_view payload;
    size_t count;
    uint8_t* out;
    uint64_t wide_at = wide_from;
  };
  /// a.c->decode(...) then b.c->decode(...), with the same output and
  /// errors, but where both are wide and decode from slot tables with
  /// AVX-512, or both narrow with AVX2 (on Zen), their vector rounds
  /// alternate: a stream's rounds wait on their gathers, the other stream's
  /// fill the wait. After a throw both outputs are unspecified (b's may be
  /// partly written even where a's payload was the bad one).
  static void decode_pair(decode_job const& a, decode_job const& b);
  /// Every job's decode, as decode() of each in turn, with the same outputs;
  /// throws if and only if one of those would (which error, where several
  /// payloads are bad, is unspecified, and so is every output after a
  /// throw). The jobs decode_pair can pair are paired: wide with wide,
  /// narrow with narrow, the longest first, so that a pair's streams run
  /// together for most of their lengths (jointly only while both have
  /// symbols left) and the one left over is the shortest.
  static void decode_siblings(std::span<decode_job const> jobs);

 private:
  // Where a decode continues after rounds decoded elsewhere (decode_pair):
  // the symbols done, the states and the next word.
  struct resume_point {
    size_t i;
    uint32_t const* x;
    uint8_t const* p;
  };
  // Whether decode_pair can take this decode's rounds: wide ones (AVX-512),
  // or narrow ones (AVX2).
  bool pairs_slot_rounds(decode_job const& j, bool wide) const;
  // decode_pair's rounds of two payloads of n_lanes states from slot tables.
  template <unsigned n_lanes>
  static void decode_slot_pair(decode_job const& a, decode_job const& b);
  struct enc_entry {
    uint64_t rcp;    // ceil(2^63 / freq): exact division for 32-bit states
    uint32_t x_max;  // renormalize when state >= x_max
    uint16_t bias;   // start
    uint16_t cmpl;   // 2^scale - freq (freq >= 1, and < 2^16 with 2 symbols)
  };

  template <typename sym, unsigned n_lanes>
  void encode_impl(uint8_t const* in, size_t count, bytes& out) const;
  enum class slot_layout { slots, compact, packed };
  template <typename sym, unsigned n_lanes, unsigned fixed_scale,
            slot_layout layout>
  void decode_impl(byte_view payload, size_t count, uint8_t* out,
                   resume_point const* from) const;
  template <typename sym, unsigned n_lanes>
  void dispatch_decode(byte_view payload, size_t count, uint8_t* out,
                       resume_point const* from = nullptr) const;

  // 8-bit symbols at 2^15 and 2^16 slots decode from compact tables (below,
  // measured faster there: the 6-byte slots no longer fit L2 comfortably and
  // cost more to fill), and so do 16-bit symbols of tables of at most 256
  // (by their index) from 2^14 slots (measured: 0.69 against 0.80 ns a
  // symbol at 2^14, 0.79 against 1.15 at 2^16; 0.68 against 0.58 at 2^12,
  // where the slots fit L1). Other tables decode from the slots.
  static constexpr size_t compact_symbols = 256;
  static bool compact_layout(table const& t, unsigned width) {
    return width == 1 ? t.scale >= 15
                      : t.scale >= 14 && t.symbols.size() <= compact_symbols;
  }

  // Tables of at most 2^13 slots whose fields fit decode from packed slots
  // instead, one 32-bit word a slot: freq | (slot - start) << b |
  // symbol << 2b, b the bits of the largest freq (slot - start < freq needs
  // no more), so the AVX2 rounds look up once a symbol, not twice
  // (blazepose-heavy.bf16's 8-bit streams at 2^10 and 2^12: 0.68 against
  // 1.03 ns a symbol). They fit where 2b plus the largest symbol's bits
  // are at most 32: bytes at 2^12 always, and at 2^13 bf16's 9-bit sign and
  // exponent fields unless one symbol holds a quarter of the slots. Only
  // where AVX2 decodes and AVX-512 does not (it has no packed kernel): the
  // scalar loop is 4% slower from packed slots.
  static constexpr unsigned packed_max_scale = 13;
  /// b for packed slots of `t`, or 0 if they do not fit.
  static unsigned packed_field_bits(table const& t);

  void build_encoder() const;
  void build_decoder() const;

  table table_;
  unsigned width_;
  unsigned scale_;
  bool single_;
  uint32_t single_symbol_ = 0;
  // Built on first use (a coder usually only encodes or only decodes).
  mutable init_once enc_once_, dec_once_;
  // symbol -> index in enc_, or ~0; at least up to the largest symbol.
  mutable std::vector<uint32_t> enc_index_;
  mutable std::vector<enc_entry> enc_;
  // The same by field for the vector code: bias | cmpl << 16 (it divides
  // by freq in float and corrects the quotient; x_max it computes), 0 for
  // absent symbols. Indexed like enc_, or by the symbol (below); 8-bit
  // symbols always by the symbol, all 256 of them.
  mutable std::vector<uint32_t> enc_bias_cmpl_;
  // 16-bit symbols all below direct16_end get those by the symbol too:
  // 1 + the largest symbol, else 0.
  static constexpr uint32_t direct16_end = 4096;
  mutable uint32_t enc_direct_end_ = 0;
  // Bias and freq by the keys of simd::keyed_tables, for 8-bit symbols and
  // 16-bit ones with keys (below 256): those the vector code looks up in
  // registers, without gathers. enc_keyed_.blocks is 0 for other tables.
  mutable std::array<uint16_t, 256> enc_key_bias_{}, enc_key_freq_{};
  struct keyed {
    unsigned blocks = 0;
    unsigned fold = 0;
    uint16_t low[2] = {0, 0};
  };
  mutable keyed enc_keyed_;
  void build_keyed_tables() const;

  // 2^scale slots in two arrays (together 6 bytes a slot, so that the table
  // at 2^16 stays well inside L2): freq | (slot - start) << 16 (freq < 2^16
  // when the table has more than one symbol), and the symbol, with one
  // padding entry so that 4-byte gathers of the last symbol stay inside.
  // Not vectors: every slot is written once, without a zero-fill first;
  // and recycled through a process-wide pool, since fresh ones this large
  // come from mmap and cost a page fault every 4 KiB.
  mutable std::unique_ptr<uint32_t[]> dec_step_;
  mutable std::unique_ptr<uint16_t[]> dec_symbol_;
  mutable uint32_t dec_slots_ = 0;  // the arrays' capacity
  // compact_layout uses these instead: the key of each slot's symbol (1 byte
  // a slot, so that the table at 2^16 is 64 KiB, mostly in L1, and cheap to
  // fill; 3 bytes of padding for 4-byte gathers), and per key
  // freq | start << 16, which the vector code keeps in registers. The key is
  // the symbol itself if 8-bit, else its index in the table, and
  // dec_symbol16_ the symbol of each index.
  mutable std::unique_ptr<uint8_t[]> dec_symbol8_;
  mutable std::array<uint32_t, 256> dec_freq_start_{};
  mutable std::array<uint32_t, compact_symbols> dec_symbol16_{};
  mutable unsigned dec_symbol_end_ = 0;  // 1 + the largest key
  // The packed slots (2^scale of them), and their field bits b.
  mutable std::unique_ptr<uint32_t[]> dec_packed_;
  bool compact_ = false;
  unsigned packed_bits_ = 0;  // 0: not packed
  bool packed() const { return packed_bits_ != 0; }
};

}  // namespace brevis::codec::rans_static
