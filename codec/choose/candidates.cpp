// The candidate chooser: per region dtype, a handful of programs that capture
// the structure tensors commonly have (whole-word entropy of 16-bit floats,
// byte planes, upcast zero bits, few distinct values, constants). Each
// candidate is encoded on a sample of the region and the one with the
// smallest estimated total (program bytes + payload scaled to the region)
// wins. The synthesis search will replace this behind program_chooser.

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "codec/choose/chooser.h"
#include "codec/dsl/interpreter.h"
#include "codec/leaves/rans_static.h"

namespace brevis::codec {
namespace {

node leaf(opcode op, std::vector<uint64_t> params = {}) {
  return make_leaf(op, std::move(params));
}

// view<width, meaning>(inner, raw tail)
node view(unsigned width, meaning m, node inner) {
  return make_op(opcode::view, {width, static_cast<uint64_t>(m)},
                 {std::move(inner), leaf(opcode::raw)});
}

node planes_rans0(unsigned width) {
  std::vector<node> kids(width, leaf(opcode::rans0));
  return make_op(opcode::planes, {}, std::move(kids));
}

meaning meaning_of(dtype t) {
  switch (t) {
    case dtype::bf16:
      return meaning::bf16;
    case dtype::f16:
      return meaning::fp16;
    case dtype::f32:
      return meaning::fp32;
    case dtype::f64:
      return meaning::fp64;
    case dtype::f8_e4m3:
      return meaning::f8e4m3;
    case dtype::f8_e5m2:
      return meaning::f8e5m2;
    case dtype::i8:
    case dtype::i16:
    case dtype::i32:
    case dtype::i64:
      return meaning::sint;
    default:
      return meaning::uint;
  }
}

stream lane_stream(byte_view data, unsigned width, meaning m) {
  size_t const n = data.size() / width * width;
  return {bytes(data.begin(), data.begin() + n),
          value_type{static_cast<uint8_t>(width), m}};
}

// Counts distinct lane values, giving up (returning limit + 1) past `limit`.
template <typename T>
size_t distinct_up_to(byte_view data, size_t limit) {
  std::unordered_set<T> seen;
  size_t const n = data.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    seen.insert(load_le<T>(data.data() + i * sizeof(T)));
    if (seen.size() > limit) break;
  }
  return seen.size();
}

constexpr size_t min_static_table_region = 4u << 10;

bool all_bytes_equal(byte_view data) {
  return std::all_of(data.begin(), data.end(),
                     [&](uint8_t b) { return b == data.front(); });
}

// The 16-bit halves of 32-bit lanes: hi = bits 16..31.
stream high_halves(byte_view data) {
  size_t const n = data.size() / 4;
  stream s{bytes(n * 2), value_type{2, meaning::uint}};
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = load_le<uint32_t>(data.data() + 4 * i);
    store_le<uint16_t>(s.data.data() + 2 * i, static_cast<uint16_t>(v >> 16));
  }
  return s;
}

bool low_bits_zero(byte_view data, unsigned k) {
  uint32_t const mask = (1u << k) - 1;
  size_t const n = data.size() / 4;
  for (size_t i = 0; i < n; ++i) {
    if (load_le<uint32_t>(data.data() + 4 * i) & mask) return false;
  }
  return true;
}

std::vector<node> float16_candidates(byte_view data, meaning m) {
  std::vector<node> out;
  // The static table costs about a byte per distinct value; below this it
  // cannot pay for itself.
  if (data.size() >= min_static_table_region) {
    stream words = lane_stream(data, 2, meaning::uint);
    out.push_back(view(2, m, make_rans_static(words, 2)));
  }
  out.push_back(view(2, m, planes_rans0(2)));
  if (distinct_up_to<uint16_t>(data, 256) <= 256) {
    out.push_back(view(2, m,
                       make_op(opcode::palette, {1},
                               {leaf(opcode::raw), leaf(opcode::rans0)})));
  }
  return out;
}

std::vector<node> float32_candidates(byte_view data) {
  std::vector<node> out;
  meaning const m = meaning::fp32;
  // Sign, exponent and the top 7 mantissa bits: coded as whole 16-bit words
  // when the region is large enough to pay for a static table, else as bytes.
  node const high = data.size() >= 2 * min_static_table_region
                        ? make_rans_static(high_halves(data), 2)
                        : planes_rans0(2);
  if (low_bits_zero(data, 16)) {
    // fp32 upcast from bf16: only the high halves carry information.
    out.push_back(view(4, m, make_op(opcode::low_zero, {16}, {high})));
  } else if (low_bits_zero(data, 13)) {
    // fp32 upcast from fp16: 19 informative bits; the top 16 of them are the
    // high halves of the original lanes.
    out.push_back(view(
        4, m,
        make_op(opcode::low_zero, {13},
                {make_op(opcode::bitfields, {3, 16, 13},
                         {leaf(opcode::rans0), high, leaf(opcode::zero)})})));
  }
  out.push_back(view(
      4, m, make_op(opcode::bitfields, {16, 16}, {planes_rans0(2), high})));
  out.push_back(view(4, m, planes_rans0(4)));
  if (distinct_up_to<uint32_t>(data, 256) <= 256) {
    out.push_back(view(4, m,
                       make_op(opcode::palette, {1},
                               {leaf(opcode::raw), leaf(opcode::rans0)})));
  }
  return out;
}

std::vector<node> integer_candidates(byte_view data, unsigned width,
                                     meaning m) {
  std::vector<node> out;
  if (width == 1) {
    out.push_back(leaf(opcode::rans0));
    out.push_back(leaf(opcode::rans1));
    return out;
  }
  out.push_back(view(width, m, planes_rans0(width)));
  if (width == 2 && data.size() >= min_static_table_region) {
    out.push_back(
        view(2, m, make_rans_static(lane_stream(data, 2, meaning::uint), 2)));
  }
  // Index-like and smooth integers: differences are small.
  std::vector<node> kids(width, leaf(opcode::rans0));
  out.push_back(
      view(width, m,
           make_op(opcode::delta, {},
                   {make_op(opcode::map, {0, 0},
                            {make_op(opcode::planes, {}, std::move(kids))})})));
  return out;
}

std::vector<node> candidates_for(region const& r, byte_view data) {
  std::vector<node> out;
  if (r.kind == region_kind::tensor) {
    unsigned const width = dtype_width(r.type);
    meaning const m = meaning_of(r.type);
    switch (r.type) {
      case dtype::bf16:
      case dtype::f16:
        out = float16_candidates(data, m);
        break;
      case dtype::f32:
        out = float32_candidates(data);
        break;
      case dtype::f64:
        out.push_back(view(8, m, planes_rans0(8)));
        break;
      case dtype::none:
        break;
      default:
        if (width > 0) out = integer_candidates(data, width, m);
        break;
    }
    if (r.type == dtype::none || dtype_width(r.type) == 0) {
      // Untyped tensor bytes: guess the common element widths.
      out.push_back(leaf(opcode::rans0));
      out.push_back(view(2, meaning::uint, planes_rans0(2)));
      out.push_back(view(4, meaning::uint, planes_rans0(4)));
    }
  }
  out.push_back(leaf(opcode::zstd, {data.size() < (1u << 20) ? 9u : 3u}));
  return out;
}

// Evenly spaced slices of the region, 64 KiB + 1/32 of it in total, so that
// choosing costs a small fraction of encoding; small regions are used whole.
bytes sample_of(byte_view data, unsigned width) {
  size_t const want =
      std::min<size_t>(data.size(), (64u << 10) + data.size() / 32);
  if (want >= data.size() || want == 0) return bytes(data.begin(), data.end());
  size_t const slices = 8;
  size_t slice = want / slices;
  slice = std::max<size_t>(width,
                           slice / std::max(1u, width) * std::max(1u, width));
  bytes out;
  out.reserve(slice * slices);
  for (size_t i = 0; i < slices; ++i) {
    size_t start = (data.size() - slice) * i / (slices - 1);
    start = start / std::max(1u, width) * std::max(1u, width);
    out.insert(out.end(), data.begin() + start, data.begin() + start + slice);
  }
  return out;
}

class candidate_chooser final : public program_chooser {
 public:
  node choose(region const& r, byte_view data) const override {
    if (data.empty()) return leaf(opcode::raw);
    if (all_bytes_equal(data)) {
      return data.front() == 0 ? leaf(opcode::zero) : leaf(opcode::constant);
    }
    std::vector<node> cands = candidates_for(r, data);
    bytes const sample = sample_of(data, std::max(1u, dtype_width(r.type)));
    double const scale =
        static_cast<double>(data.size()) / static_cast<double>(sample.size());
    double best_cost = std::numeric_limits<double>::infinity();
    node best = fallback_program();
    for (node& c : cands) {
      bytes payload;
      try {
        encode_chunk(c, sample, payload);
      } catch (error const& e) {
        if (e.code() == errc::domain) continue;
        throw;
      }
      double const cost = static_cast<double>(serialize_program(c).size()) +
                          static_cast<double>(payload.size()) * scale;
      if (cost < best_cost) {
        best_cost = cost;
        best = std::move(c);
      }
    }
    return best;
  }
};

}  // namespace

std::unique_ptr<program_chooser> make_candidate_chooser() {
  return std::make_unique<candidate_chooser>();
}

}  // namespace brevis::codec
