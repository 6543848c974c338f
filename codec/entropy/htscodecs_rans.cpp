#include "codec/entropy/htscodecs_rans.h"

#include <htscodecs/rANS_static4x16.h>

#include <algorithm>

#include "codec/core/error.h"
#include "codec/core/staging.h"

namespace brevis::codec::htscodecs_rans {
namespace {

// The library takes sizes as unsigned int; stay far below its limits.
constexpr size_t max_size = size_t{1} << 30;

// Appends the stream for `flags`; false if the library failed.
bool compress(byte_view in, int flags, bytes& out) {
  auto const size = static_cast<unsigned>(in.size());
  unsigned const bound = rans_compress_bound_4x16(size, flags);
  staging_buffer stage(bound);
  unsigned out_size = bound;
  // The library does not modify its input in these modes (no pack or RLE).
  unsigned char* r = rans_compress_to_4x16(
      const_cast<uint8_t*>(in.data()), size, stage.data(), &out_size, flags);
  if (r == nullptr || out_size > bound || out_size == 0) return false;
  out.insert(out.end(), stage.data(), stage.data() + out_size);
  return true;
}

bool decodes_back(byte_view stream, byte_view in) {
  bytes back(in.size());
  try {
    decode(stream, 1, back.size(), back.data());
  } catch (error const&) {
    return false;
  }
  return std::equal(back.begin(), back.end(), in.begin());
}

}  // namespace

void encode(byte_view in, unsigned order, bytes& out) {
  fail_if(order > 1, errc::bad_program, "rans: order is 0 or 1");
  if (in.empty()) return;
  fail_if(in.size() > max_size, errc::domain, "rans: input too large");
  int const x32 = in.size() >= x32_threshold ? RANS_ORDER_X32 : 0;
  int const flags = static_cast<int>(order) | x32;
  if (order == 0) {
    fail_if(!compress(in, flags, out), errc::domain,
            "rans: htscodecs failed to compress");
    return;
  }
  // htscodecs 1.3's 4-way order-1 coder writes streams it cannot decode when
  // every context has a single successor (a byte ramp); its 32-way coder
  // does not. 4-way order-1 streams (small inputs, cheap to check) are
  // verified, and fall back to 32-way.
  size_t const base = out.size();
  if (x32 != 0) {
    fail_if(!compress(in, flags, out), errc::domain,
            "rans: htscodecs failed to compress");
    return;
  }
  for (int f : {flags, flags | RANS_ORDER_X32}) {
    if (compress(in, f, out) &&
        decodes_back(byte_view(out).subspan(base), in)) {
      return;
    }
    out.resize(base);
  }
  fail(errc::domain, "rans: htscodecs cannot code this input at order 1");
}

void decode(byte_view payload, unsigned order, size_t out_size, uint8_t* out) {
  if (out_size == 0) {
    fail_if(!payload.empty(), errc::corrupt, "rans: payload for empty value");
    return;
  }
  fail_if(out_size > max_size, errc::limit, "rans: value too large");
  fail_if(payload.empty(), errc::truncated, "rans: empty payload");
  fail_if(payload.size() > max_size, errc::corrupt, "rans: payload too large");
  // Admit only the order byte forms our encoder writes: the order bit (clear
  // for order 0; order 1 falls back to 0 on tiny inputs), the 32-way flag,
  // and CAT (stored) when coding did not pay.
  uint8_t const mode = payload[0];
  unsigned const allowed = RANS_ORDER_X32 | RANS_ORDER_CAT | (order ? 1u : 0u);
  fail_if((mode & ~allowed) != 0, errc::corrupt,
          "rans: unsupported stream mode");
  unsigned got = static_cast<unsigned>(out_size);
  unsigned char* r =
      rans_uncompress_to_4x16(const_cast<uint8_t*>(payload.data()),
                              static_cast<unsigned>(payload.size()), out, &got);
  fail_if(r != out || got != out_size, errc::corrupt,
          "rans: stream does not decode to the value size");
}

}  // namespace brevis::codec::htscodecs_rans
