// zstd:level: a zstd frame over the value's bytes (levels 1..22). Catches
// repeats and long-range structure that order-0/1 coders cannot see.
#include <zstd.h>

#include <memory>
#include <string>

#include "codec/core/staging.h"
#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

struct cctx_free {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct dctx_free {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// One context per thread: creating them costs more than coding small chunks.
ZSTD_CCtx* thread_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, cctx_free> c(ZSTD_createCCtx());
  fail_if(c == nullptr, errc::domain, "zstd: cannot create a context");
  return c.get();
}
ZSTD_DCtx* thread_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, dctx_free> d(ZSTD_createDCtx());
  fail_if(d == nullptr, errc::limit, "zstd: cannot create a context");
  return d.get();
}

class zstd_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::zstd; }
  std::string_view name() const override { return "zstd"; }

  void check(node const& n, value_type) const override {
    fail_if(n.params.size() != 1 || !n.blob.empty(), errc::bad_program,
            "zstd takes one parameter, the level");
    fail_if(n.params[0] < 1 || n.params[0] > 22, errc::bad_program,
            "zstd level is 1..22");
  }

  void encode(node const& n, stream const& in, bytes& out) const override {
    encode_view(n, in.data, in.type, out);
  }

  void encode_view(node const& n, byte_view in, value_type type,
                   bytes& out) const override {
    check(n, type);
    size_t const bound = ZSTD_compressBound(in.size());
    staging_buffer stage(bound);
    size_t const r =
        ZSTD_compressCCtx(thread_cctx(), stage.data(), bound, in.data(),
                          in.size(), static_cast<int>(n.params[0]));
    if (ZSTD_isError(r)) {
      fail(errc::domain, std::string("zstd: ") + ZSTD_getErrorName(r));
    }
    out.insert(out.end(), stage.data(), stage.data() + r);
  }

  void decode(node const&, value_type, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    // The frame must declare exactly the size we expect before we decode.
    unsigned long long const declared =
        ZSTD_getFrameContentSize(payload.data(), payload.size());
    fail_if(declared == ZSTD_CONTENTSIZE_ERROR ||
                declared == ZSTD_CONTENTSIZE_UNKNOWN || declared != out_size,
            errc::corrupt, "zstd: frame size differs from value size");
    size_t const frame =
        ZSTD_findFrameCompressedSize(payload.data(), payload.size());
    fail_if(ZSTD_isError(frame) || frame != payload.size(), errc::corrupt,
            "zstd: payload is not exactly one frame");
    size_t const r = ZSTD_decompressDCtx(thread_dctx(), out, out_size,
                                         payload.data(), payload.size());
    fail_if(ZSTD_isError(r) || r != out_size, errc::corrupt,
            "zstd: frame does not decode to the value size");
  }
};

}  // namespace

leaf_def const& zstd_leaf_def() {
  static zstd_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
