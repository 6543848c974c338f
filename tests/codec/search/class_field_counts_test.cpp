// The classes' field counts, four elements a load through pointers a
// column: the same counts as counting each element by its class, on every
// shape's tails, both groupings and fields, and adversarial values.
#include "codec/search/class_field_counts.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/core/error.h"
#include "tests/codec/generators.h"

namespace brevis::codec::search {
namespace {

struct plain_counts {
  std::vector<uint32_t> field;     // k x (mask + 1)
  std::vector<uint32_t> mantissa;  // k x 2^shift, or empty
};

// One element at a time, its class looked up: what the pass must equal.
plain_counts count_plainly(uint8_t const* w, size_t rows, size_t cols,
                           bool by_rows, std::vector<uint8_t> const& map,
                           unsigned k, unsigned shift, unsigned mask,
                           bool mantissa) {
  plain_counts p;
  p.field.assign(size_t{k} * (mask + 1), 0);
  if (mantissa) p.mantissa.assign(size_t{k} << shift, 0);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < cols; ++j) {
      uint32_t const v = load_le<uint16_t>(w + 2 * (r * cols + j));
      unsigned const c = by_rows ? map[r] : map[j];
      ++p.field[c * (mask + 1) + ((v >> shift) & mask)];
      if (mantissa)
        ++p.mantissa[(size_t{c} << shift) + (v & ((1u << shift) - 1))];
    }
  }
  return p;
}

void expect_same_counts(bytes const& data, size_t rows, size_t cols,
                        bool by_rows, std::vector<uint8_t> const& map,
                        unsigned k, std::string const& what) {
  for (unsigned shift : {7u, 8u}) {
    unsigned const mask = shift == 7 ? 0x1FF : 0xFF;
    for (bool mantissa : {false, true}) {
      plain_counts const want = count_plainly(data.data(), rows, cols, by_rows,
                                              map, k, shift, mask, mantissa);
      field_counts const& got = class_field_counts(
          data.data(), rows, cols, by_rows, map, k, shift, mask, mantissa);
      std::string const at = what + " shift " + std::to_string(shift) +
                             (mantissa ? " with mantissa" : "");
      ASSERT_GE(got.classes.size(), want.field.size()) << at;
      EXPECT_TRUE(
          std::equal(want.field.begin(), want.field.end(), got.classes.begin()))
          << at;
      ASSERT_GE(got.mantissa.size(), want.mantissa.size()) << at;
      EXPECT_TRUE(std::equal(want.mantissa.begin(), want.mantissa.end(),
                             got.mantissa.begin()))
          << at;
      if (!mantissa) {
        EXPECT_TRUE(got.mantissa.empty()) << at;
      }
    }
  }
}

TEST(class_field_counts_test, equal_counting_each_element_on_every_shape) {
  std::mt19937 rng(20);
  // Column counts around the four-element loads' tails, rows of one up.
  for (size_t cols : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 64, 67}) {
    for (size_t rows : {1, 2, 3, 5, 17}) {
      size_t const n = rows * cols;
      for (testing::sample const& s : testing::adversarial(2 * n, 2, 3)) {
        for (bool by_rows : {false, true}) {
          for (unsigned k : {1u, 2u, 4u}) {
            std::vector<uint8_t> map(by_rows ? rows : cols);
            for (uint8_t& c : map) c = static_cast<uint8_t>(rng() % k);
            expect_same_counts(s.data, rows, cols, by_rows, map, k,
                               s.name + " " + std::to_string(rows) + "x" +
                                   std::to_string(cols) +
                                   (by_rows ? " by rows" : " by columns") +
                                   " k " + std::to_string(k));
          }
        }
      }
    }
  }
}

TEST(class_field_counts_test, equal_counting_each_element_unaligned) {
  // A safetensors header of odd length leaves every tensor unaligned.
  std::mt19937 rng(7);
  bytes buffer(1 + 2 * 31 * 45);
  for (uint8_t& b : buffer) b = static_cast<uint8_t>(rng());
  bytes const data(buffer.begin() + 1, buffer.end());
  std::vector<uint8_t> cols_map(45), rows_map(31);
  for (uint8_t& c : cols_map) c = static_cast<uint8_t>(rng() % 3);
  for (uint8_t& c : rows_map) c = static_cast<uint8_t>(rng() % 3);
  // Counted in place at the odd address, then compared.
  for (bool by_rows : {false, true}) {
    auto const& map = by_rows ? rows_map : cols_map;
    for (bool mantissa : {false, true}) {
      plain_counts const want = count_plainly(data.data(), 31, 45, by_rows, map,
                                              3, 7, 0x1FF, mantissa);
      field_counts const& got = class_field_counts(
          buffer.data() + 1, 31, 45, by_rows, map, 3, 7, 0x1FF, mantissa);
      EXPECT_TRUE(std::equal(want.field.begin(), want.field.end(),
                             got.classes.begin()));
      EXPECT_TRUE(std::equal(want.mantissa.begin(), want.mantissa.end(),
                             got.mantissa.begin()));
    }
  }
}

TEST(class_field_counts_test, a_call_after_a_larger_one_counts_afresh) {
  // The buffers are the thread's, reused: a smaller tensor after a larger
  // one, of another grouping, keeps none of its counts or column pointers.
  std::mt19937 rng(11);
  bytes big(2 * 40 * 33), small(2 * 3 * 5);
  for (uint8_t& b : big) b = static_cast<uint8_t>(rng());
  for (uint8_t& b : small) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> big_map(33, 3), small_map(5);
  for (uint8_t& c : small_map) c = static_cast<uint8_t>(rng() % 2);
  class_field_counts(big.data(), 40, 33, false, big_map, 4, 8, 0xFF, true);
  expect_same_counts(small, 3, 5, false, small_map, 2, "after a larger");
  class_field_counts(big.data(), 40, 33, false, big_map, 4, 7, 0x1FF, true);
  std::vector<uint8_t> rows_map = {1, 0, 1};
  expect_same_counts(small, 3, 5, true, rows_map, 2, "rows after a larger");
}

TEST(class_field_counts_test, refuses_fields_it_does_not_count) {
  // Only bf16's sign and exponent and fp16's high byte have a pass; any
  // other field would read and write past the counts' buffers.
  bytes const w(2 * 4 * 4, 0);
  std::vector<uint8_t> const map(4, 0);
  for (auto [shift, mask] : {std::pair{7u, 0xFFu}, std::pair{8u, 0x1FFu},
                             std::pair{0u, 0xFFFFu}, std::pair{9u, 0x7Fu}}) {
    EXPECT_THROW(
        class_field_counts(w.data(), 4, 4, false, map, 1, shift, mask, true),
        error)
        << shift << " " << mask;
  }
}

}  // namespace
}  // namespace brevis::codec::search
