#include "codec/entropy/rans4x16_order0_decoder.h"

#include <gtest/gtest.h>
#include <htscodecs/rANS_static4x16.h>

#include <random>
#include <string>

#include "codec/core/error.h"
#include "tests/codec/generators.h"

// The library's 4-way order-0 coders (exported, not declared by its headers).
extern "C" {
unsigned char* rans_compress_O0_4x16(unsigned char*, unsigned, unsigned char*,
                                     unsigned*);
unsigned char* rans_uncompress_O0_4x16(unsigned char*, unsigned, unsigned char*,
                                       unsigned);
}

namespace brevis::codec {
namespace {

// The library's stream for `in` (no flag or size header: the body).
bytes library_body(bytes in) {
  unsigned size = rans_compress_bound_4x16(static_cast<unsigned>(in.size()), 0);
  bytes out(size);
  unsigned char* r = rans_compress_O0_4x16(
      in.data(), static_cast<unsigned>(in.size()), out.data(), &size);
  EXPECT_NE(r, nullptr);
  out.resize(size);
  return out;
}

// Inputs whose alphabets take every form the table encodes: one symbol,
// symbol 0 present or absent, runs of successive symbols, gaps, all 256.
std::vector<testing::sample> alphabets(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<testing::sample> out;
  auto fill = [&](std::string name, auto gen) {
    testing::sample s{std::move(name), bytes(n)};
    for (size_t i = 0; i < n; ++i) s.data[i] = static_cast<uint8_t>(gen(i));
    out.push_back(std::move(s));
  };
  fill("only_255", [](size_t) { return 255; });
  fill("zero_and_255", [&](size_t) { return rng() % 2 ? 0 : 255; });
  fill("runs_with_gaps", [&](size_t) {
    unsigned const v = rng() % 40;
    return v < 20 ? v : 100 + v;
  });
  fill("every_other", [&](size_t) { return 2 * (rng() % 128) + 1; });
  fill("top_run", [&](size_t) { return 250 + rng() % 6; });
  fill("skewed_all_256", [&](size_t i) {
    return i < 256 ? i : (rng() % 64 ? 128 + rng() % 3 : rng() % 256);
  });
  return out;
}

TEST(rans4x16_order0_decoder_test, decodes_library_streams_as_the_library) {
  std::vector<size_t> lengths = testing::test_lengths();
  for (size_t n : {size_t{5000}, size_t{12345}, size_t{32767}}) {
    lengths.push_back(n);
  }
  for (size_t n : lengths) {
    if (n == 0) continue;  // the wrapper codes an empty value as no stream
    std::vector<testing::sample> inputs = testing::adversarial(n, 1);
    for (testing::sample& s : alphabets(n, static_cast<uint32_t>(n))) {
      inputs.push_back(std::move(s));
    }
    for (testing::sample const& s : inputs) {
      SCOPED_TRACE(s.name + " n=" + std::to_string(n));
      bytes body = library_body(s.data);
      bytes ours(n), theirs(n);
      rans4x16_order0::decode(body, n, ours.data());
      EXPECT_EQ(ours, s.data);
      ASSERT_EQ(rans_uncompress_O0_4x16(
                    body.data(), static_cast<unsigned>(body.size()),
                    theirs.data(), static_cast<unsigned>(n)),
                theirs.data());
      EXPECT_EQ(ours, theirs);
    }
  }
}

void expect_rejected(bytes const& body, size_t n) {
  bytes out(n);
  EXPECT_THROW(rans4x16_order0::decode(body, n, out.data()), error);
}

TEST(rans4x16_order0_decoder_test, every_truncation_is_rejected) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{300}, size_t{4099}}) {
    for (testing::sample const& s : alphabets(n, 3)) {
      SCOPED_TRACE(s.name + " n=" + std::to_string(n));
      bytes const body = library_body(s.data);
      // Every cut: inside the table, the states or the renormalisation
      // words. (A cut of the last words can only be seen if the decoder
      // still needs them, which it always does for the library's streams.)
      for (size_t cut = 0; cut < body.size(); ++cut) {
        expect_rejected(bytes(body.begin(), body.begin() + cut), n);
      }
    }
  }
}

// A body: `table`, then four states of `state` (little-endian), then words.
bytes body_of(bytes table, uint32_t state) {
  for (int i = 0; i < 4; ++i) {
    for (int k = 0; k < 4; ++k) {
      table.push_back(static_cast<uint8_t>(state >> (8 * k)));
    }
  }
  return table;
}

TEST(rans4x16_order0_decoder_test, malformed_tables_and_states_are_rejected) {
  // A table of one symbol (7) of frequency 1 (scaled to 2^12) decodes.
  bytes out(4);
  rans4x16_order0::decode(body_of({7, 0, 1}, 1u << 15), 4, out.data());
  EXPECT_EQ(out, bytes(4, 7));
  // Frequencies summing to no power of two (3 + 2 for symbols 1 and 5).
  expect_rejected(body_of({1, 5, 0, 3, 2}, 1u << 15), 4);
  // A frequency past 2^12 (4097).
  expect_rejected(body_of({1, 0, 0xa0, 0x01}, 1u << 15), 4);
  // An alphabet run past symbol 255 (254, then 255 and 5 more).
  expect_rejected(body_of({254, 255, 5, 0, 1, 1}, 1u << 15), 4);
  // A frequency varint that never ends.
  expect_rejected(body_of({7, 0, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81}, 1u << 15),
                  4);
  // A state below 2^15.
  expect_rejected(body_of({7, 0, 1}, (1u << 15) - 1), 4);
}

TEST(rans4x16_order0_decoder_test, flipped_bytes_never_crash) {
  std::mt19937 rng(17);
  for (size_t n : {size_t{3}, size_t{333}, size_t{4097}}) {
    for (testing::sample const& s : testing::adversarial(n, 1)) {
      bytes const body = library_body(s.data);
      for (int k = 0; k < 64; ++k) {
        bytes bad = body;
        bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        bytes out(n);
        try {
          rans4x16_order0::decode(bad, n, out.data());
        } catch (error const&) {
        }
      }
    }
  }
}

}  // namespace
}  // namespace brevis::codec
