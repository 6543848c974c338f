#include "codec/choose/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "codec/entropy/histogram.h"
#include "codec/leaves/rans_static.h"

namespace brevis::codec {

sparse_hist sparse_histogram(byte_view data) { return histogram16(data); }

double entropy_bits(sparse_hist const& h) {
  uint64_t n = 0;
  for (auto const& [s, c] : h) n += c;
  double bits = 0;
  for (auto const& [s, c] : h) {
    bits -= static_cast<double>(c) *
            std::log2(static_cast<double>(c) / static_cast<double>(n));
  }
  return bits;
}

// Estimated bytes of planes + rans0 for 16-bit lanes: the byte entropies
// plus about 0.7 bytes of table per distinct byte (measured).
double estimate_planes_bytes(sparse_hist const& h) {
  std::vector<uint64_t> lo(256, 0), hi(256, 0);
  for (auto const& [s, c] : h) lo[s & 255] += c, hi[s >> 8] += c;
  double bytes =
      (rans_static::entropy_bits(lo) + rans_static::entropy_bits(hi)) / 8;
  for (size_t b = 0; b < 256; ++b) bytes += 0.7 * ((lo[b] > 0) + (hi[b] > 0));
  return bytes;
}

// Estimated bytes of rans_static with the value's own table: the entropy
// plus about half a byte of table per symbol (measured).
double estimate_own_table_bytes(sparse_hist const& h) {
  return entropy_bits(h) / 8 + 0.5 * static_cast<double>(h.size()) + 40;
}

// Payload bits of `h` under `t` (symbols of h all in t), framing included.
double table_bits(sparse_hist const& h, rans_static::table const& t) {
  double bits = 32.0 * rans_static::lanes;
  size_t j = 0;
  for (auto const& [s, c] : h) {
    while (t.symbols[j] != s) ++j;  // both in symbol order
    bits += static_cast<double>(c) *
            (t.scale - std::log2(static_cast<double>(t.freqs[j])));
  }
  return t.symbols.size() == 1 ? 0 : bits;
}

own_table own_table_leaf(sparse_hist const& h) {
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
  uint64_t total = 0;
  for (auto const& [s, c] : h) {
    symbols.push_back(s), counts.push_back(c), total += c;
  }
  rans_static::table const t =
      quantize_rans_static_table(rans_static::normalize(
          symbols, counts, rans_static_scale_for(symbols.size(), total)));
  node n = make_leaf(opcode::rans_static);
  n.blob = serialize_rans_static_table(t);
  return {std::move(n), table_bits(h, t) / 8};
}

}  // namespace brevis::codec
