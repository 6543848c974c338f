// rans_static: static order-0 rANS over the value's lanes (8- or 16-bit
// symbols) with the frequency table held in the node's blob.
//
// Blob format (all varints are unsigned LEB128):
//   u8      scale             precision: frequencies sum to 2^scale, 1..16
//   varint  n                 number of symbols, 1..2^(8 width)
//   n x varint  symbol gaps   first symbol, then symbol[i] - symbol[i-1] - 1
//   n x varint  freq - 1      frequency of each symbol, minus one
// Symbols are strictly increasing and below 2^(8 width); the frequencies sum
// to exactly 2^scale; nothing follows. Gaps and freq-1 are small on weights,
// so a table of a few thousand bf16 values costs a few KB once per tensor.
//
// Payload: codec/entropy/rans_static.h.
#include "codec/leaves/rans_static.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "codec/dsl/operator.h"

namespace brevis::codec {

bytes serialize_rans_static_table(rans_static::table const& t) {
  bytes out;
  put_u8(out, static_cast<uint8_t>(t.scale));
  put_varint(out, t.symbols.size());
  for (size_t i = 0; i < t.symbols.size(); ++i) {
    put_varint(out,
               i == 0 ? t.symbols[0] : t.symbols[i] - t.symbols[i - 1] - 1);
  }
  for (uint32_t f : t.freqs) put_varint(out, f - 1);
  return out;
}

rans_static::table parse_rans_static_table(byte_view blob, unsigned width) {
  fail_if(width != 1 && width != 2, errc::corrupt,
          "rans_static: symbols are 8 or 16 bits");
  uint64_t const alphabet = uint64_t{1} << (8 * width);
  byte_reader r(blob);
  rans_static::table t;
  t.scale = r.u8();
  fail_if(t.scale < 1 || t.scale > rans_static::max_scale, errc::corrupt,
          "rans_static: table precision out of range");
  uint64_t const n = r.varint();
  fail_if(n < 1 || n > alphabet || n > (uint64_t{1} << t.scale), errc::corrupt,
          "rans_static: symbol count out of range");
  // Each symbol takes at least two bytes of blob: bounds the allocation.
  fail_if(n * 2 > r.remaining(), errc::truncated,
          "rans_static: table shorter than its symbol count");
  t.symbols.resize(n);
  t.freqs.resize(n);
  uint64_t sym = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t const gap = r.varint();
    fail_if(gap >= alphabet, errc::corrupt, "rans_static: symbol out of range");
    sym = i == 0 ? gap : sym + gap + 1;
    fail_if(sym >= alphabet, errc::corrupt, "rans_static: symbol out of range");
    t.symbols[i] = static_cast<uint32_t>(sym);
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t const f = r.varint();
    fail_if(f >= (uint64_t{1} << t.scale), errc::corrupt,
            "rans_static: frequency out of range");
    t.freqs[i] = static_cast<uint32_t>(f + 1);
  }
  fail_if(!r.empty(), errc::corrupt, "rans_static: trailing table bytes");
  rans_static::validate(t, 8 * width);
  return t;
}

rans_static::table choose_rans_static_table(std::span<uint64_t const> hist) {
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
  for (size_t s = 0; s < hist.size(); ++s) {
    if (hist[s] == 0) continue;
    symbols.push_back(static_cast<uint32_t>(s));
    counts.push_back(hist[s]);
  }
  fail_if(symbols.empty(), errc::domain, "rans_static: no symbols");
  // 2^16: the rare values of real weights each need a frequency of at least
  // one, and coarser precisions measured 0.1% larger on bf16 weights.
  return rans_static::normalize(symbols, counts, rans_static::max_scale);
}

double estimate_rans_static_bits(std::span<uint64_t const> hist) {
  rans_static::table const t = choose_rans_static_table(hist);
  return rans_static::coded_bits(hist, t) +
         8.0 * static_cast<double>(serialize_rans_static_table(t).size());
}

node make_rans_static(stream const& sample_or_whole_value, unsigned width) {
  std::vector<uint64_t> hist;
  rans_static::histogram(sample_or_whole_value.data, width, hist);
  node n = make_leaf(opcode::rans_static);
  n.blob = serialize_rans_static_table(choose_rans_static_table(hist));
  return n;
}

namespace {

// Coders are built from the blob: ~0.5 MB of tables at 2^16 precision, a few
// percent of decoding a 1 MiB chunk. Each thread keeps the last few, keyed by
// blob bytes and width, so the chunks of one tensor build them once.
std::shared_ptr<rans_static::coder const> coder_for(bytes const& blob,
                                                    unsigned width) {
  struct entry {
    bytes blob;
    unsigned width;
    std::shared_ptr<rans_static::coder const> c;
  };
  constexpr size_t slots = 4;
  thread_local std::vector<entry> cache;
  for (size_t i = 0; i < cache.size(); ++i) {
    if (cache[i].width == width && cache[i].blob == blob) {
      std::rotate(cache.begin(), cache.begin() + i, cache.begin() + i + 1);
      return cache.front().c;
    }
  }
  auto c = std::make_shared<rans_static::coder const>(
      parse_rans_static_table(blob, width), width);
  if (cache.size() == slots) cache.pop_back();
  cache.insert(cache.begin(), entry{blob, width, c});
  return c;
}

class rans_static_leaf final : public leaf_def {
 public:
  opcode code() const override { return opcode::rans_static; }
  std::string_view name() const override { return "rans_static"; }

  void check(node const& n, value_type in) const override {
    fail_if(!n.params.empty(), errc::bad_program,
            "rans_static takes no parameters");
    fail_if(in.width != 1 && in.width != 2, errc::bad_program,
            "rans_static codes 8- or 16-bit lanes");
    try {
      parse_rans_static_table(n.blob, in.width);
    } catch (error const& e) {
      fail(errc::bad_program, e.what());
    }
  }

  void encode(node const& n, stream const& in, bytes& out) const override {
    unsigned const w = in.type.width;
    fail_if(w != 1 && w != 2, errc::domain,
            "rans_static codes 8- or 16-bit lanes");
    std::shared_ptr<rans_static::coder const> c;
    try {
      c = coder_for(n.blob, w);
    } catch (error const& e) {
      fail(errc::bad_program, e.what());
    }
    c->encode(in.data, out);
  }

  void decode(node const& n, value_type in, byte_view payload, size_t out_size,
              uint8_t* out) const override {
    unsigned const w = in.width;
    fail_if(w != 1 && w != 2, errc::bad_program,
            "rans_static codes 8- or 16-bit lanes");
    fail_if(out_size % w != 0, errc::corrupt,
            "rans_static: size is not a whole number of lanes");
    coder_for(n.blob, w)->decode(payload, out_size / w, out);
  }
};

}  // namespace

leaf_def const& rans_static_leaf_def() {
  static rans_static_leaf const instance;
  return instance;
}

}  // namespace brevis::codec
