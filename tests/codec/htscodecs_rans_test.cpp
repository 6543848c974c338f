#include "codec/entropy/htscodecs_rans.h"

#include <gtest/gtest.h>
#include <htscodecs/rANS_static4x16.h>

#include <algorithm>
#include <random>

#include "codec/core/error.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

// Values of every stream form the wrapper admits: 4- and 32-way (below and
// above x32_threshold), coded and stored (CAT, for random bytes).
std::vector<bytes> values() {
  std::vector<bytes> out;
  std::mt19937 rng(11);
  for (size_t n : {size_t{1}, size_t{999}, htscodecs_rans::x32_threshold - 1,
                   htscodecs_rans::x32_threshold, size_t{100003}}) {
    bytes skewed(n), random(n), ramp(n);
    std::normal_distribution<float> g(0, 0.02f);
    for (size_t i = 0; i < n; ++i) {
      skewed[i] = static_cast<uint8_t>(testing::to_bf16(g(rng)) >> 8);
      random[i] = static_cast<uint8_t>(rng());
      ramp[i] = static_cast<uint8_t>(i * 7);
    }
    out.push_back(skewed);
    out.push_back(random);
    out.push_back(ramp);
  }
  return out;
}

TEST(htscodecs_rans_test, every_stream_form_roundtrips) {
  bool saw_x32 = false, saw_cat = false;
  for (unsigned order : {0u, 1u}) {
    for (bytes const& v : values()) {
      SCOPED_TRACE("order " + std::to_string(order) +
                   " n=" + std::to_string(v.size()));
      bytes stream;
      htscodecs_rans::encode(v, order, stream);
      ASSERT_FALSE(stream.empty());
      saw_x32 |= (stream[0] & RANS_ORDER_X32) != 0;
      saw_cat |= (stream[0] & RANS_ORDER_CAT) != 0;
      bytes back(v.size());
      htscodecs_rans::decode(stream, order, back.size(), back.data());
      EXPECT_EQ(back, v);
    }
  }
  EXPECT_TRUE(saw_x32);
  EXPECT_TRUE(saw_cat);
}

// The wrapper calls the library's order-0 coders directly (bypassing its
// front end, which runs cpuid per call): the streams must be exactly those
// the front end writes, stored (CAT) form included.
TEST(htscodecs_rans_test, order0_streams_equal_the_library_front_end) {
  for (bytes const& v : values()) {
    SCOPED_TRACE("n=" + std::to_string(v.size()));
    bytes ours;
    htscodecs_rans::encode(v, 0, ours);
    int const flags =
        v.size() >= htscodecs_rans::x32_threshold ? RANS_ORDER_X32 : 0;
    unsigned size = rans_compress_bound_4x16(v.size(), flags);
    bytes theirs(size);
    ASSERT_NE(rans_compress_to_4x16(const_cast<uint8_t*>(v.data()),
                                    static_cast<unsigned>(v.size()),
                                    theirs.data(), &size, flags),
              nullptr);
    theirs.resize(size);
    EXPECT_EQ(ours, theirs);
  }
}

TEST(htscodecs_rans_test, order0_appends_after_existing_bytes) {
  bytes const v = values()[0];
  bytes alone, after = {1, 2, 3};
  htscodecs_rans::encode(v, 0, alone);
  htscodecs_rans::encode(v, 0, after);
  ASSERT_EQ(after.size(), alone.size() + 3);
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), after.begin() + 3));
}

void expect_rejected(bytes const& stream, unsigned order, size_t size) {
  bytes out(size);
  EXPECT_THROW(htscodecs_rans::decode(stream, order, size, out.data()), error);
}

TEST(htscodecs_rans_test, headers_that_do_not_fit_the_value_are_rejected) {
  for (unsigned order : {0u, 1u}) {
    for (bytes const& v : values()) {
      SCOPED_TRACE("order " + std::to_string(order) +
                   " n=" + std::to_string(v.size()));
      bytes stream;
      htscodecs_rans::encode(v, order, stream);
      // Another value size than the stream declares.
      expect_rejected(stream, order, v.size() + 1);
      if (v.size() > 1) expect_rejected(stream, order, v.size() - 1);
      // Cut inside the size field, and right after it.
      expect_rejected(bytes(stream.begin(), stream.begin() + 1), order,
                      v.size());
      size_t at = 1;
      while (stream[at] & 0x80) ++at;
      expect_rejected(bytes(stream.begin(), stream.begin() + at + 1), order,
                      v.size());
      // A size field that never ends.
      bytes endless = {stream[0], 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
      expect_rejected(endless, order, v.size());
      // Stream forms the encoder never writes (stripe, no size, pack, RLE).
      for (uint8_t flag : {RANS_ORDER_STRIPE, RANS_ORDER_NOSZ, RANS_ORDER_PACK,
                           RANS_ORDER_RLE}) {
        bytes other = stream;
        other[0] |= flag;
        expect_rejected(other, order, v.size());
      }
      // A stored stream one byte short.
      if (stream[0] & RANS_ORDER_CAT) {
        expect_rejected(bytes(stream.begin(), stream.end() - 1), order,
                        v.size());
      }
    }
  }
}

}  // namespace
}  // namespace brevis::codec
