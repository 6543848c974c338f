// CPU ns an element of decoding a checkpoint's bf16 tensors with the
// store's programs, and with their 7-bit mantissas packed (the bits leaf)
// instead: `brevis_program_decode_bench FILE.safetensors [MIN [MAX]]` (the
// tensors of MIN to MAX bytes; 64 KiB and more by default). Built with the
// tests, never installed; for choosing programs on a CPU, not a test.
#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "codec/dsl/interpreter.h"
#include "codec/leaves/bits_kernels.h"
#include "codec/leaves/rans_static.h"
#include "codec/parse/region.h"
#include "codec/search/search_chooser.h"

using namespace brevis::codec;

namespace {

double cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

constexpr size_t chunk = 1u << 20;

struct coded {
  node program;
  std::vector<bytes> chunks;
  size_t bytes_total = 0;
};

coded encode_all(node const& p, byte_view data) {
  coded c{p, {}, 0};
  for (size_t at = 0; at < data.size(); at += chunk) {
    bytes out;
    encode_chunk(p, data.subspan(at, std::min(chunk, data.size() - at)), out);
    c.bytes_total += out.size();
    c.chunks.push_back(std::move(out));
  }
  return c;
}

double decode_ns(coded const& c, byte_view data, bytes& out) {
  double best = 1e300;
  for (int rep = 0; rep < 3; ++rep) {
    double const t0 = cpu_ns();
    size_t at = 0;
    for (bytes const& ch : c.chunks) {
      size_t const n = std::min(chunk, data.size() - at);
      decode_chunk(c.program, ch, n, out.data() + at);
      at += n;
    }
    best = std::min(best, cpu_ns() - t0);
  }
  return best;
}

// The mantissa's leaf of a bf16 program replaced by bits:7, or nothing.
bool pack_mantissa(node& p) {
  if (p.op != opcode::view || p.children.empty()) return false;
  node& e = p.children[0];
  if (e.op == opcode::bitfields && e.children.size() == 2 &&
      e.params.size() == 2 && e.params[0] == 7) {
    e.children[0] = make_leaf(opcode::bits, {7});
    return true;
  }
  if (e.op == opcode::fields && e.children.size() == 3) {
    e.children[2] = make_leaf(opcode::bits, {7});
    return true;
  }
  return false;
}

// Whole elements -> bitfields:7:9 of mantissa (`packed` or its own table)
// and the rest under its own table.
node split_whole(byte_view data, bool packed) {
  size_t const n = data.size() / 2;
  stream lo{bytes(n), {1, meaning::uint}};
  stream hi{bytes(2 * n), {2, meaning::uint}};
  for (size_t i = 0; i < n; ++i) {
    uint16_t const x = load_le<uint16_t>(data.data() + 2 * i);
    lo.data[i] = static_cast<uint8_t>(x & 127);
    store_le<uint16_t>(hi.data.data() + 2 * i, static_cast<uint16_t>(x >> 7));
  }
  node mant = packed ? make_leaf(opcode::bits, {7}) : make_rans_static(lo, 1);
  return make_op(
      opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
      {make_op(opcode::bitfields, {7, 9}, {mant, make_rans_static(hi, 2)}),
       make_leaf(opcode::raw)});
}

double mantissa_entropy(byte_view data) {
  uint64_t counts[128] = {};
  size_t const n = data.size() / 2;
  for (size_t i = 0; i < n; ++i) ++counts[data[2 * i] & 127];
  double h = 0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    double const p = static_cast<double>(c) / static_cast<double>(n);
    h -= p * std::log2(p);
  }
  return h;
}

struct tally {
  size_t tensors = 0, elements = 0, bytes = 0, packed_bytes = 0,
         split_bytes = 0;
  double ns = 0, packed_ns = 0, split_ns = 0;
};

}  // namespace

// ns a value of unpacking 7-bit values into u8 lanes, at each cap.
void unpack_speeds() {
  size_t const n = 1u << 20;
  bytes values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<uint8_t>(i * 37 % 128);
  bytes packed(bits_kernels::packed_size(n, 7)), back(n);
  bits_kernels::pack(values.data(), 1, n, 7, packed.data());
  for (unsigned cap = 0; cap <= 3; ++cap) {
    bits_kernels::set_cap(cap);
    double best = 1e300;
    for (int rep = 0; rep < 20; ++rep) {
      double const t0 = cpu_ns();
      bits_kernels::unpack(packed.data(), n, 7, 1, back.data());
      best = std::min(best, cpu_ns() - t0);
    }
    std::printf("bits:7 unpack, cap %u: %.3f ns a value\n", cap,
                best / static_cast<double>(n));
  }
  bits_kernels::set_cap(3);
}

int main(int argc, char** argv) {
  unpack_speeds();
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s FILE.safetensors [MIN_BYTES [MAX_BYTES]]\n"
                 "(the tensors measured: 64 KiB and more by default)\n",
                 argv[0]);
    return 2;
  }
  size_t const min_bytes = argc > 2 ? std::stoull(argv[2]) : 64u << 10;
  size_t const max_bytes = argc > 3 ? std::stoull(argv[3]) : SIZE_MAX;
  std::ifstream f(argv[1], std::ios::binary);
  bytes const file((std::istreambuf_iterator<char>(f)), {});
  parsed_file const parsed = parse_regions(file);
  auto chooser = make_store_chooser();
  std::map<std::string, tally> by_kind;
  bytes out(file.size());
  for (region const& r : parsed.regions) {
    if (r.type != dtype::bf16 || r.length < min_bytes || r.length > max_bytes) {
      continue;
    }
    byte_view const data(file.data() + r.offset, r.length);
    node const p = chooser->choose(r, data);
    std::string kind = program_text(p);
    for (size_t k; (k = kind.find('[')) != std::string::npos;) {
      kind.erase(k, kind.find(']', k) - k + 1);
    }
    bool const whole = p.op == opcode::view && !p.children.empty() &&
                       p.children[0].op == opcode::rans_static;
    if (whole) kind += mantissa_entropy(data) >= 6.95 ? " H>=6.95" : " H<6.95";
    tally& t = by_kind[kind];
    ++t.tensors;
    t.elements += r.length / 2;
    coded const a = encode_all(p, data);
    t.bytes += a.bytes_total;
    t.ns += decode_ns(a, data, out);
    node q = p;
    if (whole) {
      coded const s = encode_all(split_whole(data, false), data);
      t.split_bytes += s.bytes_total;
      t.split_ns += decode_ns(s, data, out);
      q = split_whole(data, true);
    } else if (!pack_mantissa(q)) {
      continue;
    }
    coded const b = encode_all(q, data);
    t.packed_bytes += b.bytes_total;
    t.packed_ns += decode_ns(b, data, out);
  }
  std::printf("%-70s %5s %10s %11s %7s %7s %7s %7s\n", "program", "n",
              "elements", "bytes", "ns/el", "packed%", "ns/el", "(split)");
  for (auto const& [kind, t] : by_kind) {
    double const e = static_cast<double>(t.elements);
    std::printf(
        "%-70s %5zu %10zu %11zu %7.3f %+7.2f %7.3f %7.3f %+6.2f%%\n",
        kind.c_str(), t.tensors, t.elements, t.bytes, t.ns / e,
        t.packed_bytes ? 100.0 * (double(t.packed_bytes) - t.bytes) / t.bytes
                       : 0.0,
        t.packed_ns / e, t.split_ns / e,
        t.split_bytes ? 100.0 * (double(t.split_bytes) - t.bytes) / t.bytes
                      : 0.0);
  }
}
