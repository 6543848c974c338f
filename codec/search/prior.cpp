#include "codec/search/prior.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <vector>

#include "codec/search/production.h"

namespace brevis::codec::search {
namespace {

// Weight of the coarser level's estimate against this level's counts.
constexpr double backoff_weight = 2.0;

// A total order on decisions, to compare two lists as multisets.
auto sort_key(decision const& d) {
  context const& c = d.where;
  return std::make_tuple(c.width, static_cast<uint8_t>(c.kind), c.depth,
                         c.entropy, c.zeros, c.size, d.production);
}

}  // namespace

bool same_decisions(std::span<decision const> a, std::span<decision const> b) {
  if (a.size() != b.size()) return false;
  std::vector<decision> x(a.begin(), a.end()), y(b.begin(), b.end());
  auto const less = [](decision const& l, decision const& r) {
    return sort_key(l) < sort_key(r);
  };
  std::sort(x.begin(), x.end(), less);
  std::sort(y.begin(), y.end(), less);
  return std::equal(x.begin(), x.end(), y.begin(),
                    [](decision const& l, decision const& r) {
                      return l.where == r.where && l.production == r.production;
                    });
}

context context::of(value_type t, unsigned depth, value_stats const& s,
                    uint64_t region_bytes) {
  uint8_t const size = region_bytes < (16u << 10)    ? 0
                       : region_bytes < (256u << 10) ? 1
                                                     : 2;
  return {t.width,
          t.kind,
          static_cast<uint8_t>(std::min(depth, 3u)),
          static_cast<uint8_t>(entropy_bucket(s)),
          static_cast<uint8_t>(zero_bucket(s)),
          size};
}

uint64_t prior::key(context const& c, size_t level) {
  uint64_t k = uint64_t{level} << 56 | uint64_t{c.width} << 48 |
               uint64_t{static_cast<uint8_t>(c.kind)} << 40;
  if (level >= 1) k |= uint64_t{c.depth} << 32;
  if (level >= 2) {
    k |= uint64_t{c.entropy} << 24 | uint64_t{c.zeros} << 16 |
         uint64_t{c.size} << 8;
  }
  return k;
}

void prior::learn(std::span<decision const> program) {
  for (decision const& d : program) {
    for (size_t l = 0; l < levels; ++l)
      counts_[key(d.where, l)][d.production]++;
    ++total_;
  }
  ++programs_;
}

double prior::count(uint64_t k, uint16_t p) const {
  auto it = counts_.find(k);
  if (it == counts_.end()) return 0;
  auto jt = it->second.find(p);
  return jt == it->second.end() ? 0 : jt->second;
}

double prior::probability(context const& c, uint16_t p,
                          std::span<uint16_t const> applicable) const {
  double prob =
      1.0 / static_cast<double>(std::max<size_t>(1, applicable.size()));
  if (total_ == 0) return prob;
  for (size_t l = 0; l < levels; ++l) {
    uint64_t const k = key(c, l);
    double n = 0;
    for (uint16_t q : applicable) n += count(k, q);
    prob = (count(k, p) + backoff_weight * prob) / (n + backoff_weight);
  }
  return prob;
}

void prior::probabilities(context const& c,
                          std::span<uint16_t const> applicable,
                          std::vector<double>& out) const {
  out.assign(applicable.size(),
             1.0 / static_cast<double>(std::max<size_t>(1, applicable.size())));
  if (total_ == 0) return;
  std::vector<double> counts(applicable.size());
  for (size_t l = 0; l < levels; ++l) {
    auto it = counts_.find(key(c, l));
    double n = 0;
    for (size_t i = 0; i < applicable.size(); ++i) {
      double k = 0;
      if (it != counts_.end()) {
        auto jt = it->second.find(applicable[i]);
        if (jt != it->second.end()) k = jt->second;
      }
      counts[i] = k;
      n += k;
    }
    for (size_t i = 0; i < applicable.size(); ++i) {
      out[i] = (counts[i] + backoff_weight * out[i]) / (n + backoff_weight);
    }
  }
}

std::string prior::summary(size_t per_context) const {
  // Level-1 contexts in a stable order.
  std::map<uint64_t, std::vector<std::pair<double, uint16_t>>> by_ctx;
  for (auto const& [k, m] : counts_) {
    if ((k >> 56) != 1) continue;
    for (auto const& [p, n] : m) by_ctx[k].push_back({n, p});
  }
  std::string out;
  auto const prods = productions();
  for (auto& [k, v] : by_ctx) {
    std::sort(v.begin(), v.end(), [](auto const& a, auto const& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    double total = 0;
    for (auto const& e : v) total += e.first;
    value_type const t{static_cast<uint8_t>(k >> 48 & 0xff),
                       static_cast<meaning>(k >> 40 & 0xff)};
    char head[64];
    std::snprintf(head, sizeof head, "  %s depth %u:", type_name(t).c_str(),
                  static_cast<unsigned>(k >> 32 & 0xff));
    out += head;
    for (size_t i = 0; i < v.size() && i < per_context; ++i) {
      char item[96];
      std::snprintf(item, sizeof item, " %s %.2f",
                    std::string(prods[v[i].second].name).c_str(),
                    v[i].first / total);
      out += item;
    }
    out += '\n';
  }
  return out;
}

}  // namespace brevis::codec::search
