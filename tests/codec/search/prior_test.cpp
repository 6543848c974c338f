#include "codec/search/prior.h"

#include <gtest/gtest.h>

#include <vector>

namespace brevis::codec::search {
namespace {

decision make(uint8_t width, uint8_t depth, uint8_t entropy, uint16_t p) {
  decision d;
  d.where.width = width;
  d.where.depth = depth;
  d.where.entropy = entropy;
  d.production = p;
  return d;
}

TEST(prior, same_decisions_in_another_order_are_the_same) {
  std::vector<decision> const search_order = {
      make(1, 0, 3, 1), make(4, 1, 3, 2), make(4, 2, 2, 3),
      make(1, 2, 0, 4), make(1, 2, 1, 4), make(1, 3, 3, 5)};
  std::vector<decision> const breadth_first = {
      make(1, 0, 3, 1), make(4, 1, 3, 2), make(1, 2, 0, 4),
      make(1, 2, 1, 4), make(4, 2, 2, 3), make(1, 3, 3, 5)};
  EXPECT_TRUE(same_decisions(search_order, breadth_first));
  EXPECT_TRUE(same_decisions(breadth_first, search_order));
  EXPECT_TRUE(same_decisions({}, {}));
}

TEST(prior, decisions_differing_in_a_context_or_production_are_not_the_same) {
  std::vector<decision> const a = {make(1, 0, 3, 1), make(1, 2, 0, 4),
                                   make(1, 2, 1, 4)};
  std::vector<decision> other_context = a;
  other_context[1].where.zeros = 2;
  EXPECT_FALSE(same_decisions(a, other_context));
  std::vector<decision> other_production = a;
  other_production[2].production = 5;
  EXPECT_FALSE(same_decisions(a, other_production));
  // A repeated decision counts as often as it is made.
  std::vector<decision> const twice = {make(1, 0, 3, 1), make(1, 2, 0, 4),
                                       make(1, 2, 0, 4)};
  EXPECT_FALSE(same_decisions(a, twice));
  EXPECT_FALSE(same_decisions(a, {a.begin(), a.end() - 1}));
}

}  // namespace
}  // namespace brevis::codec::search
