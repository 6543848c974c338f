#pragma once
// The production prior: P(production | context), learned per checkpoint from
// the programs that won on a sample of its regions, smoothed by backing off
// to coarser contexts and finally to uniform over the productions that
// apply. Its -log2 P is a program's description cost in the search, and it
// orders and prunes expansions.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "codec/dsl/types.h"
#include "codec/search/value_stats.h"

namespace brevis::codec::search {

/// Where a decision is made: the value's type, depth and simple statistics,
/// and the region's size (small tensors pay for tables differently).
struct context {
  uint8_t width = 1;
  meaning kind = meaning::none;
  uint8_t depth = 0;    // capped at 3
  uint8_t entropy = 0;  // entropy_bucket
  uint8_t zeros = 0;    // zero_bucket
  uint8_t size = 0;     // of the region: < 16 KiB, < 256 KiB, larger

  static context of(value_type t, unsigned depth, value_stats const& s,
                    uint64_t region_bytes);
  friend bool operator==(context const&, context const&) = default;
};

/// One decision of a program: which production closed or expanded a value.
struct decision {
  context where;
  uint16_t production = 0;
};

/// Whether two programs made the same decisions, in whatever order: a
/// search records them in the order it closed or expanded the values (the
/// costliest open value first), a replay of its program in the tree's
/// breadth-first order, so the same program on the same statistics lists
/// them in two orders.
bool same_decisions(std::span<decision const> a, std::span<decision const> b);

class prior {
 public:
  /// Backoff levels, coarse to fine: type; type and depth; all of context.
  static constexpr size_t levels = 3;

  /// A uniform prior (no counts).
  prior() = default;

  /// Counts the decisions of a winning program.
  void learn(std::span<decision const> program);
  bool uniform() const { return total_ == 0; }
  size_t programs_learned() const { return programs_; }

  /// P(p | c) among the productions `applicable` (which holds p).
  double probability(context const& c, uint16_t p,
                     std::span<uint16_t const> applicable) const;

  /// P(q | c) for every q of `applicable`, in its order (the same values
  /// as probability(), for the cost of one call).
  void probabilities(context const& c, std::span<uint16_t const> applicable,
                     std::vector<double>& out) const;

  /// The most likely productions per coarse context (type and depth), for
  /// `brevis compress -v`.
  std::string summary(size_t per_context = 3) const;

 private:
  static uint64_t key(context const& c, size_t level);
  double count(uint64_t k, uint16_t p) const;

  // key(context, level) -> production -> count
  std::unordered_map<uint64_t, std::unordered_map<uint16_t, double>> counts_;
  size_t total_ = 0;
  size_t programs_ = 0;
};

}  // namespace brevis::codec::search
