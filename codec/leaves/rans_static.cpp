// rans_static: static order-0 rANS over the value's lanes (8- or 16-bit
// symbols) with the frequency table held in the node's blob.
//
// Blob format (FORMAT.md section 4.6; varints are unsigned LEB128):
//   u8      scale       precision: frequencies sum to T = 2^scale, 1..16
//   u8      mode        0: the set and codes below as bytes; 1: varint
//                       length of the set, the set packed, then the K - 1
//                       code differences mod 256 packed (packed: blob
//                       inner 8-bit table in mode 0, blob rans_static
//                       payload)
//   set:  varint  R     runs of present symbols, >= 1
//         R x (varint gap, varint length - 1)
//                       a run's first symbol is gap past the previous run's
//                       end (the first run: gap is the symbol itself)
//         varint  M     the symbol (index in order) whose frequency is the
//                       remainder, < K (K = the symbols in all runs)
//   (K - 1) codes       the other symbols' frequencies, in symbol order:
//                       code c = 16e + m gives m when e = 0 (c = 0 is
//                       invalid), else (16 + m) << (e - 1)
// Frequency M is T minus the others' sum and must be >= 1. Codes keep 4-5
// significant bits (a relative error of at most 3%, costing ~0.0003 bits a
// symbol), so a table costs about a byte per symbol, rebuilt with integer
// arithmetic only.
//
// Payload: codec/entropy/rans_static.h.
#include "codec/leaves/rans_static.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "codec/choose/entropy_terms.h"
#include "codec/core/checksum.h"
#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

uint32_t dequantize(uint8_t code) {
  unsigned const e = code >> 4;
  unsigned const m = code & 15;
  return e == 0 ? m : (16u + m) << (e - 1);
}

// The code nearest to w >= 1 (w < 2^20, so the exponent fits 4 bits).
uint8_t quantize(uint32_t w) {
  if (w < 16) return static_cast<uint8_t>(w);
  unsigned sh = static_cast<unsigned>(std::bit_width(w)) - 5;
  uint32_t m = w >> sh;  // 16..31
  if (sh > 0 && ((w >> (sh - 1)) & 1)) {
    if (++m == 32) m = 16, ++sh;
  }
  return static_cast<uint8_t>(std::min(255u, ((sh + 1) << 4) | (m - 16)));
}

// quantize(f) for the small frequencies that most symbols of a large
// histogram get, from a table (4 KiB, in L1) rather than computed.
constexpr uint32_t quantized_small_size = 4096;
uint8_t const* quantized_small() {
  static auto const table = [] {
    std::array<uint8_t, quantized_small_size> t{};
    for (uint32_t f = 0; f < t.size(); ++f) t[f] = quantize(f);
    return t;
  }();
  return table.data();
}

// The frequency of each code.
std::array<uint32_t, 256> const& dequantize_table() {
  static auto const table = [] {
    std::array<uint32_t, 256> v{};
    for (unsigned c = 0; c < 256; ++c) {
      v[c] = dequantize(static_cast<uint8_t>(c));
    }
    return v;
  }();
  return table;
}

// Index of the first largest frequency.
size_t first_max(std::vector<uint32_t> const& f) {
  return static_cast<size_t>(std::max_element(f.begin(), f.end()) - f.begin());
}

// quantize_rans_static_table in place. The remainder symbol (the first
// largest) absorbs the others' rounding; it is pulled back toward its own
// frequency by moving the largest others one step the way they were
// rounded (in order of decreasing frequency, ties by index), and stays >= 1:
// undoing every rounding up leaves it at least its own frequency. Codes
// hold every frequency below 32 exactly, and most of a large table's are
// that small, so only the symbols that rounding moved are visited twice.
void quantize_in_place(rans_static::table& t) {
  size_t const k = t.symbols.size();
  fail_if(k == 0 || t.freqs.size() != k, errc::domain,
          "rans_static: empty or ragged table");
  fail_if(t.scale < 1 || t.scale > rans_static::max_scale, errc::domain,
          "rans_static: table precision out of range");
  uint64_t const total = uint64_t{1} << t.scale;
  char const* const unsummed =
      "rans_static: frequencies do not sum to the precision";
  if (k == 1) {
    fail_if(t.freqs[0] != total, errc::domain, unsummed);
    return;
  }
  size_t const rem = first_max(t.freqs);
  int64_t const want = t.freqs[rem];
  struct rounded {
    uint32_t key;  // 0xffff - min(freq, 0xffff): decreasing frequency
    uint32_t i;
    uint32_t freq;
    uint8_t code;
  };
  thread_local std::vector<rounded> moved;
  moved.clear();
  int64_t sum = 0;
  uint64_t others = 0;  // the frequencies' sum but the remainder's
  for (size_t i = 0; i < k; ++i) {
    if (i == rem) continue;
    uint32_t const f = t.freqs[i];
    others += f;
    uint8_t const c = quantize(f);
    uint32_t const q = dequantize(c);
    sum += q;
    if (q != f) {
      moved.push_back({0xffffu - std::min<uint32_t>(f, 0xffff),
                       static_cast<uint32_t>(i), f, c});
    }
  }
  fail_if(others + t.freqs[rem] != total, errc::domain, unsummed);
  std::sort(moved.begin(), moved.end(), [](rounded const& a, rounded const& b) {
    return a.key != b.key ? a.key < b.key : a.i < b.i;
  });
  auto remainder = [&] { return static_cast<int64_t>(total) - sum; };
  for (rounded& m : moved) {
    if (remainder() >= want) break;  // it only grows here
    if (dequantize(m.code) > m.freq && m.code > 1) {
      sum -= dequantize(m.code) - dequantize(m.code - 1);
      --m.code;
    }
  }
  for (rounded& m : moved) {
    if (m.code == 255) continue;
    uint32_t const up = dequantize(m.code + 1) - dequantize(m.code);
    if (dequantize(m.code) < m.freq && remainder() - up >= want) {
      sum += up;
      ++m.code;
    }
  }
  for (rounded const& m : moved) t.freqs[m.i] = dequantize(m.code);
  t.freqs[rem] = static_cast<uint32_t>(remainder());
}

}  // namespace

rans_static::table quantize_rans_static_table(rans_static::table const& t) {
  rans_static::table q = t;
  quantize_in_place(q);
  return q;
}

rans_static::table quantized_rans_static_table(
    std::span<uint32_t const> symbols, std::span<uint64_t const> counts,
    unsigned scale) {
  rans_static::table t =
      symbols.size() <= exact_table_symbols
          ? rans_static::normalize(symbols, counts, scale)
          : rans_static::normalize_near(symbols, counts, scale);
  quantize_in_place(t);
  return t;
}

namespace {

rans_static::table parse_rans_static_inner(byte_view blob);

// Appends `data` rANS-coded with a small table of its own: blob inner table
// (8-bit symbols, mode 0), blob payload.
void put_packed(bytes& out, byte_view data);

// The blob's symbol set: runs of consecutive symbols, then the remainder's
// index. Each run's first index is found without a branch a symbol (fp16
// sets break into runs unpredictably).
bytes symbol_set(std::span<uint32_t const> symbols, size_t rem) {
  size_t const k = symbols.size();
  // (Thread-local: serialize_table's inner tables come here only after
  // their outer table's set is written.)
  thread_local std::vector<uint32_t> run_start;
  run_start.resize(k + 1);
  size_t runs = 1;
  uint32_t* const starts = run_start.data();
  starts[0] = 0;
  for (size_t i = 1; i < k; ++i) {
    starts[runs] = static_cast<uint32_t>(i);  // kept only if a run starts
    runs += symbols[i] != symbols[i - 1] + 1;
  }
  starts[runs] = static_cast<uint32_t>(k);
  bytes set;
  set.reserve(3 * (2 * runs + 2));  // varints of < 2^21
  put_varint(set, runs);
  uint64_t next = 0;
  for (size_t r = 0; r < runs; ++r) {
    uint32_t const first = symbols[starts[r]];
    uint32_t const length = starts[r + 1] - starts[r];
    put_varint(set, first - next);
    put_varint(set, length - 1);
    next = uint64_t{first} + length;
  }
  put_varint(set, rem);
  return set;
}

// The table blob; `coded` allows mode 1 (never inside the inner tables).
bytes serialize_table(rans_static::table const& t, bool coded) {
  size_t const k = t.symbols.size();
  fail_if(k == 0, errc::domain, "rans_static: empty table");
  // Every symbol's code (small frequencies' from a table), and the
  // remainder symbol: the one frequency codes cannot hold, else the
  // largest (then any choice decodes to the same table).
  uint8_t const* const small_codes = quantized_small();
  std::array<uint32_t, 256> const& dequantized = dequantize_table();
  bytes codes(k);
  size_t rem = k;
  for (size_t i = 0; i < k; ++i) {
    uint32_t const f = t.freqs[i];
    uint8_t const c = f < quantized_small_size ? small_codes[f] : quantize(f);
    codes[i] = c;
    if (dequantized[c] != f) {
      fail_if(rem != k, errc::domain,
              "rans_static: table is not quantized "
              "(quantize_rans_static_table)");
      rem = i;
    }
  }
  if (rem == k) rem = first_max(t.freqs);
  codes.erase(codes.begin() + static_cast<ptrdiff_t>(rem));
  bytes const set = symbol_set(t.symbols, rem);
  bytes out;
  put_u8(out, static_cast<uint8_t>(t.scale));
  // Mode 1: the set's bytes and the code differences (neighbouring symbols
  // have similar frequencies), each rANS-coded with a small table.
  if (coded && codes.size() >= 64) {
    bytes deltas(codes.size());
    uint8_t prev = 0;
    for (size_t i = 0; i < codes.size(); ++i) {
      deltas[i] = static_cast<uint8_t>(codes[i] - prev);
      prev = codes[i];
    }
    bytes packed = out;
    put_u8(packed, 1);
    put_varint(packed, set.size());
    put_packed(packed, set);
    put_packed(packed, deltas);
    if (packed.size() < out.size() + 1 + set.size() + codes.size()) {
      return packed;
    }
  }
  put_u8(out, 0);
  put_bytes(out, set);
  put_bytes(out, codes);
  return out;
}

void put_packed(bytes& out, byte_view data) {
  std::vector<uint64_t> hist;
  rans_static::histogram(data, 1, hist);
  rans_static::table const inner = choose_rans_static_table(hist);
  put_blob(out, serialize_table(inner, false));
  bytes payload;
  rans_static::coder(inner, 1).encode(data, payload);
  put_blob(out, payload);
}

// Decodes `count` bytes written by put_packed.
bytes get_packed(byte_reader& r, size_t count) {
  rans_static::table inner =
      parse_rans_static_inner(r.blob(r.remaining(), "rans_static inner table"));
  byte_view const payload = r.blob(r.remaining(), "rans_static packed bytes");
  bytes out(count);
  rans_static::coder(std::move(inner), 1).decode(payload, count, out.data());
  return out;
}

// A blob's head: its precision and symbols (into `t`; with `list` false,
// only their number, into `count`) and its mode (into `mode`), read from
// `r`, which is left at the frequency codes; returns the remainder's index.
uint64_t parse_head(byte_reader& r, unsigned width, bool coded, bool list,
                    rans_static::table& t, size_t& count, uint8_t& mode) {
  fail_if(width != 1 && width != 2, errc::corrupt,
          "rans_static: symbols are 8 or 16 bits");
  uint64_t const alphabet = uint64_t{1} << (8 * width);
  t.scale = r.u8();
  fail_if(t.scale < 1 || t.scale > rans_static::max_scale, errc::corrupt,
          "rans_static: table precision out of range");
  uint64_t const total = uint64_t{1} << t.scale;
  mode = r.u8();
  fail_if(mode > 1 || (mode == 1 && !coded), errc::corrupt,
          "rans_static: unknown table mode");
  bytes set_bytes;
  if (mode == 1) {
    // At most 1 + 2 x 65536 three-byte varints + a remainder.
    uint64_t const n = r.varint_max(6u << 16, "rans_static set length");
    set_bytes = get_packed(r, n);
  }
  byte_reader set_reader(set_bytes);
  byte_reader& sr = mode == 1 ? set_reader : r;
  uint64_t const runs = sr.varint();
  // Each run takes at least two bytes: bounds the loop.
  fail_if(runs < 1 || runs > alphabet, errc::corrupt,
          "rans_static: run count out of range");
  fail_if(runs * 2 > sr.remaining(), errc::truncated,
          "rans_static: table shorter than its run count");
  uint64_t next = 0;
  count = 0;
  // The runs first, then the symbols at their count: growing the list a
  // run at a time cost more than reading the set (fp16 tables have
  // thousands of short runs).
  // (Thread-local: the inner tables' parses, of a packed set above and of
  // packed codes after this head, use it before and after this one.)
  thread_local std::vector<std::pair<uint32_t, uint32_t>> read;  // first, n
  read.clear();
  for (uint64_t i = 0; i < runs; ++i) {
    uint64_t const gap = sr.varint();
    uint64_t const length = sr.varint();
    fail_if(gap >= alphabet || length >= alphabet ||
                next + gap + length >= alphabet,
            errc::corrupt, "rans_static: symbol out of range");
    uint64_t const first = next + gap;
    fail_if(count + length + 1 > total, errc::corrupt,
            "rans_static: more symbols than the precision allows");
    count += length + 1;
    if (list) {
      read.emplace_back(static_cast<uint32_t>(first),
                        static_cast<uint32_t>(length + 1));
    }
    next = first + length + 1;
  }
  if (list) {
    // Short runs (most of a 16-bit table's) as 8 symbols written at once,
    // the next run's overwriting the excess: a loop a run mispredicted its
    // exit at every run.
    constexpr uint32_t block = 8;
    t.symbols.resize(count + block);
    uint32_t* to = t.symbols.data();
    for (auto const& [first, n] : read) {
      if (n <= block) {
        for (uint32_t j = 0; j < block; ++j) to[j] = first + j;
      } else {
        for (uint32_t j = 0; j < n; ++j) to[j] = first + j;
      }
      to += n;
    }
    t.symbols.resize(count);
  }
  uint64_t const rem = sr.varint();
  fail_if(rem >= count, errc::corrupt,
          "rans_static: remainder symbol out of range");
  fail_if(mode == 1 && !set_reader.empty(), errc::corrupt,
          "rans_static: trailing symbol set bytes");
  return rem;
}

rans_static::table parse_table(byte_view blob, unsigned width, bool coded) {
  byte_reader r(blob);
  rans_static::table t;
  uint8_t mode = 0;
  size_t count = 0;
  uint64_t const rem = parse_head(r, width, coded, true, t, count, mode);
  uint64_t const total = uint64_t{1} << t.scale;
  size_t const k = t.symbols.size();
  bytes packed_codes;
  byte_view codes;
  if (mode == 0) {
    fail_if(r.remaining() != k - 1, errc::corrupt,
            "rans_static: table codes do not match its symbols");
    codes = r.rest();
  } else {
    packed_codes = get_packed(r, k - 1);
    fail_if(!r.empty(), errc::corrupt, "rans_static: trailing table bytes");
    uint8_t prev = 0;
    for (uint8_t& c : packed_codes) prev = c = static_cast<uint8_t>(prev + c);
    codes = packed_codes;
  }
  // Codes dequantized from a table (the 16-bit tables' up to 2^16 symbols;
  // a zero code dequantizes to 0, checked once after the loop).
  std::array<uint32_t, 256> const& dequantized = dequantize_table();
  t.freqs.resize(k);
  uint64_t sum = 0;
  bool zero = false;
  auto const fill = [&](size_t from, size_t to, uint8_t const* c) {
    for (size_t i = from; i < to; ++i) {
      zero |= c[i - from] == 0;
      t.freqs[i] = dequantized[c[i - from]];
      sum += t.freqs[i];
    }
  };
  fill(0, rem, codes.data());
  fill(rem + 1, k, codes.data() + rem);
  fail_if(zero, errc::corrupt, "rans_static: zero frequency code");
  fail_if(sum >= total, errc::corrupt,
          "rans_static: frequencies exceed the precision");
  t.freqs[rem] = static_cast<uint32_t>(total - sum);
  rans_static::validate(t, 8 * width);
  return t;
}

rans_static::table parse_rans_static_inner(byte_view blob) {
  return parse_table(blob, 1, false);
}

}  // namespace

bytes serialize_rans_static_table(rans_static::table const& t) {
  return serialize_table(t, true);
}

rans_static::table parse_rans_static_table(byte_view blob, unsigned width) {
  return parse_table(blob, width, true);
}

size_t rans_static_table_symbols(byte_view blob, unsigned width) {
  byte_reader r(blob);
  rans_static::table t;
  uint8_t mode = 0;
  size_t count = 0;
  // Counted, not listed: a 16-bit table's set lists up to 2^16 symbols.
  parse_head(r, width, true, false, t, count, mode);
  return count;
}

namespace {
std::atomic<uint64_t>& coders_built() {  // by coder_for, below
  static std::atomic<uint64_t> n{0};
  return n;
}
}  // namespace

uint64_t rans_static_coders_built() {
  return coders_built().load(std::memory_order_relaxed);
}

unsigned rans_static_scale_for(size_t symbols, uint64_t count) {
  // 2^16 suits large values: their rare symbols each need a frequency of at
  // least one (coarser precisions measured 0.1% larger on bf16 weights). A
  // value of n <= 2^s symbols loses almost nothing at 2^s (every count maps
  // to a frequency >= 1), and decoders build a 2^s-slot table per table, so
  // small values get small precisions; 4 slots per symbol at least.
  uint64_t const want = std::max<uint64_t>(4 * uint64_t{symbols}, count);
  unsigned s = 10;
  while (s < rans_static::max_scale && (uint64_t{1} << s) < want) ++s;
  return s;
}

namespace {

// The present symbols of `hist` and their counts.
void present_of(std::span<uint64_t const> hist, std::vector<uint32_t>& symbols,
                std::vector<uint64_t>& counts) {
  for (size_t s = 0; s < hist.size(); ++s) {
    if (hist[s] == 0) continue;
    symbols.push_back(static_cast<uint32_t>(s));
    counts.push_back(hist[s]);
  }
}

// The choice of choose_rans_static_table; with `blob`, also the chosen
// table's blob, from the comparison where it made one.
rans_static::table choose_table(std::span<uint32_t const> symbols,
                                std::span<uint64_t const> counts, bytes* blob) {
  fail_if(symbols.empty(), errc::domain, "rans_static: no symbols");
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  unsigned const scale = rans_static_scale_for(symbols.size(), n);
  rans_static::table t = quantized_rans_static_table(symbols, counts, scale);
  if (symbols.size() > fast_table_symbols || scale <= fast_table_scale) {
    if (blob != nullptr) *blob = serialize_rans_static_table(t);
    return t;
  }
  // Alphabets of up to 256 symbols (bytes; bf16's mantissa, or its sign and
  // exponent) decode from slots that stay in L1 at 2^12, at 0.52-0.57 ns a
  // symbol on Zen 5 against 0.69-1.01 from the compact tables of 2^14-2^16
  // slots, and seldom lose anything there. Without the margin, the 164
  // corpus files grew 0.006% (one sparse .pt 1.8%); with it they shrink:
  // 428,015,510 -> 427,994,471 B (the store's chooser: 429,332,741 ->
  // 429,309,933), and ckpt-300m's store decodes in ~15% less CPU.
  rans_static::table fast =
      quantized_rans_static_table(symbols, counts, fast_table_scale);
  bytes fast_blob = serialize_rans_static_table(fast);
  bytes t_blob = serialize_rans_static_table(t);
  auto const bits = [&](rans_static::table const& u, bytes const& b) {
    return rans_static::coded_bits_of_counts(counts, u) +
           8.0 * static_cast<double>(b.size());
  };
  bool const take_fast =
      bits(fast, fast_blob) <= bits(t, t_blob) * (1 + fast_table_margin);
  if (blob != nullptr) *blob = std::move(take_fast ? fast_blob : t_blob);
  return take_fast ? fast : t;
}

}  // namespace

rans_static::table choose_rans_static_table(std::span<uint64_t const> hist) {
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
  present_of(hist, symbols, counts);
  return choose_table(symbols, counts, nullptr);
}

rans_static::table choose_rans_static_table(std::span<uint32_t const> symbols,
                                            std::span<uint64_t const> counts) {
  return choose_table(symbols, counts, nullptr);
}

rans_static_choice choose_rans_static(std::span<uint64_t const> hist) {
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
  present_of(hist, symbols, counts);
  return choose_rans_static(symbols, counts);
}

rans_static_choice choose_rans_static(std::span<uint32_t const> symbols,
                                      std::span<uint64_t const> counts) {
  rans_static_choice c;
  c.table = choose_table(symbols, counts, &c.blob);
  return c;
}

namespace {

// Estimated bytes put_packed writes for bytes of histogram `h` (n bytes):
// the inner table (mode 0) and the payload at its entropy.
double estimate_packed_bytes(std::array<uint64_t, 256> const& h, uint64_t n) {
  if (n == 0) return 2;
  size_t distinct = 0;
  size_t runs = 0;
  double bits = 0;
  for (size_t b = 0; b < 256; ++b) {
    if (h[b] == 0) continue;
    ++distinct;
    runs += b == 0 || h[b - 1] == 0;
    bits -= static_cast<double>(h[b]) *
            std::log2(static_cast<double>(h[b]) / static_cast<double>(n));
  }
  double const table = 2 + 1 + 2.0 * static_cast<double>(runs) + 1 +
                       static_cast<double>(distinct - 1);
  double const payload =
      distinct == 1 ? 0 : (bits + 32.0 * rans_static::lanes_for(n)) / 8;
  return 1 + table + 3 + payload;  // two blob lengths
}

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, ++n;
  return n;
}

}  // namespace

double estimate_rans_static_blob_bytes(std::span<uint32_t const> symbols,
                                       std::span<uint32_t const> freqs) {
  size_t const k = symbols.size();
  if (k <= 1) return 2 + 4;
  size_t const rem = static_cast<size_t>(
      std::max_element(freqs.begin(), freqs.end()) - freqs.begin());
  bytes const set = symbol_set(symbols, rem);  // as serialize_table's
  double const plain = 2 + static_cast<double>(set.size() + k - 1);
  if (k - 1 < 64) return plain;
  std::array<uint64_t, 256> set_hist{};
  std::array<uint64_t, 256> delta_hist{};
  for (uint8_t b : set) ++set_hist[b];
  uint8_t prev = 0;
  for (size_t i = 0; i < k; ++i) {
    if (i == rem) continue;
    uint8_t const c = quantize(std::max<uint32_t>(1, freqs[i]));
    ++delta_hist[static_cast<uint8_t>(c - prev)];
    prev = c;
  }
  double const coded = 3 + static_cast<double>(varint_size(set.size())) +
                       estimate_packed_bytes(set_hist, set.size()) +
                       estimate_packed_bytes(delta_hist, k - 1);
  return std::min(plain, coded);
}

namespace {

// Adds the bytes of varint v to `h`; returns their number.
size_t add_varint(std::array<uint64_t, 256>& h, uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7, ++n) ++h[(v & 0x7f) | 0x80];
  ++h[v];
  return n;
}

}  // namespace

double estimate_rans_static_blob_bytes(
    std::span<std::pair<uint32_t, uint32_t> const> hist, uint64_t total,
    unsigned scale, double* payload_bits) {
  size_t const k = hist.size();
  if (payload_bits != nullptr) *payload_bits = 0;
  if (k <= 1) return 2 + 4;
  // Rounded in floating point: a division per symbol would be most of this
  // estimate's time (ties may round the other way; the estimate follows).
  double const per_count =
      std::ldexp(1.0, static_cast<int>(scale)) / static_cast<double>(total);
  // The frequency codes, their deltas, the remainder (first largest) and
  // the set's runs, in one pass: the set is histogrammed as it is written,
  // and the codes' deltas are counted with the remainder's code in place,
  // then corrected once it is known (it is skipped in the blob). Where a
  // count gets at most one slot (most of a 16-bit histogram's symbols), its
  // code is 1 and its c log2 c is not needed: it is read only for the
  // others (the same terms summed in the same order as before; on
  // centernet.fp16 this estimate was 9% of compress instructions, a third
  // of it the separate passes for the terms and the deltas).
  thread_local std::vector<uint8_t> code_buffer;
  thread_local std::vector<uint32_t> run_buffer;
  code_buffer.resize(k);
  run_buffer.resize(k + 1);
  // Plain pointers: a byte stored through the vector's may alias its own
  // pointer, which the loop then reloaded (from thread-local storage) after
  // every code: a quarter of this estimate's time.
  uint8_t* const codes = code_buffer.data();
  uint32_t* const run_starts = run_buffer.data();
  std::array<uint64_t, 256> set_hist{};
  size_t set_size = 0;
  size_t runs = 0;
  size_t rem = 0;
  uint64_t rem_f = 0;
  uint64_t next = 0;
  // The symbol that continues the current run: none yet (no 32-bit symbol
  // equals it), so the first symbol starts one.
  uint64_t follows = ~uint64_t{0};
  // The codes' deltas, mostly the same few: counted into four histograms by
  // turns, so that an increment seldom waits on the previous one's store.
  std::array<std::array<uint32_t, 256>, 4> deltas{};
  uint8_t last = 0;
  // The payload: a symbol gets c * per_count slots, at least one; above one,
  // log2(c * per_count) = log2(c) + log2(per_count), c log2 c from a table.
  // `scaled` sums counts (integers, exact in a double below 2^53).
  double sum_f = 0;
  double terms = 0;
  uint64_t scaled = 0;
  uint8_t const* const small_codes = quantized_small();
  auto const step = [&](size_t i, std::array<uint32_t, 256>& delta) {
    auto const [s, c] = hist[i];
    double const exact = static_cast<double>(c) * per_count;
    // Without branches on the counts, which are as often above one slot as
    // below in a 16-bit histogram (the compiler branched on ?: of doubles,
    // mispredicting about every other symbol): max for the slots, a mask
    // on the count (c_log2_c(0) adds 0, leaving a sum of terms >= 0 as it
    // was) for the terms, so the sums are those of the large ones alone.
    uint32_t const large = -static_cast<uint32_t>(exact > 1);
    sum_f += std::max(exact, 1.0);
    terms += c_log2_c(c & large);
    scaled += c & large;
    // f = 1 where exact <= 1 (exact + 0.5 rounds to 0 or 1 there; a large
    // count's rounds to 1 at least), lifted from 0 by an add, not a branch.
    // (exact <= 2^scale: a signed conversion, no check for 2^63.)
    auto const rounded =
        static_cast<uint64_t>(static_cast<int64_t>(exact + 0.5));
    uint64_t const f = rounded + (rounded == 0);
    if (f > rem_f) rem_f = f, rem = i;
    uint8_t const code =
        f < quantized_small_size
            ? small_codes[f]
            : quantize(static_cast<uint32_t>(std::min<uint64_t>(f, 1u << 19)));
    codes[i] = code;
    ++delta[static_cast<uint8_t>(code - last)];
    last = code;
    // The set's runs: where each starts, noted without a branch (a sparse
    // histogram's gaps come at random); their varints are written after.
    run_starts[runs] = static_cast<uint32_t>(i);
    runs += s != follows;
    follows = uint64_t{s} + 1;
  };
  // Four symbols a round, each histogram of deltas in its turn (as symbol
  // i & 3 always took): no index arithmetic a symbol.
  size_t i = 0;
  for (; i + 4 <= k; i += 4) {
    step(i, deltas[0]), step(i + 1, deltas[1]);
    step(i + 2, deltas[2]), step(i + 3, deltas[3]);
  }
  for (; i < k; ++i) step(i, deltas[i & 3]);
  run_starts[runs] = static_cast<uint32_t>(k);
  for (size_t r = 0; r < runs; ++r) {
    uint32_t const first = hist[run_starts[r]].first;
    uint32_t const final = hist[run_starts[r + 1] - 1].first;
    set_size += add_varint(set_hist, first - next);
    set_size += add_varint(set_hist, final - first);
    next = uint64_t{final} + 1;
  }
  set_size += add_varint(set_hist, runs);
  set_size += add_varint(set_hist, rem);
  if (payload_bits != nullptr) {
    *payload_bits = -terms -
                    static_cast<double>(scaled) * std::log2(per_count) +
                    static_cast<double>(total) * std::log2(sum_f) +
                    32.0 * rans_static::lanes;
  }
  double const plain = 2 + static_cast<double>(set_size + k - 1);
  if (k - 1 < 64) return plain;
  std::array<uint64_t, 256> delta_hist{};
  for (size_t b = 0; b < 256; ++b) {
    delta_hist[b] =
        uint64_t{deltas[0][b]} + deltas[1][b] + deltas[2][b] + deltas[3][b];
  }
  // The remainder is skipped: its delta and its successor's become the one
  // delta from its predecessor to its successor.
  uint8_t const before = rem == 0 ? 0 : codes[rem - 1];
  --delta_hist[static_cast<uint8_t>(codes[rem] - before)];
  if (rem + 1 < k) {
    --delta_hist[static_cast<uint8_t>(codes[rem + 1] - codes[rem])];
    ++delta_hist[static_cast<uint8_t>(codes[rem + 1] - before)];
  }
  double const coded = 3 + static_cast<double>(varint_size(set_size)) +
                       estimate_packed_bytes(set_hist, set_size) +
                       estimate_packed_bytes(delta_hist, k - 1);
  return std::min(plain, coded);
}

double estimate_rans_static_bits(std::span<uint64_t const> hist) {
  rans_static_choice const c = choose_rans_static(hist);
  return rans_static::coded_bits(hist, c.table) +
         8.0 * static_cast<double>(c.blob.size());
}

node make_rans_static(stream const& sample_or_whole_value, unsigned width) {
  std::vector<uint64_t> hist;
  rans_static::histogram(sample_or_whole_value.data, width, hist);
  node n = make_leaf(opcode::rans_static);
  n.blob = choose_rans_static(hist).blob;
  return n;
}

namespace {

// Coders are built from the blob: up to 384 KiB of tables at 2^16
// precision, a few percent of decoding a 1 MiB chunk. The process keeps the
// last few, keyed by blob bytes and width, so the chunks of one tensor build
// them once even when several threads decode them (the mount's prefetch and
// FUSE threads: with a cache per thread, building tables was 13% of a cold
// read's CPU). Coders are immutable and shareable; a build runs outside the
// lock. The cache is bounded by table bytes, not only by count: every table
// it holds is memory a new table cannot reuse, and fresh memory costs a page
// fault every 4 KiB (~15 us here) where refilling a warm table at 2^16 slots
// takes ~25 us (16 coders at 2^16: 6 MiB paged in). Decode and encode
// tables have bounds of their own, and a coder is charged only the tables
// it has built (a new one also its decode tables to come): a coder that
// only encodes, as a file's shared tables do, builds none for decoding,
// and charged for them, a file's few 16-bit shared tables evicted each
// other at every small tensor. Tables built between two looks are charged
// at the next: the bounds hold at each look, not in between.
class coder_cache {
 public:
  std::shared_ptr<rans_static::coder const> find(uint64_t hash,
                                                 bytes const& blob,
                                                 unsigned width) {
    std::vector<std::shared_ptr<rans_static::coder const>> evicted;  // freed
    std::lock_guard lk(mu_);                                         // unlocked
    for (size_t i = 0; i < lru_.size(); ++i) {
      entry const& e = lru_[i];
      if (e.hash == hash && e.width == width && e.blob == blob) {
        std::rotate(lru_.begin(), lru_.begin() + static_cast<ptrdiff_t>(i),
                    lru_.begin() + static_cast<ptrdiff_t>(i) + 1);
        // Charges the tables built since the last look.
        trim(1, 0, evicted);
        return lru_.front().c;
      }
    }
    return nullptr;
  }
  void put(uint64_t hash, bytes const& blob, unsigned width,
           std::shared_ptr<rans_static::coder const> c) {
    std::vector<std::shared_ptr<rans_static::coder const>> evicted;  // freed
    std::lock_guard lk(mu_);                                         // unlocked
    for (entry const& e : lru_) {
      if (e.hash == hash && e.width == width && e.blob == blob) return;
    }
    // Room for the new coder's decode tables, which it builds on its
    // first decode if it has one: evicted first, so that they can reuse
    // the evicted ones' memory.
    trim(0, c->decode_table_bytes(), evicted);
    if (lru_.size() == slots) {
      evicted.push_back(std::move(lru_.back().c));
      lru_.pop_back();
    }
    lru_.insert(lru_.begin(), entry{hash, width, blob, std::move(c)});
  }

 private:
  static size_t decode_bytes(rans_static::coder const& c) {
    return c.decoder_built() ? c.decode_table_bytes() : 0;
  }

  // Evicts the least recently used coders, past the first `keep`, that
  // hold tables of a kind over its bound (with `add_decoding` bytes more of
  // decode tables); coders without such tables stay.
  void trim(size_t keep, size_t add_decoding,
            std::vector<std::shared_ptr<rans_static::coder const>>& evicted) {
    // Read once: other threads build tables outside the lock, and a charge
    // read twice could differ (the sums below then wrap).
    std::array<size_t, slots> dec{};
    std::array<size_t, slots> enc{};
    size_t decoding = add_decoding;
    size_t encoding = 0;
    for (size_t i = 0; i < lru_.size(); ++i) {
      dec[i] = decode_bytes(*lru_[i].c);
      enc[i] = lru_[i].c->encode_table_bytes();
      decoding += dec[i];
      encoding += enc[i];
    }
    for (size_t i = lru_.size(); i-- > keep;) {
      bool const over_decoding = decoding > max_table_bytes;
      bool const over_encoding = encoding > max_encode_table_bytes;
      if (!over_decoding && !over_encoding) break;
      if ((over_decoding && dec[i] > 0) || (over_encoding && enc[i] > 0)) {
        decoding -= dec[i];
        encoding -= enc[i];
        evicted.push_back(std::move(lru_[i].c));
        lru_.erase(lru_.begin() + static_cast<ptrdiff_t>(i));
      }
    }
  }

  // A file's shared tables alternate, and a few threads decode different
  // tensors at once.
  static constexpr size_t slots = 16;
  // Two tables at 2^16 slots and small ones beside them: the two halves of
  // an fp32 value split 16:16 each have one, and every chunk decodes both
  // (at 512 KiB they evicted each other: faceres-deep.fp32 rebuilt its
  // 2^16-slot tables for every chunk, ~30% of decoding it). Fewer bytes
  // cost rebuilds; more, page faults (measured at 1 MiB on bf16 files,
  // which have one table at 2^16 a chunk: 60-110 more a file, against 4-7
  // fewer rebuilds).
  static constexpr size_t max_table_bytes = size_t{1} << 20;
  // A 16-bit table's encoder holds ~0.3 MiB at a few thousand symbols (its
  // index by symbol is most of it), up to 1.5 MiB at all 2^16: a file's
  // shared tables fit.
  static constexpr size_t max_encode_table_bytes = size_t{4} << 20;
  struct entry {
    uint64_t hash;
    unsigned width;
    bytes blob;
    std::shared_ptr<rans_static::coder const> c;
  };
  std::mutex mu_;
  std::vector<entry> lru_;
};

coder_cache& coders() {
  static coder_cache c;
  return c;
}

std::shared_ptr<rans_static::coder const> coder_for(bytes const& blob,
                                                    unsigned width) {
  uint64_t const hash = xxh3(blob);
  if (auto c = coders().find(hash, blob, width)) return c;
  coders_built().fetch_add(1, std::memory_order_relaxed);
  auto c = std::make_shared<rans_static::coder const>(
      parse_rans_static_table(blob, width), width);
  coders().put(hash, blob, width, c);
  return c;
}

// The decode tables a node's rans_static siblings hold at once: four at
// 2^16 slots (384 KiB each), more of smaller ones.
constexpr size_t sibling_table_bytes = size_t{3} << 19;

class rans_static_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::rans_static; }
  std::string_view name() const override { return "rans_static"; }

  void check(node const& n, value_type in) const override {
    (void)wide_at(n);  // the parameter
    fail_if(in.width != 1 && in.width != 2, errc::bad_program,
            "rans_static codes 8- or 16-bit lanes");
    // Checked by parsing it into a (cached) coder: the decode that usually
    // follows (the mount parses a chunk's program just before decoding it)
    // then does not parse it again. Its tables are built on first use.
    try {
      coder_for(n.blob, in.width);
    } catch (error const& e) {
      fail(errc::bad_program, e.what());
    }
  }

  void encode(node const& n, stream const& in, bytes& out) const override {
    encode_view(n, in.data, in.type, out);
  }

  void encode_view(node const& n, byte_view in, value_type type,
                   bytes& out) const override {
    unsigned const w = type.width;
    fail_if(w != 1 && w != 2, errc::domain,
            "rans_static codes 8- or 16-bit lanes");
    std::shared_ptr<rans_static::coder const> c;
    try {
      c = coder_for(n.blob, w);
    } catch (error const& e) {
      fail(errc::bad_program, e.what());
    }
    c->encode(in, out, wide_at(n));
  }

  void decode(node const& n, value_type in, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    unsigned const w = in.width;
    fail_if(w != 1 && w != 2, errc::bad_program,
            "rans_static codes 8- or 16-bit lanes");
    fail_if(out_size % w != 0, errc::corrupt,
            "rans_static: size is not a whole number of lanes");
    coder_for(n.blob, w)->decode(payload, out_size / w, out, wide_at(n));
  }

  void decode_siblings(std::span<decode_job const> jobs) const override {
    // A batch's coders are held until it is decoded (the cache may evict
    // them meanwhile); batches hold at most sibling_table_bytes of tables,
    // so that a node of many siblings, each with its own 2^16-slot table,
    // does not keep all of them at once.
    auto const coder_of = [](decode_job const& j) {
      unsigned const w = j.in.width;
      fail_if(w != 1 && w != 2, errc::bad_program,
              "rans_static codes 8- or 16-bit lanes");
      fail_if(j.out_size % w != 0, errc::corrupt,
              "rans_static: size is not a whole number of lanes");
      return coder_for(j.n->blob, w);
    };
    if (jobs.size() == 1) {  // a chunk's one stream: no batch to build
      decode_job const& j = jobs.front();
      coder_of(j)->decode(j.payload, j.out_size / j.in.width, j.out,
                          wide_at(*j.n));
      return;
    }
    std::vector<std::shared_ptr<rans_static::coder const>> coders;
    std::vector<rans_static::coder::decode_job> batch;
    size_t held = 0;
    auto const flush = [&] {
      rans_static::coder::decode_siblings(batch);
      batch.clear();
      coders.clear();
      held = 0;
    };
    for (decode_job const& j : jobs) {
      unsigned const w = j.in.width;
      auto c = coder_of(j);
      size_t const tables = c->decode_table_bytes();
      if (!batch.empty() && held + tables > sibling_table_bytes) flush();
      held += tables;
      coders.push_back(std::move(c));
      batch.push_back({coders.back().get(), j.payload, j.out_size / w, j.out,
                       wide_at(*j.n)});
    }
    if (!batch.empty()) flush();
  }

 private:
  // The symbols from which the node's payloads interleave 32 states: its
  // parameter's power of two, or the format's default. Validated on every
  // use, not only by check(): a node can be decoded unchecked.
  static uint64_t wide_at(node const& n) {
    fail_if(n.params.size() > 1 || (n.params.size() == 1 &&
                                    n.params[0] > rans_static::wide_from_log2),
            errc::bad_program,
            "rans_static takes at most one parameter, at most 16 (log2 of "
            "the symbols from which its payloads interleave 32 states)");
    return uint64_t{1} << (n.params.empty() ? rans_static::wide_from_log2
                                            : n.params[0]);
  }
};

}  // namespace

leaf_def const& rans_static_leaf_def() {
  static rans_static_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
