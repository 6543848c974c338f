// The closed-form choice of bf16/fp16 programs (codec/search/closed_form.h):
// its leaf costs against the real encoders, its program's estimate against
// the archive, and its gate, which must send every region with planted
// structure to the search.

#include "codec/search/closed_form.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "codec/container/archive.h"
#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/leaves/rans_static.h"
#include "codec/search/astar.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/generators.h"
#include "tests/codec/parse_fixtures.h"
#include "tests/codec/search/searched_archive.h"
#include "tests/codec/uses_op.h"

namespace brevis::codec::search {
namespace {

using test::make_safetensors;
using testing::searched_archive;
using testing::uses_op;

std::vector<uint16_t> gaussian_bf16(size_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) {
    float const f = g(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    x = static_cast<uint16_t>(u >> 16);
  }
  return out;
}

bytes pack(std::vector<uint16_t> const& v) {
  bytes out(v.size() * 2);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<uint64_t> counts_of(bytes const& lanes, unsigned width) {
  std::vector<uint64_t> c(size_t{1} << (8 * width), 0);
  for (size_t i = 0; i + width <= lanes.size(); i += width) {
    ++c[width == 2 ? load_le<uint16_t>(lanes.data() + i) : lanes[i]];
  }
  return c;
}

size_t encoded_size(node const& leaf, bytes const& data, unsigned width) {
  stream in{data, value_type{static_cast<uint8_t>(width), meaning::uint}};
  bytes out;
  leaf_for(leaf.op).encode(leaf, in, out);
  return out.size();
}

// The leaf costs are what the leaves code to: rANS order 0 within 2% (its
// tables are estimated at 1.25 bytes a symbol), a static table of the
// value's own within 1% (the table's blob included), raw exactly.
TEST(closed_form, leaf_costs_match_the_encoders) {
  for (unsigned width : {1u, 2u}) {
    bytes data = pack(gaussian_bf16(200000, 0.05f, 1));
    if (width == 1) {  // the exponent bytes of the same weights
      for (size_t i = 0; i < data.size() / 2; ++i) data[i] = data[2 * i + 1];
      data.resize(data.size() / 2);
    }
    std::vector<uint64_t> const c = counts_of(data, width);
    double const raw = leaf_bytes_from_counts(opcode::raw, c, width, 1);
    EXPECT_EQ(raw, static_cast<double>(data.size()));

    double const r0 = leaf_bytes_from_counts(opcode::rans0, c, width, 1);
    double const r0_real = static_cast<double>(
        encoded_size(make_leaf(opcode::rans0), data, width));
    EXPECT_NEAR(r0, r0_real, 0.02 * r0_real) << "width " << width;

    double const st = leaf_bytes_from_counts(opcode::rans_static, c, width, 1);
    node leaf = make_leaf(opcode::rans_static);
    leaf.blob = serialize_rans_static_table(choose_rans_static_table(c));
    double const st_real =
        static_cast<double>(encoded_size(leaf, data, width) + leaf.blob.size());
    EXPECT_NEAR(st, st_real, 0.01 * st_real) << "width " << width;
  }
  // One value: zero or constant, in no bytes or one lane a chunk.
  std::vector<uint64_t> one(65536, 0);
  one[0] = 1000;
  EXPECT_EQ(leaf_bytes_from_counts(opcode::zero, one, 2, 3), 0);
  EXPECT_EQ(leaf_bytes_from_counts(opcode::constant, one, 2, 3), 6);
  one[0] = 0, one[7] = 1000;
  EXPECT_TRUE(std::isinf(leaf_bytes_from_counts(opcode::zero, one, 2, 3)));
}

struct planted {
  std::string dtype = "BF16";
  std::vector<uint64_t> shape;
  std::vector<uint16_t> values;
};

// A planted tensor as the closed form sees it: its region, bytes and
// histogram, kept alive for the region_input that refers to them.
struct planted_input {
  bytes data;
  region r;
  sparse_hist h;
  explicit planted_input(planted const& p)
      : data(pack(p.values)), h(sparse_histogram(data)) {
    r.kind = region_kind::tensor;
    r.type = p.dtype == "BF16" ? dtype::bf16 : dtype::f16;
    r.shape = p.shape;
    r.length = data.size();
  }
  region_input in() const { return {r, data, nullptr, &h}; }
};

gate_reason gate_of(planted const& p) {
  return closed_form_gate(planted_input(p).in());
}

// Every structure an order-0 program misses sends the region to the search.
TEST(closed_form, gate_sends_planted_structure_to_the_search) {
  size_t const rows = 128, cols = 512, n = rows * cols;
  std::vector<uint16_t> const w = gaussian_bf16(n, 0.05f, 2);
  EXPECT_EQ(gate_of({"BF16", {rows, cols}, w}), gate_reason::none);
  EXPECT_EQ(gate_of({"F16", {n}, w}), gate_reason::none);

  planted rows_above{"BF16", {rows, cols}, w};  // rows repeat the row above
  for (size_t i = cols; i < n; ++i) {
    if (i % 50 != 0) rows_above.values[i] = rows_above.values[i - cols];
  }
  EXPECT_EQ(gate_of(rows_above), gate_reason::rows);

  planted period{"BF16", {n}, w};  // repeats a slice of itself
  for (size_t i = 3000; i < n; ++i) period.values[i] = period.values[i - 3000];
  EXPECT_EQ(gate_of(period), gate_reason::no_singleton);

  planted runs{"BF16", {n}, w};  // runs of equal neighbours
  for (size_t i = 1; i < n; ++i) {
    if (i % 8 != 0) runs.values[i] = runs.values[i - 1];
  }
  gate_reason const g = gate_of(runs);
  EXPECT_TRUE(g == gate_reason::runs || g == gate_reason::no_singleton);

  planted zeros{"BF16", {n}, w};  // pruned: a fifth of the weights zero
  for (size_t i = 0; i < n; i += 5) zeros.values[i] = 0;
  EXPECT_EQ(gate_of(zeros), gate_reason::zeros);

  planted palette{"BF16", {n}, w};  // dequantized 8-bit weights
  for (uint16_t& x : palette.values) x &= 0xff80;
  EXPECT_EQ(gate_of(palette), gate_reason::few_values);

  planted low{"BF16", {n}, w};  // the low bit always zero
  for (uint16_t& x : low.values) x &= 0xfffe;
  EXPECT_EQ(gate_of(low), gate_reason::low_zero);

  planted words{"BF16", {n}, w};  // 8-byte words repeated at a distance
  for (size_t i = 0; i < n; ++i) {
    if ((i / 4) % 3 == 2) words.values[i] = words.values[i - 8];
  }
  EXPECT_EQ(gate_of(words), gate_reason::words);
}

// Regions the gate sends to the search get the operator that captures
// their structure, end to end: a 1-D bf16 tensor repeating a period longer
// than the gate's windows, and zero-gated tensors whose nonzero values
// have order beyond their zeros: fp16 runs of 8 equal values (a third of
// the runs zero), and bf16 rows repeating the row above (a third zero).
TEST(closed_form, gated_regions_get_their_operator) {
  size_t const period = 20000, n = 8 * period;
  std::vector<uint16_t> const slice = gaussian_bf16(period, 0.05f, 5);
  std::vector<uint16_t> repeated;
  while (repeated.size() < n) {
    repeated.insert(repeated.end(), slice.begin(), slice.end());
  }
  std::vector<uint16_t> runs = gaussian_bf16(n, 0.02f, 6);
  for (size_t i = 0; i < n; ++i) {
    runs[i] = (i / 8) % 3 == 0 ? 0 : runs[i / 8 * 8];
  }
  size_t const cols = 400, rows = n / cols;
  std::vector<uint16_t> above = gaussian_bf16(n, 0.05f, 11);
  std::mt19937 rng(12);
  for (size_t i = 0; i < n; ++i) {
    if (i < cols) {
      if (rng() % 3 == 0) above[i] = 0;
    } else if (rng() % 50 != 0) {
      above[i] = above[i - cols];
    }
  }
  bytes const file =
      make_safetensors({{"p", "BF16", {n}, pack(repeated)},
                        {"r", "F16", {n}, pack(runs)},
                        {"x", "BF16", {rows, cols}, pack(above)}});
  searched_archive const a(file);
  ASSERT_TRUE(a.reads_back);
  archive_reader const& rd = a.reader;
  size_t seen = 0;
  for (region_entry const& e : rd.regions()) {
    if (e.info.kind != region_kind::tensor) continue;
    ++seen;
    node const& p = rd.programs()[e.program];
    ASSERT_TRUE(e.how.has_value());
    EXPECT_GT(e.how->expansions, 0u) << e.info.name;  // searched
    if (e.info.name == "p") {
      EXPECT_TRUE(uses_op(p, opcode::repeat)) << program_text(p);
    } else if (e.info.name == "r") {
      EXPECT_TRUE(uses_op(p, opcode::runs)) << program_text(p);
    } else {
      EXPECT_TRUE(uses_op(p, opcode::xor_row)) << program_text(p);
    }
  }
  EXPECT_EQ(seen, 3u);
}

// Few values or many zeros with no order to exploit leave the search
// nothing to win over the closed form's candidates: the closed form decides
// them (no expansion). Zeros whose mask codes well (sparse saves much
// against the elements' entropy) get sparse, in closed form too.
TEST(closed_form, alphabet_alone_settles_without_a_search) {
  size_t const n = 1u << 16;
  std::vector<uint16_t> const w = gaussian_bf16(n, 0.05f, 7);
  planted few{"BF16", {n}, w};  // few values, in no order (low bit set)
  std::mt19937 pick(9);
  for (uint16_t& x : few.values) {
    x = static_cast<uint16_t>(0x3c01 + 2 * (pick() % 200));
  }
  planted zeros{"BF16", {n}, w};  // a fifth zero, at random
  std::mt19937 rng(8);
  for (uint16_t& x : zeros.values) {
    if (rng() % 5 == 0) x = 0;
  }
  planted pruned{"BF16", {n}, w};  // every third zero: a mask of 3 bytes
  for (size_t i = 0; i < n; i += 3) pruned.values[i] = 0;
  for (planted const* p : {&few, &zeros, &pruned}) {
    planted_input const t(*p);
    region_input const in = t.in();
    sparse_hist const& h = t.h;
    EXPECT_NE(closed_form_gate(in), gate_reason::none);
    EXPECT_EQ(closed_form_order_gate(in), gate_reason::none);
    float16_marginals const mg = float16_marginals_of(h, meaning::bf16);
    order0_floor const f = order0_floor_bytes(in, mg);
    EXPECT_LE(f.sparse, f.elements + 1e-6);
    if (p == &pruned) {
      EXPECT_LT(f.sparse, 0.95 * f.elements);
    } else {
      EXPECT_GT(f.sparse, 0.997 * f.elements);
    }
  }
  bytes const file =
      make_safetensors({{"few", "BF16", {n}, pack(few.values)},
                        {"zeros", "BF16", {n}, pack(zeros.values)},
                        {"pruned", "BF16", {n}, pack(pruned.values)}});
  searched_archive const a(file);
  ASSERT_TRUE(a.reads_back);
  archive_reader const& rd = a.reader;
  size_t seen = 0;
  for (region_entry const& e : rd.regions()) {
    if (e.info.kind != region_kind::tensor) continue;
    ++seen;
    node const& p = rd.programs()[e.program];
    ASSERT_TRUE(e.how.has_value());
    EXPECT_EQ(e.how->expansions, 0u) << e.info.name << " " << program_text(p);
    EXPECT_FALSE(uses_op(p, opcode::palette)) << program_text(p);
    // (A fifth zero at random: sparse's mask costs about what the zeros
    // cost among the elements, and either may win.)
    if (e.info.name == "pruned") {
      EXPECT_TRUE(uses_op(p, opcode::sparse)) << program_text(p);
    } else if (e.info.name == "few") {
      EXPECT_FALSE(uses_op(p, opcode::sparse)) << program_text(p);
    }
  }
  EXPECT_EQ(seen, 3u);
}

// Few values equal their neighbours by chance as often as an order-0 coder
// expects: only runs beyond that rate are order for the search.
TEST(closed_form, few_values_runs_by_chance_are_not_order) {
  size_t const n = 1u << 16;
  std::mt19937 rng(10);
  // One value 30% of the time: equal neighbours 9% of the time by chance
  // (above the runs gate's 5%), 8-byte words of it 0.8% (under words' 2%).
  std::vector<uint16_t> peaked(n);
  for (uint16_t& x : peaked) {
    x = rng() % 10 < 3 ? 0x3c01
                       : static_cast<uint16_t>(0x3c03 + 2 * (rng() % 100));
  }
  auto order_of = [](std::vector<uint16_t> const& v) {
    planted_input const t(planted{"BF16", {v.size()}, v});
    region_input const in = t.in();
    EXPECT_EQ(closed_form_gate(in), gate_reason::few_values);
    return closed_form_order_gate(in);
  };
  EXPECT_EQ(order_of(peaked), gate_reason::none);
  std::vector<uint16_t> runs = peaked;  // a third of them repeat the last
  for (size_t i = 1; i < n; ++i) {
    if (i % 3 == 0) runs[i] = runs[i - 1];
  }
  EXPECT_EQ(order_of(runs), gate_reason::runs);
}

// `file` archived by the search chooser with the closed form (sizes[1]) and
// without it (sizes[0]), each read back byte-exact and every tensor region
// with its choice record; `each_tensor(archive, region index, entry)` sees
// the closed form's tensors.
void archive_both_ways(
    bytes const& file, std::array<size_t, 2>& sizes,
    std::function<void(searched_archive const&, size_t,
                       region_entry const&)> const& each_tensor) {
  for (bool closed : {true, false}) {
    search_chooser_options o;
    o.closed_form = closed;
    searched_archive const a(file, o);
    ASSERT_TRUE(a.reads_back) << (closed ? "closed form" : "search alone");
    sizes[closed ? 1 : 0] = a.archive.size();
    for (size_t i = 0; i < a.reader.regions().size(); ++i) {
      region_entry const& e = a.reader.regions()[i];
      if (e.info.kind != region_kind::tensor) continue;
      ASSERT_TRUE(e.how.has_value()) << e.info.name;
      if (closed) each_tensor(a, i, e);
    }
  }
}

// Pruned weights, 70% to 95% of them zero at random and the rest Gaussian,
// have no order beyond their zeros: the closed form decides them (no
// expansion) with sparse, its estimate within 2% of what each codes to
// (10% for the small ones, of order-0 leaves whose tables the estimates
// share with the search's), and the archive no larger than the search's.
TEST(closed_form, pruned_weights_get_sparse_in_closed_form) {
  std::vector<test::st_tensor> tensors;
  std::mt19937 rng(13);
  for (unsigned percent : {70u, 85u, 95u}) {
    for (size_t n : {size_t{3000}, size_t{128000}}) {
      std::vector<uint16_t> v = gaussian_bf16(n, 0.05f, percent + n);
      for (uint16_t& x : v) {
        if (rng() % 100 < percent) x = 0;
      }
      std::string name = std::to_string(percent);
      name += "_";
      name += std::to_string(n);
      tensors.push_back({name, "BF16", {n / 100, 100}, pack(v)});
    }
  }
  bytes const file = make_safetensors(tensors);
  std::array<size_t, 2> sizes{};
  size_t seen = 0;
  archive_both_ways(
      file, sizes,
      [&](searched_archive const& a, size_t i, region_entry const& e) {
        ++seen;
        node const& p = a.reader.programs()[e.program];
        EXPECT_EQ(e.how->expansions, 0u) << e.info.name;
        EXPECT_TRUE(uses_op(p, opcode::sparse))
            << e.info.name << " " << program_text(p);
        double const actual = static_cast<double>(a.region_bytes(i));
        double const tolerance = e.info.length < (64u << 10) ? 0.1 : 0.02;
        EXPECT_NEAR(e.how->estimated_bytes, actual, tolerance * actual)
            << e.info.name << " " << program_text(p);
      });
  EXPECT_EQ(seen, tensors.size());
  EXPECT_LE(sizes[1], sizes[0] + sizes[0] / 500);
}

// Sparse's mask starts on a byte of its own in every chunk; with chunks
// that are not a multiple of 16 bytes, its bytes at a chunk's end are not
// those of 1 MiB chunks. The closed form's mask table must be counted in
// the archive's chunks, or a chunk codes a mask byte its table lacks and
// falls back to program 0 (lossless, but larger).
TEST(closed_form, sparse_mask_table_fits_any_chunk_size) {
  size_t const n = 256 * 1024;
  // 2:4 structured sparsity: two of every four weights are zero.
  std::vector<uint16_t> v = gaussian_bf16(n, 0.05f, 21);
  std::mt19937 rng(22);
  for (size_t i = 0; i < n; i += 4) {
    unsigned const keep = rng() % 6;  // one of the six pairs of four
    static constexpr uint8_t pairs[6] = {0x3, 0x5, 0x9, 0x6, 0xA, 0xC};
    for (unsigned j = 0; j < 4; ++j) {
      if ((pairs[keep] >> j & 1) == 0) v[i + j] = 0;
    }
  }
  bytes const file = make_safetensors({{"w", "BF16", {n / 256, 256}, pack(v)}});
  for (uint32_t chunk : {5000u, 4098u, default_chunk_size}) {
    search_chooser_options o;
    o.search.chunk_size = chunk;
    searched_archive const a(file, o);
    ASSERT_TRUE(a.reads_back) << chunk;
    archive_reader const& rd = a.reader;
    size_t const r = 1;  // the header, then the tensor
    ASSERT_EQ(rd.regions()[r].info.name, "w");
    node const& p = rd.programs()[rd.regions()[r].program];
    EXPECT_TRUE(uses_op(p, opcode::sparse)) << chunk << " " << program_text(p);
    size_t coded = 0;
    for (chunk_entry const& c : rd.chunks()) {
      if (c.region != r) continue;
      EXPECT_NE(c.program, 0u) << "chunk size " << chunk << " at " << c.offset;
      ++coded;
    }
    EXPECT_EQ(coded, (n * 2 + chunk - 1) / chunk);
  }
}

// On weights with no structure beyond order 0 the closed form decides, its
// estimate is within 2% of what the region codes to, and its program is no
// larger than the search's.
TEST(closed_form, estimate_matches_the_archive_and_the_search) {
  size_t const n = 300000;
  bytes const file =
      make_safetensors({{"a", "BF16", {n}, pack(gaussian_bf16(n, 0.05f, 3))},
                        {"b", "F16", {n}, pack(gaussian_bf16(n, 0.02f, 4))}});
  std::array<size_t, 2> sizes{};
  archive_both_ways(
      file, sizes,
      [&](searched_archive const& a, size_t i, region_entry const& e) {
        auto const actual = static_cast<double>(a.region_bytes(i));
        EXPECT_EQ(e.how->expansions, 0u) << e.info.name;
        EXPECT_NEAR(e.how->estimated_bytes, actual, 0.02 * actual)
            << e.info.name;
      });
  EXPECT_LE(sizes[1], sizes[0] + sizes[0] / 1000);
}

// The split whose children's entropies bound it above the best so far is
// skipped; the one that wins must not be. Byte planes that cost a bit an
// element less than bitfields (the exponent's low bit is the mantissa's
// parity, and the high byte independent of both), in a region large enough
// for static tables: planes win, though costed after bitfields.
TEST(closed_form, entropy_bound_keeps_the_winning_split) {
  std::mt19937 rng(17);
  std::vector<uint16_t> v(8192);
  for (uint16_t& x : v) {
    uint32_t const m = rng() % 128;
    uint32_t const lsb = static_cast<uint32_t>(std::popcount(m)) & 1;
    uint32_t const hi = 0x3c + rng() % 2;
    x = static_cast<uint16_t>(hi << 8 | lsb << 7 | m);
  }
  planted_input const t(planted{"BF16", {v.size()}, v});
  auto const choice = closed_form_program(t.in(), true);
  ASSERT_TRUE(choice);
  ASSERT_EQ(choice->program.op, opcode::view);
  EXPECT_EQ(choice->program.children[0].op, opcode::planes)
      << program_text(choice->program);
  // And where bitfields win (Gaussian weights), it still finds them.
  std::vector<uint16_t> const g = gaussian_bf16(1 << 16, 0.05f, 3);
  planted_input const tw(planted{"BF16", {g.size()}, g});
  auto const wc = closed_form_program(tw.in(), true);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->program.children[0].op, opcode::bitfields)
      << program_text(wc->program);
}

// Splits within split_stream_margin of the smallest estimate: the fewest
// entropy-coded streams win (each a rANS step per element to decode), then
// the fewest bytes, then the search's order; outside the margin, bytes.
TEST(closed_form, split_of_fewer_streams_wins_within_the_margin) {
  using c = split_candidate;
  double const m = split_stream_margin;
  auto pick = [](std::vector<c> const& v) { return pick_split(v); };
  // Fields (two rans0 streams) against bitfields (one static table).
  EXPECT_EQ(pick({{1000, 2, 1}, {1000 * (1 + m), 1, 2}}), 1u);
  EXPECT_EQ(pick({{1000, 2, 1}, {1000 * (1 + 2 * m), 1, 2}}), 0u);
  // As many streams: the fewest bytes, then the search's order.
  EXPECT_EQ(pick({{1000, 1, 0}, {1000.5, 1, 2}}), 0u);
  EXPECT_EQ(pick({{1000, 1, 2}, {1000, 1, 0}}), 1u);
  // The margin is from the smallest of all, whatever the order.
  EXPECT_EQ(pick({{1000 * (1 + 2 * m), 1, 2}, {1003, 2, 1}, {1000, 3, 0}}), 1u);
  EXPECT_EQ(pick({}), 0u);
  EXPECT_EQ(pick({{1000, 3, 0}}), 0u);
}

// The program with every rans0 and rans_static leaf written "rans", and
// no blobs: what a swap of leaves leaves alone.
std::string layout_of(node const& n) {
  bool const rans = n.op == opcode::rans0 || n.op == opcode::rans_static;
  std::string s = rans ? "rans" : std::to_string(static_cast<int>(n.op));
  if (!rans) {
    for (uint64_t p : n.params) s.append(":").append(std::to_string(p));
  }
  s.push_back('(');
  for (node const& c : n.children) s.append(layout_of(c)).push_back(',');
  s.push_back(')');
  return s;
}

size_t count_op(node const& n, opcode op) {
  size_t k = n.op == op;
  for (node const& c : n.children) k += count_op(c, op);
  return k;
}

// The store's leaning to vector-decoded leaves (region_input's
// wide_static_*): a rans0 leaf of a stream of at least wide_static_from
// symbols gives way to rans_static where that costs at most the margin
// more, and a split may change with it, but never to one of more rans0
// leaves; shorter streams and a margin of 0 keep rans0.
TEST(closed_form, store_takes_wide_static_over_rans0_within_its_margin) {
  auto const choose = [](std::string const& dtype, size_t n, float sigma,
                         uint64_t from, double margin) {
    planted p;
    p.dtype = dtype;
    p.shape = {n};
    p.values = gaussian_bf16(n, sigma, 7);
    if (dtype == "F16") {
      std::mt19937 rng(7);
      std::normal_distribution<float> g(0.0f, sigma);
      for (uint16_t& v : p.values) v = testing::to_fp16(g(rng));
    }
    planted_input const t(p);
    region_input in = t.in();
    in.wide_static_from = from;
    in.wide_static_margin = margin;
    auto choice = closed_form_program(in, false);
    if (!choice) {
      ADD_FAILURE() << "no closed form for " << dtype << " " << n;
      return closed_form_choice{};
    }
    // Whatever it chose decodes to the tensor.
    bytes payload;
    encode_chunk(choice->program, t.data, payload);
    bytes back(t.data.size());
    decode_chunk(choice->program, payload, back.size(), back.data());
    EXPECT_EQ(back, t.data);
    return std::move(*choice);
  };
  // A bf16 tensor's high bytes (sign and exponent) by rans0 as the smaller.
  closed_form_choice const plain = choose("BF16", 13200, 0.05f, 0, 0);
  ASSERT_TRUE(uses_op(plain.program, opcode::rans0))
      << program_text(plain.program);
  closed_form_choice const wide = choose("BF16", 13200, 0.05f, 4096, 0.03);
  EXPECT_FALSE(uses_op(wide.program, opcode::rans0))
      << program_text(wide.program);
  EXPECT_EQ(layout_of(wide.program), layout_of(plain.program));  // a swap
  EXPECT_GT(wide.estimated_bytes, plain.estimated_bytes);
  EXPECT_LE(wide.estimated_bytes, plain.estimated_bytes * 1.03);
  // No margin: the smaller, as without the preference.
  EXPECT_EQ(program_text(choose("BF16", 13200, 0.05f, 4096, 0).program),
            program_text(plain.program));
  // A stream below wide_static_from keeps rans0.
  closed_form_choice const small = choose("BF16", 3000, 0.05f, 0, 0);
  ASSERT_TRUE(uses_op(small.program, opcode::rans0));
  EXPECT_EQ(program_text(choose("BF16", 3000, 0.05f, 4096, 0.03).program),
            program_text(small.program));
  // Across sizes and spreads: rans0 leaves only go (small fp16 tensors
  // took a split of three rans0 leaves for one of one when splits were
  // weighed with the preference alone), for at most the margin more, and
  // some layouts change.
  size_t fewer = 0;
  size_t changed = 0;
  for (std::string const dtype : {"BF16", "F16"}) {
    for (size_t n : {4096, 6000, 13200, 30000}) {
      for (float sigma : {0.02f, 0.05f, 0.3f}) {
        closed_form_choice const a = choose(dtype, n, sigma, 0, 0);
        closed_form_choice const b = choose(dtype, n, sigma, 4096, 0.03);
        size_t const ra = count_op(a.program, opcode::rans0);
        size_t const rb = count_op(b.program, opcode::rans0);
        EXPECT_LE(rb, ra) << dtype << " " << n << " " << sigma;
        EXPECT_LE(b.estimated_bytes, a.estimated_bytes * 1.035)
            << dtype << " " << n << " " << sigma;
        // What is under the view (a split, sparse or a leaf) is weighed
        // without the preference; which split it is may change.
        auto const kind = [](closed_form_choice const& c) {
          if (c.program.children.empty()) return opcode::raw;
          opcode const op = c.program.children[0].op;
          return op == opcode::fields || op == opcode::bitfields
                     ? opcode::planes
                     : op;
        };
        EXPECT_EQ(kind(b), kind(a)) << dtype << " " << n << " " << sigma;
        fewer += rb < ra;
        changed += layout_of(b.program) != layout_of(a.program);
      }
    }
  }
  EXPECT_GT(fewer, 0u);
  EXPECT_GT(changed, 0u);
}

// The store's chooser takes it (store_wide_static_margin); the same
// options without the margin keep rans0; a per-file chooser refuses it.
TEST(closed_form, store_chooser_takes_wide_static) {
  size_t const n = 13200;
  bytes const data = pack(gaussian_bf16(n, 0.05f, 7));
  region const r{0, data.size(), region_kind::tensor, dtype::bf16, {n}, "w"};
  node const p = make_store_chooser()->choose(r, data);
  EXPECT_FALSE(uses_op(p, opcode::rans0)) << program_text(p);
  EXPECT_TRUE(uses_op(p, opcode::rans_static)) << program_text(p);
  search_chooser_options o = store_chooser_options();
  o.wide_static_margin = 0;
  EXPECT_TRUE(uses_op(make_search_chooser(o)->choose(r, data), opcode::rans0));
  search_chooser_options per_file;
  per_file.wide_static_margin = store_wide_static_margin;
  EXPECT_THROW(make_search_chooser(per_file), std::invalid_argument);
}

// bf16 words drawn from a codebook of `words` distinct values, the i-th
// about 1/(i + 1) as often: a tensor its own table of whole words codes.
// Drawn from mt19937's raw output (the same on every standard library).
std::vector<uint16_t> codebook_bf16(size_t n, size_t words, uint32_t seed) {
  std::vector<uint64_t> upto(words);  // cumulative weights, 2^20 / (i + 1)
  uint64_t total = 0;
  for (size_t i = 0; i < words; ++i) upto[i] = total += (1u << 20) / (i + 1);
  std::mt19937 rng(seed);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) {
    uint64_t const r = ((uint64_t{rng()} << 32) | rng()) % total;
    size_t const i = static_cast<size_t>(
        std::upper_bound(upto.begin(), upto.end(), r) - upto.begin());
    x = static_cast<uint16_t>(0x3c00 + 7 * i);  // spread over the exponents
  }
  return out;
}

// The table of `h` at precision 2^scale and its bytes coding `data` (whole
// 16-bit words), the table's blob included.
size_t coded_at(sparse_hist const& h, bytes const& data, unsigned scale) {
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
  for (auto const& [s, c] : h) symbols.push_back(s), counts.push_back(c);
  node leaf = make_leaf(opcode::rans_static);
  leaf.blob = serialize_rans_static_table(
      quantized_rans_static_table(symbols, counts, scale));
  return encoded_size(leaf, data, 2) + leaf.blob.size();
}

// The store's leaning to smaller decode tables: the smallest precision
// below the standard whose table codes within the margin of the
// standard's, down to 2^14; none with no margin, and none where the
// alphabet leaves no room below 2^16.
TEST(closed_form, smaller_table_scale_within_its_margin) {
  for (size_t words : {300, 3000, 12000}) {
    bytes const data = pack(codebook_bf16(1 << 18, words, 5));
    sparse_hist const h = sparse_histogram(data);
    ASSERT_EQ(rans_static_scale_for(h.size(), (1 << 18)), 16u);
    EXPECT_EQ(smaller_table_scale(h, 0), 0u);
    double extra = -1;
    unsigned const s = smaller_table_scale(h, 0.005, &extra);
    ASSERT_GE(s, smallest_table_scale) << words;
    ASSERT_LT(s, 16u) << words;
    EXPECT_LE(extra, 0.005 * static_cast<double>(coded_at(h, data, 16)));
    // What the tables code to: within the margin, and a little for the
    // estimates (within 1% of a table's bytes, above).
    size_t const standard = coded_at(h, data, 16);
    size_t const smaller = coded_at(h, data, s);
    EXPECT_LE(static_cast<double>(smaller),
              static_cast<double>(standard) * (1 + 0.005 + 0.002))
        << words << " words at 2^" << s;
    if (s > smallest_table_scale) {
      // The next step down is past the margin.
      EXPECT_GT(static_cast<double>(coded_at(h, data, s - 1)),
                static_cast<double>(standard) * (1 + 0.005 - 0.002))
          << words << " words at 2^" << s - 1;
    }
    // Any margin: down to 2^14, or as far as two slots a word allow.
    unsigned floor = smallest_table_scale;
    while ((size_t{1} << floor) < 2 * h.size()) ++floor;
    EXPECT_EQ(smaller_table_scale(h, 0.5), floor) << words;
  }
  // Up to fast_table_symbols distinct words: choose_rans_static's table
  // (2^12 where that costs little), which the store's chooser keeps.
  {
    bytes const data = pack(codebook_bf16(1 << 18, 200, 5));
    sparse_hist const h = sparse_histogram(data);
    ASSERT_LE(h.size(), fast_table_symbols);
    EXPECT_EQ(smaller_table_scale(h, 0.5), 0u);
    node searched =
        make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
                {make_leaf(opcode::rans_static), make_leaf(opcode::raw)});
    EXPECT_EQ(fit_tables_from_histogram(searched, h, meaning::bf16, data,
                                        1u << 20, store_small_table_margin),
              0.0);
    EXPECT_EQ(searched.children[0].blob, own_table_blob(h, 0));
    EXPECT_EQ(parse_rans_static_table(searched.children[0].blob, 2).scale,
              fast_table_scale);
  }
  // 20,000 distinct words need more than 2^15 slots at two a word.
  std::vector<uint16_t> spread(1 << 18);
  for (size_t i = 0; i < spread.size(); ++i) {
    spread[i] = static_cast<uint16_t>(0x3000 + i % 20000);
  }
  EXPECT_EQ(smaller_table_scale(sparse_histogram(pack(spread)), 0.5), 0u);
}

// The store's chooser codes a tensor of whole words by a table of fewer
// slots (store_small_table_margin), whether the closed form or the search
// chose its program, and it decodes; without the margin, 2^16 slots; a
// per-file chooser refuses the margin.
TEST(closed_form, store_chooser_takes_smaller_tables) {
  size_t const n = 1 << 18;
  bytes const data = pack(codebook_bf16(n, 3000, 9));
  region const r{0, data.size(), region_kind::tensor, dtype::bf16, {n}, "w"};
  auto const whole_word_scale = [&](node const& p) -> unsigned {
    if (p.op != opcode::view || p.children.empty() ||
        p.children[0].op != opcode::rans_static) {
      ADD_FAILURE() << "not a table of whole words: " << program_text(p);
      return 0;
    }
    return parse_rans_static_table(p.children[0].blob, 2).scale;
  };
  node const p = make_store_chooser()->choose(r, data);
  EXPECT_LT(whole_word_scale(p), 16u);
  bytes payload;
  encode_chunk(p, data, payload);
  bytes back(data.size());
  decode_chunk(p, payload, back.size(), back.data());
  EXPECT_EQ(back, data);
  search_chooser_options o = store_chooser_options();
  o.small_table_margin = 0;
  EXPECT_EQ(whole_word_scale(make_search_chooser(o)->choose(r, data)), 16u);
  // The closed form's choice, and the search's tables
  // (fit_tables_from_histogram), each on its own.
  sparse_hist const own = sparse_histogram(data);
  region_input in{.info = r, .data = data, .root_hist = &own};
  auto const standard = closed_form_program(in, true);  // past the gate
  ASSERT_TRUE(standard.has_value());
  EXPECT_EQ(whole_word_scale(standard->program), 16u);
  in.small_table_margin = store_small_table_margin;
  auto const smaller = closed_form_program(in, true);
  ASSERT_TRUE(smaller.has_value());
  EXPECT_EQ(whole_word_scale(smaller->program),
            smaller_table_scale(own, store_small_table_margin));
  EXPECT_LE(smaller->estimated_bytes,
            standard->estimated_bytes * (1 + store_small_table_margin));
  node searched =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_leaf(opcode::rans_static), make_leaf(opcode::raw)});
  sparse_hist const h = sparse_histogram(data);
  double const extra = fit_tables_from_histogram(
      searched, h, meaning::bf16, data, 1u << 20, store_small_table_margin);
  double want_extra = 0;
  EXPECT_EQ(whole_word_scale(searched),
            smaller_table_scale(h, store_small_table_margin, &want_extra));
  EXPECT_EQ(extra, want_extra);
  search_chooser_options per_file;
  per_file.small_table_margin = store_small_table_margin;
  EXPECT_THROW(make_search_chooser(per_file), std::invalid_argument);
}

}  // namespace
}  // namespace brevis::codec::search
