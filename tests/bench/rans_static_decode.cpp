// ns a symbol of rans_static decoding and encoding on each vector path (and
// as tuned for each kind of CPU), and the cost of building decode tables, on
// streams cut from a real bf16/fp16 checkpoint: `brevis_rans_static_bench
// FILE.safetensors`. Built with the tests, never installed; for choosing
// kernels on a CPU, not a test (no assertions).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/entropy/rans_static.h"

namespace rs = brevis::codec::rans_static;
using brevis::codec::byte_view;
using brevis::codec::bytes;

namespace {

double now_ns() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct stream {
  std::string name;
  unsigned width;
  bytes data;
  rs::table table;
};

// A stream of `count` symbols derived from the 16-bit elements of `elems`.
template <typename F>
stream derive(std::string name, unsigned width, unsigned scale,
              std::vector<uint16_t> const& elems, size_t count, F f) {
  stream s{std::move(name), width, bytes(count * width), {}};
  for (size_t i = 0; i < count; ++i) {
    uint32_t const v = f(elems[i % elems.size()]);
    s.data[width * i] = static_cast<uint8_t>(v);
    if (width == 2) s.data[width * i + 1] = static_cast<uint8_t>(v >> 8);
  }
  std::vector<uint64_t> hist;
  rs::histogram(s.data, width, hist);
  s.table = rs::normalize(hist, scale);
  return s;
}

// A vector level, and at the tuned level the kind of CPU tuned for: this
// CPU's own ("cap4"), and as tuned for Intel, Zen 2/5 and Zen 4 (so that
// one machine compares its own kernels with another kind's choices).
struct setting {
  char const* label;
  unsigned cap;
  rs::tuning kind;
  void apply() const {
    rs::limit_simd(cap);
    rs::tune_for(kind);
  }
  static void reset() {
    rs::limit_simd(rs::simd_tuned);
    rs::tune_for(rs::tuning::detected);
  }
};
constexpr setting settings[] = {
    {"cap0", 0, rs::tuning::detected}, {"cap1", 1, rs::tuning::detected},
    {"cap2", 2, rs::tuning::detected}, {"cap3", 3, rs::tuning::detected},
    {"cap4", 4, rs::tuning::detected}, {"other", 4, rs::tuning::other},
    {"zen", 4, rs::tuning::zen},       {"zen4", 4, rs::tuning::zen4}};
static_assert(rs::simd_tuned == 4);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.safetensors [symbols]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
  size_t const count = argc > 2 ? std::stoul(argv[2]) : 524288;
  uint64_t header = 0;
  std::memcpy(&header, raw.data(), 8);
  size_t const body = 8 + header;
  std::vector<uint16_t> elems((raw.size() - body) / 2);
  std::memcpy(elems.data(), raw.data() + body, 2 * elems.size());
  // Skip the leading small tensors: the middle of the file is weights.
  std::rotate(elems.begin(), elems.begin() + elems.size() / 3, elems.end());

  std::vector<stream> streams;
  streams.push_back(derive("u16 whole s16", 2, 16, elems, count,
                           [](uint16_t v) { return v; }));
  streams.push_back(derive("u16 whole s15", 2, 15, elems, count,
                           [](uint16_t v) { return v; }));
  streams.push_back(derive("u8 high s10", 1, 10, elems, count,
                           [](uint16_t v) { return v >> 8; }));
  streams.push_back(derive("u16 exp s13", 2, 13, elems, count,
                           [](uint16_t v) { return (v >> 7) & 0xff; }));
  streams.push_back(derive("u8 high s15", 1, 15, elems, count,
                           [](uint16_t v) { return v >> 8; }));
  streams.push_back(derive("u8 low s12", 1, 12, elems, count,
                           [](uint16_t v) { return v & 0xff; }));
  streams.push_back(derive("u16 exp s16", 2, 16, elems, count,
                           [](uint16_t v) { return (v >> 7) & 0xff; }));

  int const reps = 7;
  for (stream& s : streams) {
    auto c = std::make_unique<rs::coder>(s.table, s.width);
    bytes payload;
    c->encode(s.data, payload);
    bytes out(s.data.size());
    std::printf(
        "%-16s k=%5zu bits/sym %.2f:", s.name.c_str(), s.table.symbols.size(),
        8.0 * static_cast<double>(payload.size()) / static_cast<double>(count));
    for (setting const& at : settings) {
      at.apply();
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        double const t0 = now_ns();
        c->decode(payload, count, out.data());
        best = std::min(best, now_ns() - t0);
      }
      if (out != s.data) std::printf(" MISMATCH");
      std::printf("  %s %.3f", at.label, best / static_cast<double>(count));
    }
    setting::reset();
    // Encoding on each path (the same payload on every one).
    std::printf("\n%-16s encode:", "");
    for (setting const& at : settings) {
      at.apply();
      double best = 1e30;
      bytes again;
      for (int r = 0; r < reps; ++r) {
        again.clear();
        double const t0 = now_ns();
        c->encode(s.data, again);
        best = std::min(best, now_ns() - t0);
      }
      if (again != payload) std::printf(" MISMATCH");
      std::printf("  %s %.3f", at.label, best / static_cast<double>(count));
    }
    setting::reset();
    // Table builds: the first decode of a fresh coder, minus a decode.
    double build = 1e30;
    long faults = 0;
    for (int r = 0; r < reps; ++r) {
      rs::coder fresh(s.table, s.width);
      long const f0 = minor_faults();
      double const t0 = now_ns();
      fresh.decode(payload, count, out.data());
      double const t1 = now_ns();
      fresh.decode(payload, count, out.data());
      double const t2 = now_ns();
      faults = std::max(faults, minor_faults() - f0);
      build = std::min(build, (t1 - t0) - (t2 - t1));
    }
    std::printf("  build %.1f us, faults %ld\n", build / 1e3, faults);
  }
  // The pair kernel on the pairs the corpus has: u8 s10 beside u16 s13.
  {
    stream const& a = streams[2];
    stream const& b = streams[3];
    rs::coder ca(a.table, 1), cb(b.table, 2);
    bytes pa, pb;
    ca.encode(a.data, pa);
    cb.encode(b.data, pb);
    bytes oa(a.data.size()), ob(b.data.size());
    std::printf("pair u8 s10 + u16 exp s13:");
    for (setting const& at : settings) {
      at.apply();
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        double const t0 = now_ns();
        rs::coder::decode_pair({&ca, pa, count, oa.data()},
                               {&cb, pb, count, ob.data()});
        best = std::min(best, now_ns() - t0);
      }
      if (oa != a.data || ob != b.data) std::printf(" MISMATCH");
      std::printf("  %s %.3f", at.label, best / static_cast<double>(2 * count));
    }
    std::printf("\n");
    setting::reset();
  }
  return 0;
}
