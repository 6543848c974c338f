#include "codec/search/segment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "codec/search/value_stats.h"

namespace brevis::codec::search {
namespace {

constexpr size_t block = 16u << 10;
// Bits per byte two neighbouring blocks must lose by sharing one
// distribution before they are cut apart (well above sampling noise of
// 16 KiB blocks).
constexpr double cut_threshold = 0.25;

using histogram = std::array<uint32_t, 256>;

histogram histogram_of(byte_view d) {
  histogram h{};
  // Runs of one value (zeros in a sparse dump) are common and the slowest
  // case for counting: recognise them at memory speed.
  if (!d.empty() && all_bytes_equal(d)) {
    h[d.front()] = static_cast<uint32_t>(d.size());
    return h;
  }
  byte_histogram(d, h);
  return h;
}

// Code lengths (bits) of each byte value under the histogram, smoothed.
std::array<double, 256> code_lengths(histogram const& h) {
  double n = 0;
  for (uint32_t c : h) n += c;
  std::array<double, 256> out{};
  for (size_t i = 0; i < 256; ++i)
    out[i] = -std::log2((h[i] + 0.5) / (n + 128));
  return out;
}

// c * log2(c + 0.5) for every count two blocks can reach: the smoothed
// code length sums below without a logarithm per symbol (a region of
// 1 GiB has 65536 block pairs).
std::vector<double> const& count_log_table() {
  static std::vector<double> const table = [] {
    std::vector<double> t(2 * block + 1);
    for (size_t c = 0; c < t.size(); ++c) {
      t[c] = static_cast<double>(c) * std::log2(static_cast<double>(c) + 0.5);
    }
    return t;
  }();
  return table;
}

// Bits to code the counted bytes with their own smoothed distribution:
// sum over values of -c * log2((c + 0.5) / (n + 128)).
double smoothed_bits(double n, double sum_count_log) {
  return n * std::log2(n + 128) - sum_count_log;
}

// Bits per byte the two parts lose when coded with their merged
// distribution instead of each their own.
double split_gain(histogram const& a, histogram const& b) {
  if (a == b) return 0;  // e.g. neighbouring blocks of zeros
  auto const& t = count_log_table();
  double na = 0, nb = 0, la = 0, lb = 0, lm = 0;
  for (size_t i = 0; i < 256; ++i) {
    na += a[i];
    nb += b[i];
    la += t[a[i]];
    lb += t[b[i]];
    lm += t[a[i] + b[i]];
  }
  double const n = na + nb;
  if (n == 0) return 0;
  double const own = smoothed_bits(na, la) + smoothed_bits(nb, lb);
  return (smoothed_bits(n, lm) - own) / n;
}

}  // namespace

std::vector<uint64_t> statistics_cuts(byte_view data, size_t min_part) {
  std::vector<uint64_t> cuts;
  size_t const blocks = data.size() / block;
  if (blocks < 4) return cuts;
  // Neighbours alone are compared: two histograms at a time (one a block
  // held 1/16 of the region: 336 MB for a 5 GiB sparse file).
  histogram before = histogram_of(data.subspan(0, block));
  histogram here{};
  uint64_t last = 0;
  for (size_t i = 1; i < blocks; ++i, before = here) {
    here = histogram_of(data.subspan(i * block, block));
    if (split_gain(before, here) < cut_threshold) continue;
    // The change lies in blocks i-1 and i: the cut that codes the left part
    // with block i-1's distribution and the right with block i's best.
    auto const la = code_lengths(before);
    auto const lb = code_lengths(here);
    size_t const from = (i - 1) * block, to = (i + 1) * block;
    double acc = 0, best = 0;
    size_t at = from;
    for (size_t j = from; j < to; ++j) {
      acc += la[data[j]] - lb[data[j]];
      // acc: cost of bytes [from, j] coded left minus coded right.
      if (-acc < best) continue;
      best = -acc;
      at = j + 1;
    }
    // `at` maximizes the savings of coding [from, at) left, the rest right.
    if (at <= last || at - last < min_part || data.size() - at < min_part) {
      continue;
    }
    cuts.push_back(at);
    last = at;
  }
  return cuts;
}

}  // namespace brevis::codec::search
