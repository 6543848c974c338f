// safetensors: [u64 LE n][n bytes of JSON][data]. The JSON maps tensor names
// to {dtype, shape, data_offsets: [begin, end]} relative to the data start;
// "__metadata__" holds free-form strings.
//
// A tensor whose byte length disagrees with its shape and dtype, or whose
// dtype this build does not know, stays a tensor region but untyped
// (dtype::none, no shape): its bytes are still a separate stream, only the
// element type is not trusted. Overlapping or out-of-range tensors reject the
// file (the caller falls back to one untyped region).

#include "codec/parse/safetensors.h"

#include <nlohmann/json.hpp>
#include <string_view>

#include "codec/core/error.h"
#include "codec/parse/util.h"

namespace brevis::codec {

namespace {

// The reference implementation refuses headers above 100 MB as well; it keeps
// a hostile file from making the JSON parser allocate gigabytes.
constexpr uint64_t max_header = 100ull << 20;
constexpr int max_depth = 64;

dtype safetensors_dtype(std::string_view s) {
  struct entry {
    std::string_view name;
    dtype type;
  };
  static constexpr entry table[] = {
      {"BOOL", dtype::boolean},    {"U8", dtype::u8},
      {"I8", dtype::i8},           {"F8_E5M2", dtype::f8_e5m2},
      {"F8_E4M3", dtype::f8_e4m3}, {"I16", dtype::i16},
      {"U16", dtype::u16},         {"F16", dtype::f16},
      {"BF16", dtype::bf16},       {"I32", dtype::i32},
      {"U32", dtype::u32},         {"F32", dtype::f32},
      {"F64", dtype::f64},         {"I64", dtype::i64},
      {"U64", dtype::u64},
  };
  for (entry const& e : table) {
    if (e.name == s) return e.type;
  }
  return dtype::none;
}

// nlohmann parses iteratively but a deeply nested document still costs memory
// and a recursive destructor in some versions: refuse deep nesting up front.
void check_nesting(std::string_view json) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char const c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      fail_if(++depth > max_depth, errc::limit, "header JSON nested too deep");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

uint64_t json_u64(nlohmann::json const& v, char const* what) {
  if (!v.is_number_unsigned()) {
    // Non-negative integers parse as unsigned; anything else is malformed.
    fail(errc::corrupt, std::string(what) + " is not a non-negative integer");
  }
  return v.get<uint64_t>();
}

}  // namespace

bool looks_like_safetensors(byte_view file) noexcept {
  if (file.size() < 10) return false;
  uint64_t const n = load_le<uint64_t>(file.data());
  return n >= 2 && n <= file.size() - 8 && file[8] == '{';
}

parsed_file parse_safetensors(byte_view file) {
  byte_reader in(file);
  uint64_t const n = in.le<uint64_t>();
  fail_if(n > max_header, errc::limit, "safetensors header above 100 MB");
  fail_if(n > in.remaining(), errc::truncated, "safetensors header truncated");
  byte_view const json_bytes = in.take(n);
  std::string_view const json(reinterpret_cast<char const*>(json_bytes.data()),
                              json_bytes.size());
  check_nesting(json);
  nlohmann::json const header =
      nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  fail_if(header.is_discarded(), errc::corrupt, "header is not valid JSON");
  fail_if(!header.is_object(), errc::corrupt, "header is not a JSON object");

  uint64_t const data_start = 8 + n;
  uint64_t const data_size = file.size() - data_start;
  std::vector<region> regions;
  regions.push_back(
      parse_detail::opaque_region(0, data_start, "safetensors header"));
  for (auto const& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    fail_if(!info.is_object(), errc::corrupt, "tensor entry is not an object");
    auto const dt = info.find("dtype");
    auto const shape_it = info.find("shape");
    auto const offsets = info.find("data_offsets");
    fail_if(dt == info.end() || !dt->is_string() || shape_it == info.end() ||
                !shape_it->is_array() || offsets == info.end() ||
                !offsets->is_array() || offsets->size() != 2,
            errc::corrupt, "tensor entry lacks dtype, shape or data_offsets");
    uint64_t const begin = json_u64((*offsets)[0], "data offset");
    uint64_t const end = json_u64((*offsets)[1], "data offset");
    fail_if(end < begin, errc::corrupt, "tensor ends before it begins");
    fail_if(end > data_size, errc::corrupt, "tensor reaches past the file");
    region r;
    r.offset = data_start + begin;
    r.length = end - begin;
    r.kind = region_kind::tensor;
    r.name = name;
    r.type = safetensors_dtype(dt->get<std::string>());
    uint64_t elems = 1;
    bool shape_ok = true;
    for (auto const& d : *shape_it) {
      uint64_t const dim = json_u64(d, "shape dimension");
      r.shape.push_back(dim);
      uint64_t next = 0;
      shape_ok = shape_ok && !__builtin_mul_overflow(elems, dim, &next);
      elems = next;
    }
    uint64_t bytes = 0;
    if (r.type == dtype::none || !shape_ok ||
        __builtin_mul_overflow(elems, dtype_width(r.type), &bytes) ||
        bytes != r.length) {
      r.type = dtype::none;  // see the file comment: keep it, untyped
      r.shape.clear();
    }
    regions.push_back(std::move(r));
  }
  parsed_file out;
  out.format = file_format::safetensors;
  out.regions =
      parse_detail::fill_gaps(std::move(regions), file.size(), "padding");
  return out;
}

}  // namespace brevis::codec
