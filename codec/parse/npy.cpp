// NumPy .npy: "\x93NUMPY", major, minor, header length (u16 for v1, u32 for
// v2/v3), then a Python dict literal {'descr': ..., 'fortran_order': ...,
// 'shape': (...)} padded with spaces and '\n', then the array bytes.
//
// Little-endian (and byte-order-free) numeric descrs become typed tensors;
// big-endian, complex, structured and other descrs give an untyped tensor
// covering the rest of the file; object arrays ('O', stored as a pickle) are
// opaque. A Fortran-order array is reported with its shape reversed, which is
// the C-order shape of the same bytes.

#include "codec/parse/npy.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include "codec/core/error.h"
#include "codec/parse/util.h"

namespace brevis::codec {

namespace {

constexpr uint64_t max_header = 1u << 20;
constexpr int max_depth = 16;

// A Python literal, only as far as .npy headers need it.
struct literal {
  enum kind_t { string, integer, boolean, none, sequence, dict } kind = none;
  std::string text;            // string
  int64_t number = 0;          // integer, boolean
  std::vector<literal> items;  // sequence; dict as key, value, key, value...
};

class literal_parser {
 public:
  explicit literal_parser(std::string_view s) : s_(s) {}

  literal parse_top() {
    literal v = value(0);
    skip_space();
    fail_if(pos_ != s_.size(), errc::corrupt, "trailing text in npy header");
    return v;
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' ||
                                s_[pos_] == '\t' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  char peek() {
    skip_space();
    fail_if(pos_ >= s_.size(), errc::corrupt, "npy header dict truncated");
    return s_[pos_];
  }

  bool word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  literal value(int depth) {
    fail_if(depth > max_depth, errc::limit, "npy header nested too deep");
    char const c = peek();
    literal v;
    if (c == '\'' || c == '"') {
      v.kind = literal::string;
      ++pos_;
      while (true) {
        fail_if(pos_ >= s_.size(), errc::corrupt, "unterminated string");
        char const d = s_[pos_++];
        if (d == c) break;
        fail_if(d == '\\', errc::corrupt, "escapes in npy header strings");
        v.text.push_back(d);
      }
    } else if (c == '(' || c == '[' || c == '{') {
      char const close = c == '(' ? ')' : c == '[' ? ']' : '}';
      v.kind = c == '{' ? literal::dict : literal::sequence;
      ++pos_;
      while (peek() != close) {
        v.items.push_back(value(depth + 1));
        if (v.kind == literal::dict) {
          fail_if(peek() != ':', errc::corrupt, "expected ':' in npy dict");
          ++pos_;
          v.items.push_back(value(depth + 1));
        }
        if (peek() == ',') {
          ++pos_;
        } else {
          fail_if(peek() != close, errc::corrupt, "expected ',' in npy header");
        }
      }
      ++pos_;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = literal::integer;
      bool const negative = c == '-';
      if (negative) ++pos_;
      size_t digits = 0;
      uint64_t n = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        fail_if(n > (std::numeric_limits<int64_t>::max() - 9) / 10,
                errc::corrupt, "integer too large");
        n = n * 10 + static_cast<uint64_t>(s_[pos_++] - '0');
        ++digits;
      }
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 longs
      fail_if(digits == 0, errc::corrupt, "malformed integer");
      v.number = negative ? -static_cast<int64_t>(n) : static_cast<int64_t>(n);
    } else if (word("True")) {
      v.kind = literal::boolean;
      v.number = 1;
    } else if (word("False")) {
      v.kind = literal::boolean;
    } else if (word("None")) {
      v.kind = literal::none;
    } else {
      fail(errc::corrupt, "unexpected character in npy header");
    }
    return v;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

literal const* dict_get(literal const& d, std::string_view key) {
  for (size_t i = 0; i + 1 < d.items.size(); i += 2) {
    if (d.items[i].kind == literal::string && d.items[i].text == key) {
      return &d.items[i + 1];
    }
  }
  return nullptr;
}

dtype npy_dtype(std::string_view descr) {
  if (descr.size() < 3) return dtype::none;
  char const order = descr[0];
  std::string_view const code = descr.substr(1);
  // One-byte types have no byte order; numpy writes '|' but any is fine.
  if (code == "u1") return dtype::u8;
  if (code == "i1") return dtype::i8;
  if (code == "b1") return dtype::boolean;
  if (order != '<') return dtype::none;  // big-endian: left to the search
  if (code == "f2") return dtype::f16;
  if (code == "f4") return dtype::f32;
  if (code == "f8") return dtype::f64;
  if (code == "i2") return dtype::i16;
  if (code == "u2") return dtype::u16;
  if (code == "i4") return dtype::i32;
  if (code == "u4") return dtype::u32;
  if (code == "i8") return dtype::i64;
  if (code == "u8") return dtype::u64;
  return dtype::none;
}

}  // namespace

bool looks_like_npy(byte_view file) noexcept {
  return file.size() >= 6 && std::memcmp(file.data(), "\x93NUMPY", 6) == 0;
}

parsed_file parse_npy(byte_view file) {
  byte_reader in(file);
  in.take(6);
  uint8_t const major = in.u8();
  in.u8();  // minor
  fail_if(major < 1 || major > 3, errc::unsupported_version,
          "unknown npy version");
  uint64_t const n = major == 1 ? in.le<uint16_t>() : in.le<uint32_t>();
  fail_if(n > max_header, errc::limit, "npy header above 1 MB");
  byte_view const text = in.take(n);
  literal const header =
      literal_parser({reinterpret_cast<char const*>(text.data()), text.size()})
          .parse_top();
  fail_if(header.kind != literal::dict, errc::corrupt,
          "npy header is not a dict");
  literal const* descr = dict_get(header, "descr");
  literal const* fortran = dict_get(header, "fortran_order");
  literal const* shape = dict_get(header, "shape");
  fail_if(descr == nullptr || fortran == nullptr || shape == nullptr,
          errc::corrupt, "npy header lacks descr, fortran_order or shape");
  fail_if(fortran->kind != literal::boolean, errc::corrupt,
          "fortran_order is not a bool");
  fail_if(shape->kind != literal::sequence, errc::corrupt,
          "shape is not a tuple");

  region data;
  data.offset = in.position();
  data.kind = region_kind::tensor;
  data.name = "array";
  for (literal const& d : shape->items) {
    fail_if(d.kind != literal::integer || d.number < 0, errc::corrupt,
            "shape has a non-integer or negative dimension");
    data.shape.push_back(static_cast<uint64_t>(d.number));
  }
  if (fortran->number != 0) std::reverse(data.shape.begin(), data.shape.end());
  uint64_t const elems = parse_detail::element_count(data.shape);

  std::vector<region> regions;
  regions.push_back(parse_detail::opaque_region(0, data.offset, "npy header"));
  if (descr->kind == literal::string) data.type = npy_dtype(descr->text);
  if (data.type != dtype::none) {
    data.length =
        parse_detail::checked_mul(elems, dtype_width(data.type), "array size");
    fail_if(data.length > in.remaining(), errc::truncated,
            "npy array data truncated");
  } else {
    // Unknown width (or a pickle for object arrays): the rest of the file.
    data.length = in.remaining();
    data.shape.clear();
    if (descr->kind == literal::string &&
        descr->text.find('O') != std::string::npos) {
      data.kind = region_kind::opaque;
      data.name = "npy object pickle";
    }
  }
  regions.push_back(std::move(data));
  parsed_file out;
  out.format = file_format::npy;
  out.regions = parse_detail::fill_gaps(std::move(regions), file.size(),
                                        "trailing bytes");
  return out;
}

}  // namespace brevis::codec
