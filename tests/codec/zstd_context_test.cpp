#include "codec/core/zstd_context.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "codec/core/bytes.h"

namespace brevis::codec {
namespace {

bytes compressed_fresh(bytes const& in, int level) {
  bytes out(ZSTD_compressBound(in.size()));
  size_t const n =
      ZSTD_compress(out.data(), out.size(), in.data(), in.size(), level);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

bytes compressed_reused(bytes const& in, int level) {
  bytes out(ZSTD_compressBound(in.size()));
  size_t const n = ZSTD_compressCCtx(thread_zstd_cctx(), out.data(), out.size(),
                                     in.data(), in.size(), level);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

bytes text(size_t n, unsigned seed) {
  bytes b(n);
  for (size_t i = 0; i < n; ++i) {
    b[i] = static_cast<uint8_t>("brevis rANS tables "[(i * seed) % 19] ^
                                (i % 97 == 0 ? seed : 0));
  }
  return b;
}

// A context reused at one level and then another codes exactly as a fresh
// one (ZSTD_compress) does; it is the thread's own, and a damaged frame
// leaves the decompression context usable.
TEST(zstd_context_test, reused_contexts_code_as_fresh_ones) {
  for (int level : {19, 3, 9, 1, 7}) {
    bytes const in = text(200000 + static_cast<size_t>(level), level);
    bytes const z = compressed_reused(in, level);
    EXPECT_EQ(z, compressed_fresh(in, level)) << "level " << level;
    bytes back(in.size());
    bytes damaged = z;
    damaged[damaged.size() / 2] ^= 0x55;
    (void)ZSTD_decompressDCtx(thread_zstd_dctx(), back.data(), back.size(),
                              damaged.data(), damaged.size());
    size_t const n = ZSTD_decompressDCtx(thread_zstd_dctx(), back.data(),
                                         back.size(), z.data(), z.size());
    ASSERT_EQ(n, in.size());
    EXPECT_EQ(back, in);
  }
  ZSTD_CCtx* mine = thread_zstd_cctx();
  EXPECT_EQ(mine, thread_zstd_cctx());
  ZSTD_CCtx* other = nullptr;
  std::thread([&] { other = thread_zstd_cctx(); }).join();
  EXPECT_NE(other, mine);
}

}  // namespace
}  // namespace brevis::codec
