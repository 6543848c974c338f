// GGUF v2/v3: "GGUF", u32 version, u64 tensor count, u64 metadata count,
// metadata key/values, tensor infos (name, dims, ggml type, offset relative
// to the data section), then the data section at the next multiple of
// `general.alignment` (default 32).
//
// F32/F16/BF16/F64 and the plain integer types become typed tensors; block
// quantized types become dtype::gguf_block + type. Shapes are reported
// outermost first (GGUF lists ne[0], the fastest dimension, first). A type
// without a known block layout rejects the file, since its size is unknown.

#include "codec/parse/gguf.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "codec/core/error.h"
#include "codec/parse/util.h"

namespace brevis::codec {

namespace {

using parse_detail::checked_add;
using parse_detail::checked_mul;

// Indexed by ggml_type. Removed types (4, 5, 36..38) have no entry.
constexpr ggml_type_info ggml_types[] = {
    {"f32", 1, 4},        {"f16", 1, 2},        {"q4_0", 32, 18},
    {"q4_1", 32, 20},     {nullptr, 0, 0},      {nullptr, 0, 0},
    {"q5_0", 32, 22},     {"q5_1", 32, 24},     {"q8_0", 32, 34},
    {"q8_1", 32, 36},     {"q2_K", 256, 84},    {"q3_K", 256, 110},
    {"q4_K", 256, 144},   {"q5_K", 256, 176},   {"q6_K", 256, 210},
    {"q8_K", 256, 292},   {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74},
    {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},   {"iq4_nl", 32, 18},
    {"iq3_s", 256, 110},  {"iq2_s", 256, 82},   {"iq4_xs", 256, 136},
    {"i8", 1, 1},         {"i16", 1, 2},        {"i32", 1, 4},
    {"i64", 1, 8},        {"f64", 1, 8},        {"iq1_m", 256, 56},
    {"bf16", 1, 2},       {"q4_0_4x4", 32, 18}, {"q4_0_4x8", 32, 18},
    {"q4_0_8x8", 32, 18}, {"tq1_0", 256, 54},   {"tq2_0", 256, 66},
    {nullptr, 0, 0},      {nullptr, 0, 0},      {nullptr, 0, 0},
    {"mxfp4", 32, 17},
};

dtype plain_dtype(uint32_t type) {
  switch (type) {
    case 0:
      return dtype::f32;
    case 1:
      return dtype::f16;
    case 24:
      return dtype::i8;
    case 25:
      return dtype::i16;
    case 26:
      return dtype::i32;
    case 27:
      return dtype::i64;
    case 28:
      return dtype::f64;
    case 30:
      return dtype::bf16;
    default:
      return dtype::none;
  }
}

enum gguf_value : uint32_t {
  v_u8 = 0,
  v_i8 = 1,
  v_u16 = 2,
  v_i16 = 3,
  v_u32 = 4,
  v_i32 = 5,
  v_f32 = 6,
  v_bool = 7,
  v_string = 8,
  v_array = 9,
  v_u64 = 10,
  v_i64 = 11,
  v_f64 = 12,
};

// Byte size of a fixed-size value type, 0 for string/array/unknown.
uint64_t fixed_size(uint32_t type) {
  switch (type) {
    case v_u8:
    case v_i8:
    case v_bool:
      return 1;
    case v_u16:
    case v_i16:
      return 2;
    case v_u32:
    case v_i32:
    case v_f32:
      return 4;
    case v_u64:
    case v_i64:
    case v_f64:
      return 8;
    default:
      return 0;
  }
}

std::string_view read_string(byte_reader& in) {
  uint64_t const n = in.le<uint64_t>();
  fail_if(n > in.remaining(), errc::truncated, "gguf string truncated");
  byte_view const s = in.take(n);
  return {reinterpret_cast<char const*>(s.data()), s.size()};
}

// Skips one value; arrays may nest (the spec allows it) up to a small depth.
// Every element consumes bytes, so the loops end with the input.
void skip_value(byte_reader& in, uint32_t type, int depth) {
  fail_if(depth > 4, errc::limit, "gguf arrays nested too deep");
  if (uint64_t const size = fixed_size(type)) {
    in.take(size);
  } else if (type == v_string) {
    read_string(in);
  } else if (type == v_array) {
    uint32_t const elem = in.le<uint32_t>();
    uint64_t const count = in.le<uint64_t>();
    if (uint64_t const size = fixed_size(elem)) {
      uint64_t const total = checked_mul(count, size, "gguf array size");
      fail_if(total > in.remaining(), errc::truncated, "gguf array truncated");
      in.take(total);
    } else {
      fail_if(elem != v_string && elem != v_array, errc::corrupt,
              "unknown gguf array element type");
      // Strings take >= 8 bytes, arrays >= 12: reject counts that cannot fit.
      fail_if(count > in.remaining() / 8, errc::truncated,
              "gguf array truncated");
      for (uint64_t i = 0; i < count; ++i) skip_value(in, elem, depth + 1);
    }
  } else {
    fail(errc::corrupt, "unknown gguf value type " + std::to_string(type));
  }
}

uint64_t read_uint_value(byte_reader& in, uint32_t type) {
  switch (type) {
    case v_u8:
      return in.u8();
    case v_u16:
      return in.le<uint16_t>();
    case v_u32:
      return in.le<uint32_t>();
    case v_u64:
      return in.le<uint64_t>();
    case v_i8:
    case v_i16:
    case v_i32:
    case v_i64: {
      int64_t v = 0;
      if (type == v_i8) v = static_cast<int8_t>(in.u8());
      if (type == v_i16) v = in.le<int16_t>();
      if (type == v_i32) v = in.le<int32_t>();
      if (type == v_i64) v = in.le<int64_t>();
      fail_if(v < 0, errc::corrupt, "negative general.alignment");
      return static_cast<uint64_t>(v);
    }
    default:
      fail(errc::corrupt, "general.alignment is not an integer");
  }
}

}  // namespace

ggml_type_info const* ggml_type_lookup(uint32_t type) noexcept {
  if (type >= std::size(ggml_types) || ggml_types[type].name == nullptr) {
    return nullptr;
  }
  return &ggml_types[type];
}

bool looks_like_gguf(byte_view file) noexcept {
  return file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0;
}

parsed_file parse_gguf(byte_view file) {
  byte_reader in(file);
  in.take(4);
  uint32_t const version = in.le<uint32_t>();
  fail_if(version != 2 && version != 3, errc::unsupported_version,
          "gguf version is not 2 or 3");
  uint64_t const tensor_count = in.le<uint64_t>();
  uint64_t const kv_count = in.le<uint64_t>();
  // A key/value takes >= 12 bytes and a tensor info >= 24: counts that could
  // not fit are rejected before any loop or allocation.
  fail_if(kv_count > in.remaining() / 12, errc::corrupt,
          "gguf metadata count exceeds the file");
  fail_if(tensor_count > in.remaining() / 24, errc::corrupt,
          "gguf tensor count exceeds the file");

  uint64_t alignment = 32;
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string_view const key = read_string(in);
    uint32_t const type = in.le<uint32_t>();
    if (key == "general.alignment") {
      alignment = read_uint_value(in, type);
      fail_if(alignment == 0 || (alignment & (alignment - 1)) != 0 ||
                  alignment > (1u << 30),
              errc::corrupt, "general.alignment is not a power of two");
    } else {
      skip_value(in, type, 0);
    }
  }

  std::vector<region> regions;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    region r;
    r.kind = region_kind::tensor;
    r.name = read_string(in);
    uint32_t const n_dims = in.le<uint32_t>();
    fail_if(n_dims > 8, errc::corrupt, "gguf tensor has more than 8 dims");
    for (uint32_t d = 0; d < n_dims; ++d) r.shape.push_back(in.le<uint64_t>());
    std::reverse(r.shape.begin(), r.shape.end());
    uint32_t const type = in.le<uint32_t>();
    ggml_type_info const* info = ggml_type_lookup(type);
    if (info == nullptr) {
      fail(errc::corrupt, "unknown ggml type " + std::to_string(type));
    }
    uint64_t const elems = parse_detail::element_count(r.shape);
    fail_if(elems % info->block_elems != 0, errc::corrupt,
            "gguf tensor is not a whole number of blocks");
    r.length = checked_mul(elems / info->block_elems, info->block_bytes,
                           "tensor size");
    r.offset = in.le<uint64_t>();  // relative for now
    r.type = plain_dtype(type);
    if (r.type == dtype::none) {
      r.type =
          static_cast<dtype>(static_cast<unsigned>(dtype::gguf_block) + type);
    }
    regions.push_back(std::move(r));
  }

  uint64_t const header_end = in.position();
  uint64_t const data_start =
      checked_add(header_end, alignment - 1, "gguf data start") / alignment *
      alignment;
  for (region& r : regions) {
    r.offset = checked_add(r.offset, data_start, "gguf tensor offset");
  }
  // A file without tensors may end before the alignment padding.
  uint64_t const header_len = std::min<uint64_t>(data_start, file.size());
  regions.push_back(parse_detail::opaque_region(0, header_len, "gguf header"));
  parsed_file out;
  out.format = file_format::gguf;
  out.regions =
      parse_detail::fill_gaps(std::move(regions), file.size(), "padding");
  return out;
}

}  // namespace brevis::codec
