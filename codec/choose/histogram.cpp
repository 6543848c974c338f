#include "codec/choose/histogram.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "codec/choose/entropy_terms.h"
#include "codec/entropy/histogram.h"
#include "codec/leaves/rans_static.h"

namespace brevis::codec {

sparse_hist sparse_histogram(byte_view data) { return histogram16(data); }

double entropy_bits(sparse_hist const& h) {
  uint64_t n = 0;
  double terms = 0;
  for (auto const& [s, c] : h) n += c, terms += c_log2_c(c);
  return entropy_from_terms(n, terms);
}

// Estimated bytes of planes + rans0 for 16-bit lanes: the byte entropies
// plus about 0.7 bytes of table per distinct byte (measured).
double estimate_planes_bytes(sparse_hist const& h) {
  std::array<uint64_t, 256> lo{};
  std::array<uint64_t, 256> hi{};
  uint64_t n = 0;
  for (auto const& [s, c] : h) lo[s & 255] += c, hi[s >> 8] += c, n += c;
  double terms = 0;
  double present = 0;
  for (size_t b = 0; b < 256; ++b) {
    terms += c_log2_c(lo[b]) + c_log2_c(hi[b]);
    present += (lo[b] > 0) + (hi[b] > 0);
  }
  // Both planes hold n bytes: entropy = 2 n log2(n) - sum c log2(c).
  return (2 * c_log2_c(n) - terms) / 8 + 0.7 * present;
}

// Estimated bytes of rans_static with the value's own table: the entropy
// plus about half a byte of table per symbol (measured).
double estimate_own_table_bytes(sparse_hist const& h) {
  return entropy_bits(h) / 8 + 0.5 * static_cast<double>(h.size()) + 40;
}

double estimate_table_payload_bytes(sparse_hist const& h) {
  if (h.size() <= 1) return 0;
  uint64_t n = 0;
  for (auto const& [s, c] : h) n += c;
  double const slots =
      std::ldexp(1.0, static_cast<int>(rans_static_scale_for(h.size(), n)));
  double const per_count = slots / static_cast<double>(n);
  // A symbol gets c * per_count slots, at least one; above one,
  // log2(c * per_count) = log2(c) + log2(per_count), from the table.
  double sum_f = 0;
  double terms = 0;
  double scaled = 0;
  for (auto const& [s, c] : h) {
    double const f = static_cast<double>(c) * per_count;
    if (f > 1) {
      sum_f += f, terms += c_log2_c(c), scaled += static_cast<double>(c);
    } else {
      sum_f += 1;
    }
  }
  double bits = -terms - scaled * std::log2(per_count);
  bits += static_cast<double>(n) * std::log2(sum_f);
  return (bits + 32.0 * rans_static::lanes) / 8;
}

double estimate_table_blob_bytes(sparse_hist const& h) {
  if (h.empty()) return 0;
  uint64_t n = 0;
  for (auto const& [s, c] : h) n += c;
  return estimate_rans_static_blob_bytes(h, n,
                                         rans_static_scale_for(h.size(), n));
}

std::vector<std::vector<uint64_t>> split_histogram(sparse_hist const& h,
                                                   opcode op, meaning m) {
  unsigned mbits = 0;
  if (op == opcode::fields) {
    if (m == meaning::bf16) mbits = 7;
    if (m == meaning::fp16) mbits = 10;
    if (mbits == 0) return {};
  } else if (op != opcode::planes) {
    return {};
  }
  std::vector<std::vector<uint64_t>> counts;
  if (op == opcode::planes) {
    counts.assign(2, std::vector<uint64_t>(256, 0));
  } else {
    counts.emplace_back(2, 0);
    counts.emplace_back(size_t{1} << (15 - mbits), 0);
    counts.emplace_back(size_t{1} << mbits, 0);
  }
  // The symbols are in increasing order, so the high byte (and the sign
  // and exponent) only grow: they are summed over runs in a register
  // rather than by an increment per symbol on the same counter.
  if (op == opcode::planes) {
    uint64_t* const lo = counts[0].data();
    uint64_t* const hi = counts[1].data();
    uint32_t key = h.empty() ? 0 : h.front().first >> 8;
    uint64_t run = 0;
    for (auto const& [sym, c] : h) {
      lo[sym & 255] += c;
      if ((sym >> 8) != key) hi[key] += run, run = 0, key = sym >> 8;
      run += c;
    }
    hi[key] += run;
  } else {
    uint64_t* const sign = counts[0].data();
    uint64_t* const exponent = counts[1].data();
    uint64_t* const mantissa = counts[2].data();
    uint32_t const mmask = (1u << mbits) - 1;
    uint32_t key = h.empty() ? 0 : h.front().first >> mbits;  // sign, exp
    uint64_t run = 0;
    for (auto const& [sym, c] : h) {
      mantissa[sym & mmask] += c;
      if ((sym >> mbits) != key) {
        sign[key >> (15 - mbits)] += run;
        exponent[key & ((1u << (15 - mbits)) - 1)] += run;
        run = 0, key = sym >> mbits;
      }
      run += c;
    }
    sign[key >> (15 - mbits)] += run;
    exponent[key & ((1u << (15 - mbits)) - 1)] += run;
  }
  return counts;
}

double estimate_table_bytes(sparse_hist const& h) {
  if (h.empty()) return 0;
  uint64_t n = 0;
  for (auto const& [s, c] : h) n += c;
  double payload_bits = 0;
  double const blob = estimate_rans_static_blob_bytes(
      h, n, rans_static_scale_for(h.size(), n), &payload_bits);
  return blob + payload_bits / 8;
}

table_estimate estimate_table_code_bits(sparse_hist const& h,
                                        std::vector<double>& bits) {
  table_estimate e;
  if (h.empty()) return e;
  e.blob_bytes = estimate_table_blob_bytes(h);
  e.single_symbol = h.size() == 1;
  e.payload_bytes = estimate_table_code_lengths(h, bits);
  return e;
}

double estimate_table_code_lengths(sparse_hist const& h,
                                   std::vector<double>& bits) {
  if (h.empty()) return 0;
  if (h.size() == 1) {
    bits[h.front().first] = 0;
    return 0;
  }
  uint64_t n = 0;
  for (auto const& [s, c] : h) n += c;
  double const slots =
      std::ldexp(1.0, static_cast<int>(rans_static_scale_for(h.size(), n)));
  double const per_count = slots / static_cast<double>(n);
  double const log2_per_count = std::log2(per_count);
  double sum_f = 0;
  // log2(f) first, then shifted by log2(sum_f) once the sum is known.
  // Without a branch on f > 1, which a 16-bit histogram's counts take about
  // as often as not (the same values: max for the slots, a mask for the
  // code lengths).
  for (auto const& [s, c] : h) {
    double const f = static_cast<double>(c) * per_count;
    uint64_t const large = -static_cast<uint64_t>(f > 1);
    sum_f += std::max(f, 1.0);
    double const log2_f =
        -(c_log2_c(c) / static_cast<double>(c) + log2_per_count);
    bits[s] = std::bit_cast<double>(std::bit_cast<uint64_t>(log2_f) & large);
  }
  double const log2_sum = std::log2(sum_f);
  double payload = 32.0 * rans_static::lanes;
  for (auto const& [s, c] : h) {
    bits[s] += log2_sum;
    payload += static_cast<double>(c) * bits[s];
  }
  return payload / 8;
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
  rans_static::table const t = quantized_rans_static_table(
      symbols, counts, rans_static_scale_for(symbols.size(), total));
  node n = make_leaf(opcode::rans_static);
  n.blob = serialize_rans_static_table(t);
  return {std::move(n), table_bits(h, t) / 8};
}

float16_marginals float16_marginals_of(sparse_hist const& h, meaning m) {
  float16_marginals out;
  float16_marginals_into(h, m, out);
  return out;
}

void float16_marginals_into(sparse_hist const& h, meaning m,
                            float16_marginals& out) {
  unsigned const mbits = m == meaning::bf16 ? 7 : 10;
  unsigned const ebits = 15 - mbits;
  out.planes.resize(2);
  for (auto& p : out.planes) p.assign(256, 0);
  out.fields.resize(3);  // built in place (a braced list would copy them)
  out.fields[0].assign(2, 0);
  out.fields[1].assign(size_t{1} << ebits, 0);
  out.fields[2].assign(size_t{1} << mbits, 0);
  out.sign_exponent.assign(size_t{1} << (ebits + 1), 0);
  uint64_t* const lo = out.planes[0].data();
  uint64_t* const hi = out.planes[1].data();
  uint64_t* const mantissa = out.fields[2].data();
  uint64_t* const sign_exponent = out.sign_exponent.data();
  uint32_t const mmask = (1u << mbits) - 1;
  // One scatter and one run per entry; the other marginals follow from
  // them after the loop. fp16: the low byte is the mantissa's low 8 bits,
  // the sign and exponent the high byte's top 6. bf16: the mantissa is the
  // low byte's low 7 bits, the high byte the sign and exponent's top 8.
  bool const fp16 = mbits > 8;
  uint64_t* const scattered = fp16 ? mantissa : lo;
  uint32_t const scatter_mask = fp16 ? mmask : 255;
  uint64_t* const runs = fp16 ? hi : sign_exponent;
  unsigned const run_shift = fp16 ? 8 : mbits;
  // The symbols are in increasing order, so the run key (the high byte, or
  // the sign and exponent) only grows: summed over runs in a register.
  uint32_t key = h.empty() ? 0 : h.front().first >> run_shift;
  uint64_t run = 0;
  uint64_t n = 0;
  double terms = 0;
  uint32_t ored = 0;
  bool singleton = false;
  thread_local std::vector<double> term;
  c_log2_c_each(h, term);
  double const* t = term.data();
  for (auto const& [sym, c] : h) {
    scattered[sym & scatter_mask] += c;
    terms += *t++;
    n += c;
    ored |= sym;
    singleton |= c == 1;
    if ((sym >> run_shift) != key)
      runs[key] += run, run = 0, key = sym >> run_shift;
    run += c;
  }
  runs[key] += run;
  if (fp16) {
    for (uint32_t v = 0; v <= mmask; ++v) lo[v & 255] += mantissa[v];
    for (uint32_t b = 0; b < 256; ++b) sign_exponent[b >> 2] += hi[b];
  } else {
    for (uint32_t b = 0; b < 256; ++b) mantissa[b & mmask] += lo[b];
    for (uint32_t k = 0; k < out.sign_exponent.size(); ++k) {
      hi[k >> 1] += sign_exponent[k];
    }
  }
  uint32_t const emask = (1u << ebits) - 1;
  for (uint32_t k = 0; k < out.sign_exponent.size(); ++k) {
    out.fields[0][k >> ebits] += sign_exponent[k];
    out.fields[1][k & emask] += sign_exponent[k];
  }
  out.count = n;
  out.terms = terms;
  out.zeros = !h.empty() && h.front().first == 0 ? h.front().second : 0;
  out.ored = ored;
  out.singleton = singleton;
}

}  // namespace brevis::codec
