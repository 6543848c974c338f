// zstd:level: a zstd frame over the value's bytes (levels 1..22). Catches
// repeats and long-range structure that order-0/1 coders cannot see.
#include <zstd.h>

#include <string>

#include "codec/core/staging.h"
#include "codec/core/zstd_context.h"
#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

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
        ZSTD_compressCCtx(thread_zstd_cctx(), stage.data(), bound, in.data(),
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
    size_t const r = ZSTD_decompressDCtx(thread_zstd_dctx(), out, out_size,
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
