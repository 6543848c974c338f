#include "codec/core/zstd_context.h"

#include <memory>

#include "codec/core/error.h"

namespace brevis::codec {
namespace {

struct cctx_free {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct dctx_free {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

}  // namespace

ZSTD_CCtx* thread_zstd_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, cctx_free> c(ZSTD_createCCtx());
  fail_if(c == nullptr, errc::limit, "zstd: cannot create a context");
  return c.get();
}

ZSTD_DCtx* thread_zstd_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, dctx_free> d(ZSTD_createDCtx());
  fail_if(d == nullptr, errc::limit, "zstd: cannot create a context");
  return d.get();
}

}  // namespace brevis::codec
