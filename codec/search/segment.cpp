#include "codec/search/segment.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace brevis::codec::search {
namespace {

constexpr size_t block = 16u << 10;
// Bits per byte two neighbouring blocks must lose by sharing one
// distribution before they are cut apart (well above sampling noise of
// 16 KiB blocks).
constexpr double cut_threshold = 0.25;

using histogram = std::array<double, 256>;

histogram histogram_of(byte_view d) {
  histogram h{};
  for (uint8_t b : d) ++h[b];
  return h;
}

// Code lengths (bits) of each byte value under the histogram, smoothed.
std::array<double, 256> code_lengths(histogram const& h) {
  double n = 0;
  for (double c : h) n += c;
  std::array<double, 256> out{};
  for (size_t i = 0; i < 256; ++i)
    out[i] = -std::log2((h[i] + 0.5) / (n + 128));
  return out;
}

// Bits per byte the two parts lose when coded with their merged
// distribution instead of each their own.
double split_gain(histogram const& a, histogram const& b) {
  histogram m{};
  for (size_t i = 0; i < 256; ++i) m[i] = a[i] + b[i];
  auto const la = code_lengths(a), lb = code_lengths(b), lm = code_lengths(m);
  double own = 0, merged = 0, n = 0;
  for (size_t i = 0; i < 256; ++i) {
    own += a[i] * la[i] + b[i] * lb[i];
    merged += m[i] * lm[i];
    n += m[i];
  }
  return n > 0 ? (merged - own) / n : 0;
}

}  // namespace

std::vector<uint64_t> statistics_cuts(byte_view data, size_t min_part) {
  std::vector<uint64_t> cuts;
  size_t const blocks = data.size() / block;
  if (blocks < 4) return cuts;
  std::vector<histogram> h(blocks);
  for (size_t i = 0; i < blocks; ++i) {
    h[i] = histogram_of(data.subspan(i * block, block));
  }
  uint64_t last = 0;
  for (size_t i = 1; i < blocks; ++i) {
    if (split_gain(h[i - 1], h[i]) < cut_threshold) continue;
    // The change lies in blocks i-1 and i: the cut that codes the left part
    // with block i-1's distribution and the right with block i's best.
    auto const la = code_lengths(h[i - 1]), lb = code_lengths(h[i]);
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
