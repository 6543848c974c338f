#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/core/checksum.h"
#include "codec/core/staging.h"
#include "codec/core/xxh3_kernels.h"

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

// Coders write every byte they are given room for: the buffers must hold
// the size asked (ASan checks), be reused once released, and never be handed
// to two holders at once.
TEST(core_test, staging_buffers_are_reused_and_never_shared) {
  uint8_t* first = nullptr;
  {
    staging_buffer a(1001);
    std::memset(a.data(), 1, 1001);
    first = a.data();
    staging_buffer nested(333);  // while a holds the thread's buffer
    std::memset(nested.data(), 2, 333);
    EXPECT_NE(nested.data(), first);
    EXPECT_EQ(a.data()[1000], 1);
  }
  {
    staging_buffer b(999);  // fits: the same memory, not written again
    EXPECT_EQ(b.data(), first);
    EXPECT_EQ(b.data()[998], 1);
    std::memset(b.data(), 3, 999);
  }
  {
    staging_buffer c((1u << 20) + 3);  // grows
    std::memset(c.data(), 4, (1u << 20) + 3);
  }
  staging_buffer huge((size_t{16} << 20) + 1);  // too large to keep
  std::memset(huge.data(), 5, (size_t{16} << 20) + 1);
  staging_buffer d(10);  // the thread's buffer is still free
  std::memset(d.data(), 6, 10);
  EXPECT_NE(d.data(), huge.data());
}

TEST(core_test, xxh3_stream_equals_xxh3_of_the_whole) {
  bytes data(300000);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  }
  EXPECT_EQ(xxh3_stream().digest(), xxh3({}));
  for (size_t piece : {1u, 7u, 240u, 4096u, 65537u, 300000u}) {
    xxh3_stream s;
    for (size_t at = 0; at < data.size(); at += piece) {
      s.update(byte_view(data).subspan(at, std::min(piece, data.size() - at)));
    }
    EXPECT_EQ(s.digest(), xxh3(data)) << piece;
  }
}

// xxh3() runs an AVX2 or AVX-512 build of XXH3 where the CPU has it: every
// build the CPU can run must agree with the shared library, whole and in
// pieces, at the sizes where XXH3 changes its method (0, 16, 128, 240,
// stripes and blocks of 1 KiB).
TEST(core_test, xxh3_kernels_equal_the_library) {
  bytes data(70000);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<uint8_t>(i * 167 + (i >> 7));
  }
  std::vector<xxh3_kernels::kernel const*> kernels;
  if (__builtin_cpu_supports("avx2")) kernels.push_back(&xxh3_kernels::avx2());
  if (__builtin_cpu_supports("avx512f")) {
    kernels.push_back(&xxh3_kernels::avx512());
  }
  if (kernels.empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (size_t n : {0u, 1u, 3u, 16u, 17u, 128u, 129u, 240u, 241u, 1024u, 1025u,
                   4096u, 65536u, 70000u}) {
    uint64_t const want = XXH3_64bits(data.data(), n);
    EXPECT_EQ(xxh3(byte_view(data).first(n)), want) << n;
    for (xxh3_kernels::kernel const* k : kernels) {
      EXPECT_EQ(k->hash(data.data(), n), want) << n;
      void* s = k->create();
      ASSERT_NE(s, nullptr);
      for (size_t at = 0; at < n; at += 1000) {
        k->update(s, data.data() + at, std::min<size_t>(1000, n - at));
      }
      EXPECT_EQ(k->digest(s), want) << n;
      k->destroy(s);
    }
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
