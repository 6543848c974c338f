#include <gtest/gtest.h>

#include <limits>

#include "codec/core/bytes.h"
#include "codec/core/checksum.h"

namespace brevis::codec {
namespace {

TEST(core_test, varint_roundtrip_edges) {
  std::vector<uint64_t> const values = {
      0,          1,
      127,        128,
      255,        16383,
      16384,      (1ULL << 32) - 1,
      1ULL << 32, (1ULL << 63) - 1,
      1ULL << 63, std::numeric_limits<uint64_t>::max()};
  bytes out;
  for (uint64_t v : values) put_varint(out, v);
  byte_reader r(out);
  for (uint64_t v : values) EXPECT_EQ(r.varint(), v);
  EXPECT_TRUE(r.empty());
}

TEST(core_test, varint_rejects_truncation_and_overflow) {
  bytes truncated = {0x80, 0x80};
  byte_reader r1(truncated);
  EXPECT_THROW(r1.varint(), error);
  bytes overlong(11, 0x80);
  overlong.back() = 0x01;
  byte_reader r2(overlong);
  EXPECT_THROW(r2.varint(), error);
  bytes overflow(10, 0xff);
  overflow.back() = 0x02;  // bit 64 set
  byte_reader r3(overflow);
  EXPECT_THROW(r3.varint(), error);
}

TEST(core_test, reader_bounds) {
  bytes data = {1, 2, 3};
  byte_reader r(data);
  EXPECT_THROW(r.take(4), error);
  EXPECT_EQ(r.take(2).size(), 2u);
  EXPECT_THROW(r.le<uint16_t>(), error);
  EXPECT_EQ(r.u8(), 3);
  EXPECT_THROW(r.u8(), error);
}

TEST(core_test, varint_max_names_field) {
  bytes out;
  put_varint(out, 1000);
  byte_reader r(out);
  try {
    r.varint_max(10, "chunk count");
    FAIL() << "no throw";
  } catch (error const& e) {
    EXPECT_EQ(e.code(), errc::limit);
    EXPECT_NE(std::string(e.what()).find("chunk count"), std::string::npos);
  }
}

TEST(core_test, xxh3_known_value) {
  // XXH3-64 of the empty input, from the xxHash reference.
  EXPECT_EQ(xxh3({}), 0x2D06800538D394C2ULL);
  bytes a = {1, 2, 3};
  bytes b = {1, 2, 4};
  EXPECT_NE(xxh3(a), xxh3(b));
}

}  // namespace
}  // namespace brevis::codec
