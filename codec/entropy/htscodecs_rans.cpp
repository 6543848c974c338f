#include "codec/entropy/htscodecs_rans.h"

#include <htscodecs/rANS_static4x16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "codec/core/error.h"
#include "codec/core/staging.h"
#include "codec/entropy/rans4x16_order0_decoder.h"

// The library's coders behind rans_uncompress_to_4x16: exported by the
// shared library (1.3), though its headers do not declare them.
extern "C" {
unsigned char* rans_compress_O0_4x16(unsigned char*, unsigned, unsigned char*,
                                     unsigned*);
unsigned char* rans_compress_O0_32x16(unsigned char*, unsigned, unsigned char*,
                                      unsigned*);
unsigned char* rans_compress_O0_32x16_avx2(unsigned char*, unsigned,
                                           unsigned char*, unsigned*);
unsigned char* rans_compress_O0_32x16_avx512(unsigned char*, unsigned,
                                             unsigned char*, unsigned*);
unsigned char* rans_uncompress_O0_4x16(unsigned char*, unsigned, unsigned char*,
                                       unsigned);
unsigned char* rans_uncompress_O0_32x16(unsigned char*, unsigned,
                                        unsigned char*, unsigned);
unsigned char* rans_uncompress_O1_32x16(unsigned char*, unsigned,
                                        unsigned char*, unsigned);
unsigned char* rans_uncompress_O0_32x16_sse4(unsigned char*, unsigned,
                                             unsigned char*, unsigned);
unsigned char* rans_uncompress_O1_32x16_sse4(unsigned char*, unsigned,
                                             unsigned char*, unsigned);
unsigned char* rans_uncompress_O0_32x16_avx2(unsigned char*, unsigned,
                                             unsigned char*, unsigned);
unsigned char* rans_uncompress_O1_32x16_avx2(unsigned char*, unsigned,
                                             unsigned char*, unsigned);
unsigned char* rans_uncompress_O0_32x16_avx512(unsigned char*, unsigned,
                                               unsigned char*, unsigned);
unsigned char* rans_uncompress_O1_32x16_avx512(unsigned char*, unsigned,
                                               unsigned char*, unsigned);
}

namespace brevis::codec::htscodecs_rans {
namespace {

// The library takes sizes as unsigned int; stay far below its limits.
constexpr size_t max_size = size_t{1} << 30;

using encode_fn = unsigned char* (*)(unsigned char* in, unsigned in_size,
                                     unsigned char* out, unsigned* out_size);

// The library's order-0 coder, chosen as its front end does for this CPU
// (once: the front end runs cpuid on every 32-way call, which traps to the
// hypervisor on virtual machines; measured 5% of compressing a bf16 file).
encode_fn order0_coder(bool x32) {
  static encode_fn const o0_32 = [] {
    // The library prefers AVX2 on AMD, where its AVX-512 coder is slower.
    bool const amd = __builtin_cpu_is("amd");
    if (__builtin_cpu_supports("avx512f") &&
        !(amd && __builtin_cpu_supports("avx2"))) {
      return &rans_compress_O0_32x16_avx512;
    }
    if (__builtin_cpu_supports("avx2")) return &rans_compress_O0_32x16_avx2;
    return &rans_compress_O0_32x16;
  }();
  return x32 ? o0_32 : &rans_compress_O0_4x16;
}

// The library's size field (see get_size): 7-bit groups, most significant
// first, the high bit set on all but the last.
size_t put_size(uint32_t v, uint8_t* out) {
  size_t n = 1;
  while (n < 5 && (v >> (7 * n)) != 0) ++n;
  for (size_t i = 0; i < n; ++i) {
    auto const group = static_cast<uint8_t>((v >> (7 * (n - 1 - i))) & 0x7f);
    out[i] = group | (i + 1 < n ? 0x80 : 0);
  }
  return n;
}

// Appends the order-0 stream the library's front end (rans_compress_to_4x16)
// writes for `flags`, calling its coder directly; false if the coder failed.
bool compress_order0(byte_view in, int flags, bytes& out) {
  auto const size = static_cast<unsigned>(in.size());
  unsigned const bound = rans_compress_bound_4x16(size, flags);
  staging_buffer stage(bound);
  uint8_t* const s = stage.data();
  s[0] = static_cast<uint8_t>(flags);
  size_t const meta = 1 + put_size(size, s + 1);
  unsigned coded = bound - static_cast<unsigned>(meta);
  // The coders do not modify their input.
  unsigned char* r = order0_coder((flags & RANS_ORDER_X32) != 0)(
      const_cast<uint8_t*>(in.data()), size, s + meta, &coded);
  if (r == nullptr || coded > bound - meta) return false;
  if (coded >= size) {  // coding did not pay: stored, as the front end does
    s[0] = static_cast<uint8_t>((flags & ~3) | RANS_ORDER_CAT);
    out.insert(out.end(), s, s + meta);
    out.insert(out.end(), in.begin(), in.end());
    return true;
  }
  out.insert(out.end(), s, s + meta + coded);
  return true;
}

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

// The size field of the library's streams: 7-bit groups, most significant
// first, the high bit set on all but the last (at most 5 bytes for 32 bits).
uint32_t get_size(byte_view payload, size_t& at) {
  uint64_t v = 0;
  for (size_t n = 0; n < 5; ++n) {
    fail_if(at >= payload.size(), errc::truncated, "rans: truncated header");
    uint8_t const c = payload[at++];
    v = v << 7 | (c & 0x7f);
    if ((c & 0x80) == 0) {
      fail_if(v > UINT32_MAX, errc::corrupt, "rans: size out of range");
      return static_cast<uint32_t>(v);
    }
  }
  fail(errc::corrupt, "rans: size field too long");
}

using decode_fn = unsigned char* (*)(unsigned char* in, unsigned in_size,
                                     unsigned char* out, unsigned out_size);

// The library's coder for a stream's order byte, chosen as its front end
// does for this CPU (once, not per call); nullptr for 4-way order 1, whose
// coder the library does not export (its front end runs no cpuid for it).
decode_fn coder_for(uint8_t mode) {
  static decode_fn const o0_32 = [] {
    if (__builtin_cpu_supports("avx512f")) {
      return &rans_uncompress_O0_32x16_avx512;
    }
    if (__builtin_cpu_supports("avx2")) return &rans_uncompress_O0_32x16_avx2;
    if (__builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3") &&
        __builtin_cpu_supports("popcnt")) {
      return &rans_uncompress_O0_32x16_sse4;
    }
    return &rans_uncompress_O0_32x16;
  }();
  static decode_fn const o1_32 = [] {
    if (__builtin_cpu_supports("avx512f")) {
      return &rans_uncompress_O1_32x16_avx512;
    }
    if (__builtin_cpu_supports("avx2")) return &rans_uncompress_O1_32x16_avx2;
    if (__builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3") &&
        __builtin_cpu_supports("popcnt")) {
      return &rans_uncompress_O1_32x16_sse4;
    }
    return &rans_uncompress_O1_32x16;
  }();
  bool const x32 = (mode & RANS_ORDER_X32) != 0;
  if (mode & 1) return x32 ? o1_32 : nullptr;
  return x32 ? o0_32 : &rans_uncompress_O0_4x16;
}

}  // namespace

void encode(byte_view in, unsigned order, bytes& out) {
  fail_if(order > 1, errc::bad_program, "rans: order is 0 or 1");
  if (in.empty()) return;
  fail_if(in.size() > max_size, errc::domain, "rans: input too large");
  int const x32 = in.size() >= x32_threshold ? RANS_ORDER_X32 : 0;
  int const flags = static_cast<int>(order) | x32;
  if (order == 0) {
    fail_if(!compress_order0(in, flags, out), errc::domain,
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
  // The library's front end (rans_uncompress_to_4x16) reads the same
  // header, then calls the coder below; it is bypassed because htscodecs
  // 1.3 runs cpuid on every call of a 32-way stream, which traps to the
  // hypervisor on virtual machines (measured 5% of decoding a bf16 file).
  size_t at = 1;
  uint32_t const declared = get_size(payload, at);
  fail_if(declared != out_size, errc::corrupt,
          "rans: stream does not decode to the value size");
  byte_view const body = payload.subspan(at);
  fail_if(body.empty(), errc::corrupt,
          "rans: stream does not decode to the value size");
  if (mode & RANS_ORDER_CAT) {
    fail_if(body.size() < out_size, errc::truncated,
            "rans: stored stream shorter than its value");
    std::memcpy(out, body.data(), out_size);
    return;
  }
  if ((mode & (RANS_ORDER_X32 | 1)) == 0) {
    // 4-way order 0 (values under x32_threshold): our decoder, whose table
    // costs a fill per symbol rather than a store per slot.
    rans4x16_order0::decode(body, out_size, out);
    return;
  }
  decode_fn const coder = coder_for(mode);
  unsigned char* r = nullptr;
  unsigned got = static_cast<unsigned>(out_size);
  if (coder != nullptr) {
    r = coder(const_cast<uint8_t*>(body.data()),
              static_cast<unsigned>(body.size()), out, got);
  } else {
    r = rans_uncompress_to_4x16(const_cast<uint8_t*>(payload.data()),
                                static_cast<unsigned>(payload.size()), out,
                                &got);
  }
  fail_if(r != out || got != out_size, errc::corrupt,
          "rans: stream does not decode to the value size");
}

}  // namespace brevis::codec::htscodecs_rans
