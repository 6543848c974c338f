#include "codec/choose/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "codec/leaves/rans_static.h"

namespace brevis::codec {

sparse_hist sparse_histogram(byte_view data) {
  size_t const n = data.size() / 2;
  if (n > std::numeric_limits<uint32_t>::max()) {  // past u32 counters
    std::vector<uint64_t> hist;
    rans_static::histogram(data, 2, hist);
    sparse_hist out;
    for (uint32_t s = 0; s < 65536; ++s) {
      if (hist[s]) out.emplace_back(s, hist[s]);
    }
    return out;
  }
  // Counters kept zero between calls; only the touched ones are cleared,
  // so small tensors cost their size, not 2^16. 32 bits halve the cache
  // footprint (the region has fewer than 2^32 lanes).
  thread_local std::vector<uint32_t> count(65536, 0);
  sparse_hist out;
  if (n >= 65536) {
    // Large regions: a scan of the counters costs less than tracking the
    // symbols seen, and two counter sets (by lane parity) overlap the
    // increments of repeated values.
    thread_local std::vector<uint32_t> odd(65536, 0);
    uint8_t const* p = data.data();
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
      ++count[load_le<uint16_t>(p + 2 * i)];
      ++odd[load_le<uint16_t>(p + 2 * i + 2)];
    }
    if (i < n) ++count[load_le<uint16_t>(p + 2 * i)];
    for (uint32_t s = 0; s < 65536; ++s) {
      uint64_t const c = uint64_t{count[s]} + odd[s];
      if (c) out.emplace_back(s, c), count[s] = 0, odd[s] = 0;
    }
    return out;
  }
  std::vector<uint32_t> seen;
  for (size_t i = 0; i < n; ++i) {
    uint16_t const w = load_le<uint16_t>(&data[2 * i]);
    if (count[w]++ == 0) seen.push_back(w);
  }
  out.reserve(seen.size());
  if (seen.size() > 2048) {  // many symbols: a scan beats sorting them
    for (uint32_t s = 0; s < 65536; ++s) {
      if (count[s]) out.emplace_back(s, count[s]), count[s] = 0;
    }
    return out;
  }
  std::sort(seen.begin(), seen.end());
  for (uint32_t s : seen) {
    out.emplace_back(s, count[s]);
    count[s] = 0;
  }
  return out;
}

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
