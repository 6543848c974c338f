#include "codec/search/cost_model.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "codec/choose/entropy_terms.h"
#include "codec/choose/histogram.h"
#include "codec/choose/unseen_entropy.h"
#include "codec/core/checksum.h"
#include "codec/dsl/operator.h"
#include "codec/entropy/rans_static.h"
#include "codec/leaves/rans_static.h"
#include "codec/search/value_stats.h"

namespace brevis::codec::search {
namespace {

constexpr double infinite = std::numeric_limits<double>::infinity();

uint64_t mix(uint64_t a, uint64_t b) {
  return (a ^ (b + 0x9e3779b97f4a7c15 + (a << 6) + (a >> 2))) *
         0xbf58476d1ce4e5b9;
}

// Estimated payload bytes of htscodecs rANS order 0 on `d`: the entropy
// plus its frequency table (about 1.25 bytes per present symbol, measured).
double rans0_estimate(std::array<uint32_t, 256> const& h) {
  // `present` counted in an integer: a double sum carried its add's
  // latency from symbol to symbol (the same value, exactly).
  double terms = 0;
  uint64_t n = 0, present = 0;
  for (uint32_t c : h) n += c, terms += c_log2_c(c), present += c > 0;
  return entropy_from_terms(n, terms) / 8 +
         1.25 * static_cast<double>(present) + 12;
}

// The same for order 1: conditional entropy given the previous byte, and
// a table per context seen.
double rans1_estimate(byte_view d) {
  // Counters kept zero between calls: only the touched ones are cleared.
  thread_local std::vector<uint32_t> h(65536, 0);
  if (d.empty()) return 12;
  // The contexts' totals are the bytes before the last, and the first
  // context (0): counted apart from the pairs, so that the pairs' loop
  // does not wait on a context's increment from one byte to the next.
  std::array<uint32_t, 256> ctx_total;
  byte_histogram(d.first(d.size() - 1), ctx_total);
  ++ctx_total[0];
  uint8_t prev = 0;
  for (uint8_t b : d) {
    ++h[prev << 8 | b];
    prev = b;
  }
  double bits = 0;
  uint64_t contexts = 0, pairs = 0;
  for (unsigned c = 0; c < 256; ++c) {
    if (ctx_total[c] == 0) continue;
    ++contexts;
    bits += c_log2_c(ctx_total[c]);
  }
  // Each pair seen once: its count, then cleared for the next call.
  prev = 0;
  for (uint8_t b : d) {
    uint32_t& k = h[prev << 8 | b];
    prev = b;
    if (k == 0) continue;
    ++pairs;
    bits -= c_log2_c(k);
    k = 0;
  }
  // Integers (and 1.25) sum exactly: the table as a running sum gave it.
  double const table =
      2 * static_cast<double>(contexts) + 1.25 * static_cast<double>(pairs);
  return bits / 8 + table + 12;
}

}  // namespace

uint64_t value_hash(stream const& s) {
  return mix(xxh3(s.data),
             uint64_t{s.type.width} << 8 | static_cast<uint8_t>(s.type.kind));
}

double cost_model::blob_bits(node const& leaf,
                             std::string_view production) const {
  if (production == "rans_static_shared") {
    return 8 * in_.tables->table_for(in_.info.offset)->blob_share;
  }
  return 8.0 * static_cast<double>(leaf.blob.size());
}

double cost_model::payload_bits(value_info const& v, uint64_t vh, double scale,
                                node const& leaf, std::string_view production) {
  // Exact costs over the whole region: shared and own static tables of the
  // region's 16-bit elements.
  bool const at_elements = !v.whole.empty() && v.sample.type.width == 2;
  if (production == "rans_static_shared") {
    return 8 * in_.tables->table_for(in_.info.offset)->payload_bytes;
  }
  // zstd codes the bytes whatever their type: the region's bytes and its
  // elements under the root view (the same sample) share one trial, which
  // was 8% of compressing blazepose-detector.bf16.pt, half of it repeated.
  uint64_t const value_key =
      leaf.op == opcode::zstd ? mix(xxh3(v.sample.data), 0x7a737464) : vh;
  // A table fitted to the sample costs by the value's scale too (its blob,
  // and what the sample leaves unseen): keyed by it, as the same sample may
  // stand for values of other sizes (a sparse value's, a repeat's period).
  uint64_t const scale_key =
      leaf.op == opcode::rans_static && leaf.blob.empty()
          ? mix(std::bit_cast<uint64_t>(scale), 0x7363616c65)
          : 0;
  uint64_t const key = (mix(mix(value_key, static_cast<uint8_t>(leaf.op)),
                            leaf.params.empty() ? 0 : leaf.params[0] + 1) ^
                        (leaf.blob.empty() ? 0 : 0x5bd1e995)) ^
                       scale_key;
  if (auto it = cache_.find(key); it != cache_.end()) {
    return it->second.second ? it->second.first : it->second.first * scale;
  }
  double bits = infinite;
  bool exact = false;
  if (v.whole_hist != nullptr && !v.whole_hist->empty() &&
      ((leaf.op == opcode::rans_static && leaf.blob.empty()) ||
       leaf.op == opcode::rans0)) {
    // The whole value's histogram is known: its costs, from it.
    exact = true;
    if (leaf.op == opcode::rans_static) {
      // Estimated, not built (the winner's tables are fitted afterwards).
      bits = 8 * estimate_table_bytes(*v.whole_hist);
    } else {
      std::array<uint64_t, 256> counts{};
      for (auto const& [sym, c] : *v.whole_hist) {
        counts[sym & 255] += c;
        if (v.sample.type.width == 2) counts[sym >> 8] += c;
      }
      uint64_t n = 0;
      double present = 0, terms = 0;
      for (uint64_t c : counts) n += c, terms += c_log2_c(c), present += c > 0;
      double const ent = entropy_from_terms(n, terms);
      bits = ent + 8 * (1.25 * present + 12) * in_.chunks();
    }
  } else if (leaf.op == opcode::rans_static && leaf.blob.empty() &&
             at_elements && in_.root_hist != nullptr &&
             !in_.root_hist->empty() &&
             v.whole.size() == in_.data.size() / 2 * 2) {
    // The region's own table, from its histogram: estimated, not built (the
    // winner's table is fitted once, afterwards).
    bits = 8 * estimate_table_bytes(*in_.root_hist);
    exact = true;
  } else if (leaf.op == opcode::rans_static && leaf.blob.empty()) {
    // A table fitted later to the whole value: the table of the sample, its
    // payload scaled, its blob not (the cache holds unscaled bits).
    sparse_hist h;
    if (v.sample.type.width == 2) {
      h = sparse_histogram(v.sample.data);
    } else {
      for (uint32_t i = 0; i < 256; ++i) {
        if (v.stats.byte_counts[i]) {
          h.emplace_back(i, entry_count(v.stats.byte_counts[i]));
        }
      }
    }
    if (!h.empty()) {
      // The payload and the blob in one pass over the histogram (as
      // estimate_table_payload_bytes and estimate_table_blob_bytes give
      // them): a 16-bit sample's has tens of thousands of symbols.
      uint64_t n = 0;
      for (auto const& [sym, c] : h) n += c;
      double payload_bits = 0;
      double const sample_blob = estimate_rans_static_blob_bytes(
          h, n, rans_static_scale_for(h.size(), n), &payload_bits);
      // The table is fitted to the sample and costed on it: its payload is
      // short of the whole value's by what the sample leaves unseen. The
      // whole value's own table is biased low too, by about as many bits
      // in all as the sample's: the whole's shortfall is the sample's, less
      // one sample's worth (none where the sample is the whole value).
      double const unseen =
          scale > 1 ? unseen_entropy_bits(h, n, 8 * v.sample.type.width) *
                          (1 - 1 / scale)
                    : 0;
      double const payload = (payload_bits + unseen) / 8;
      // The whole value has symbols the sample lacks, and its table holds
      // them all: more as the sample's singletons predict (Good-Turing),
      // its blob growing in proportion.
      // Counted in an integer: a double sum waited on its add every symbol.
      size_t singles = 0;
      for (auto const& [sym, c] : h) singles += c == 1;
      double const singletons = static_cast<double>(singles);
      double const d = static_cast<double>(h.size());
      // New symbols keep coming at the singletons' rate only where nearly
      // every symbol is new (uniform bits); a peaked histogram saturates.
      double const whole =
          std::min(std::ldexp(1.0, 8 * v.sample.type.width),
                   d + singletons * std::max(0.0, scale - 1) * singletons / d);
      double const blob = sample_blob * whole / d;
      bits = 8 * (payload + blob / std::max(scale, 1.0));
    }
  } else if (leaf.op == opcode::raw) {
    // raw's payload is the value's bytes: exact, without the copy that a
    // trial encode made (3.5 MB of copies compressing
    // blazepose-detector.bf16.pt).
    bits = 8.0 * static_cast<double>(v.sample.data.size());
  } else if (leaf.op == opcode::rans0) {
    bits = 8 * rans0_estimate(v.stats.byte_counts);
  } else if (leaf.op == opcode::rans1) {
    bits = 8 * rans1_estimate(v.sample.data);
  } else {
    ++trials_;
    // zstd's stored level costs ~10x level 1 to try: the trial uses level 1
    // (the stored level codes no larger).
    node trial = leaf;
    if (trial.op == opcode::zstd) trial.params = {1};
    bytes payload;
    try {
      leaf_for(trial.op).encode(trial, v.sample, payload);
      bits = 8.0 * static_cast<double>(payload.size());
    } catch (error const& e) {
      if (e.code() != errc::domain) throw;
    }
  }
  cache_.emplace(key, std::make_pair(bits, exact));
  return exact ? bits : bits * scale;
}

}  // namespace brevis::codec::search
