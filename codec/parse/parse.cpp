// parse_regions: picks a parser by magic and falls back to one untyped region
// whenever a parser gives up, so a malformed file never fails a write.

#include <algorithm>
#include <cassert>
#include <exception>
#include <string>

#include "codec/core/error.h"
#include "codec/parse/gguf.h"
#include "codec/parse/npy.h"
#include "codec/parse/pytorch_zip.h"
#include "codec/parse/region.h"
#include "codec/parse/safetensors.h"
#include "codec/parse/util.h"

namespace brevis::codec {

namespace parse_detail {

uint64_t checked_mul(uint64_t a, uint64_t b, char const* what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    fail(errc::corrupt, std::string(what) + " overflows 64 bits");
  }
  return r;
}

uint64_t checked_add(uint64_t a, uint64_t b, char const* what) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    fail(errc::corrupt, std::string(what) + " overflows 64 bits");
  }
  return r;
}

uint64_t element_count(std::vector<uint64_t> const& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n = checked_mul(n, d, "element count");
  return n;
}

region opaque_region(uint64_t offset, uint64_t length, std::string name) {
  region r;
  r.offset = offset;
  r.length = length;
  r.name = std::move(name);
  return r;
}

std::vector<region> fill_gaps(std::vector<region> regions, uint64_t size,
                              std::string const& gap_name) {
  std::erase_if(regions, [](region const& r) { return r.length == 0; });
  std::stable_sort(
      regions.begin(), regions.end(),
      [](region const& a, region const& b) { return a.offset < b.offset; });
  std::vector<region> out;
  out.reserve(regions.size() * 2 + 1);
  uint64_t pos = 0;
  for (region& r : regions) {
    uint64_t const end = checked_add(r.offset, r.length, "region end");
    fail_if(end > size, errc::corrupt, "region reaches past the end of file");
    fail_if(r.offset < pos, errc::corrupt, "regions overlap");
    if (r.offset > pos)
      out.push_back(opaque_region(pos, r.offset - pos, gap_name));
    pos = end;
    out.push_back(std::move(r));
  }
  if (pos < size) out.push_back(opaque_region(pos, size - pos, gap_name));
  return out;
}

std::vector<region> merge_opaque(std::vector<region> regions) {
  std::vector<region> out;
  out.reserve(regions.size());
  for (region& r : regions) {
    if (!out.empty() && r.kind == region_kind::opaque &&
        out.back().kind == region_kind::opaque &&
        out.back().offset + out.back().length == r.offset) {
      out.back().length += r.length;
      out.back().name += " + " + r.name;
      continue;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace parse_detail

void cut_name(std::string& name, size_t max_bytes) {
  if (name.size() <= max_bytes) return;
  size_t end = max_bytes;
  // Back to the first byte of the character the limit cuts: continuation
  // bytes are 10xxxxxx, at most 3 a character.
  while (end > 0 && end + 3 > max_bytes &&
         (static_cast<uint8_t>(name[end]) & 0xC0) == 0x80) {
    --end;
  }
  name.resize(end);
}

bool regions_cover(std::vector<region> const& regions, uint64_t size) {
  // Empty regions are rejected too: codecs downstream may assume bytes.
  uint64_t pos = 0;
  for (region const& r : regions) {
    if (r.offset != pos || r.length == 0 || r.length > size - pos) return false;
    pos += r.length;
  }
  return pos == size;
}

namespace {

struct parser {
  char const* name;
  file_format format;
  bool (*looks_like)(byte_view) noexcept;
  parsed_file (*parse)(byte_view);
  char const* extensions[4];  // name suffixes that move it to the front
};

constexpr parser parsers[] = {
    {"safetensors",
     file_format::safetensors,
     looks_like_safetensors,
     parse_safetensors,
     {".safetensors", nullptr, nullptr, nullptr}},
    {"pytorch zip",
     file_format::pytorch_zip,
     looks_like_zip,
     parse_pytorch_zip,
     {".pt", ".pth", ".bin", ".ckpt"}},
    {"gguf",
     file_format::gguf,
     looks_like_gguf,
     parse_gguf,
     {".gguf", nullptr, nullptr, nullptr}},
    {"npy",
     file_format::npy,
     looks_like_npy,
     parse_npy,
     {".npy", nullptr, nullptr, nullptr}},
};

bool hinted(parser const& p, std::string_view name) {
  for (char const* ext : p.extensions) {
    if (ext != nullptr && name.ends_with(ext)) return true;
  }
  return false;
}

parsed_file fallback(uint64_t size, std::string note) {
  parsed_file out;
  out.note = std::move(note);
  if (size > 0) {
    out.regions.push_back(parse_detail::opaque_region(0, size, "untyped"));
  }
  assert(regions_cover(out.regions, size));
  return out;
}

}  // namespace

parsed_file parse_regions(byte_view file, std::string_view name_hint) {
  if (file.empty()) return {};
  std::vector<parser const*> order;
  for (parser const& p : parsers) {
    if (hinted(p, name_hint)) order.push_back(&p);
  }
  for (parser const& p : parsers) {
    if (!hinted(p, name_hint)) order.push_back(&p);
  }
  std::string note;
  for (parser const* p : order) {
    if (!p->looks_like(file)) continue;
    std::string why;
    try {
      parsed_file out = p->parse(file);
      if (regions_cover(out.regions, file.size())) {
        out.format = p->format;
        return out;
      }
      why = "regions do not cover the file";
    } catch (error const& e) {
      why = e.what();
    } catch (std::exception const& e) {  // nlohmann::json, bad_alloc, ...
      why = e.what();
    }
    if (!note.empty()) note += "; ";
    note += std::string(p->name) + ": " + why;
  }
  if (note.empty()) note = "no parser recognised the file";
  return fallback(file.size(), std::move(note));
}

}  // namespace brevis::codec
