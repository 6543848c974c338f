// Seed corpora for the fuzz targets: small archives (and bare program +
// payload inputs) that exercise every operator and leaf with hand-built
// programs, each on data in its domain. The enabled tests check that every
// case still codes with its own program (no fallback) and that the committed
// seeds decode; the disabled one rewrites them:
//   fuzz_seeds_test --gtest_also_run_disabled_tests --gtest_filter='*generate*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codec/choose/chooser.h"
#include "codec/container/archive.h"
#include "codec/dsl/interpreter.h"
#include "codec/entropy/rans_static.h"
#include "codec/leaves/rans_static.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t seed_chunk_size = 4096;

node leaf(opcode op, std::vector<uint64_t> params = {}) {
  return make_leaf(op, std::move(params));
}

// view<width:meaning>(inner, raw tail)
node view(unsigned width, meaning m, node inner,
          node tail = make_leaf(opcode::raw)) {
  return make_op(opcode::view, {width, static_cast<uint64_t>(m)},
                 {std::move(inner), std::move(tail)});
}

node rans0_planes(unsigned width) {
  return make_op(opcode::planes, {},
                 std::vector<node>(width, leaf(opcode::rans0)));
}

// A rans_static leaf whose table (at precision `scale`) fits the lanes of
// `width` bytes of `data`.
node rans_static_for(bytes const& data, unsigned width, unsigned scale = 16) {
  std::vector<uint64_t> hist;
  rans_static::histogram(data, width, hist);
  node n = leaf(opcode::rans_static);
  n.blob = serialize_rans_static_table(
      quantize_rans_static_table(rans_static::normalize(hist, scale)));
  return n;
}

template <typename T, typename F>
bytes lanes_of(size_t count, F&& f) {
  bytes out;
  for (size_t i = 0; i < count; ++i) testing::append<T>(out, f(i));
  return out;
}

struct seed_case {
  std::string name;
  node program;
  bytes data;
  uint32_t chunk_size = seed_chunk_size;
};

// Every case spans more than one chunk (the last one shorter), so that chunk
// tails and several payloads are exercised.
std::vector<seed_case> seed_cases() {
  std::mt19937_64 rng(2026);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  auto bf16s = [&](size_t n) {
    return lanes_of<uint16_t>(
        n, [&](size_t) { return testing::to_bf16(normal(rng)); });
  };
  auto f32s = [&](size_t n) {
    return lanes_of<float>(n, [&](size_t) { return normal(rng); });
  };
  auto small_ints = [&](size_t n, unsigned bits) {
    return lanes_of<uint8_t>(n, [&](size_t) {
      return static_cast<uint8_t>(rng() & ((1u << bits) - 1));
    });
  };
  auto text = [](size_t n) {
    std::string const s = "the quick brown fox jumps over the lazy dog ";
    bytes out;
    for (size_t i = 0; i < n; ++i)
      out.push_back(s[(i * 7 + i / 13) % s.size()]);
    return out;
  };

  std::vector<seed_case> out;
  auto add = [&](std::string name, node p, bytes data,
                 uint32_t chunk = seed_chunk_size) {
    out.push_back({std::move(name), std::move(p), std::move(data), chunk});
  };

  // Leaves at the root.
  add("leaf_raw", leaf(opcode::raw), small_ints(4500, 8));
  add("leaf_zero", leaf(opcode::zero), bytes(5000, 0));
  add("leaf_constant", leaf(opcode::constant), bytes(5000, 0xa5));
  add("leaf_rans0", leaf(opcode::rans0), small_ints(5000, 3));
  add("leaf_rans1", leaf(opcode::rans1), text(5000));
  add("leaf_zstd1", leaf(opcode::zstd, {1}), text(6000));
  add("leaf_zstd22", leaf(opcode::zstd, {22}), text(6000));
  {
    bytes d = small_ints(5000, 4);
    add("leaf_rans_static_u8", rans_static_for(d, 1), d);
    add("leaf_rans_static_u8_scale11", rans_static_for(d, 1, 11), d);
    add("leaf_rans_static_u8_scale13", rans_static_for(d, 1, 13), d);
    add("leaf_rans_static_u8_scale15", rans_static_for(d, 1, 15), d);
    add("leaf_rans_static_u8_scale9", rans_static_for(d, 1, 9), d);
    // 32 states from 64 symbols on (the parameter, format 1.4).
    node wide = rans_static_for(d, 1);
    wide.params = {6};
    add("leaf_rans_static_u8_wide6", wide, d);
  }
  {
    bytes const d(5000, 7);  // a one-symbol table codes in zero bytes
    add("leaf_rans_static_single", rans_static_for(d, 1), d);
  }
  // The 32-way interleaved rANS streams start at 32 KiB.
  add("leaf_rans0_x32", leaf(opcode::rans0), small_ints(40000, 1), 36000);
  add("leaf_rans1_x32", leaf(opcode::rans1), text(40000), 36000);

  // view, with each lane width and meaning, and its tail.
  {
    bytes d = bf16s(2600);
    d.push_back(0x5a);  // an odd tail byte
    add("view_bf16_rans_static", view(2, meaning::bf16, rans_static_for(d, 2)),
        d);
    add("view_bf16_rans_static_scale12",
        view(2, meaning::bf16, rans_static_for(d, 2, 12)), d);
    node wide = rans_static_for(d, 2);
    wide.params = {0};  // 32 states whatever the count
    add("view_bf16_rans_static_wide0", view(2, meaning::bf16, wide), d);
    add("view_bf16_planes", view(2, meaning::bf16, rans0_planes(2)), d);
    add("fields_bf16",
        view(2, meaning::bf16,
             make_op(opcode::fields, {},
                     {leaf(opcode::rans0), leaf(opcode::rans1),
                      leaf(opcode::zstd, {3})})),
        d);
  }
  add("fields_fp32",
      view(
          4, meaning::fp32,
          make_op(opcode::fields, {},
                  {leaf(opcode::rans0), leaf(opcode::rans0), rans0_planes(4)})),
      f32s(1300));
  add("fields_fp16",
      view(
          2, meaning::fp16,
          make_op(opcode::fields, {},
                  {leaf(opcode::rans0), leaf(opcode::rans0), rans0_planes(2)})),
      lanes_of<uint16_t>(2600, [&](size_t i) {
        auto const sp = testing::special_f16();
        return i % 5 == 0 ? sp[i / 5 % sp.size()]
                          : static_cast<uint16_t>(0x3c00 + (rng() & 0x3ff));
      }));
  add("fields_fp64",
      view(8, meaning::fp64,
           make_op(opcode::fields, {},
                   {leaf(opcode::zero), leaf(opcode::rans0),
                    leaf(opcode::zstd, {3})})),
      lanes_of<double>(700, [&](size_t i) { return 1.0 + i * 0.25; }));
  add("fields_f8e4m3",
      view(1, meaning::f8e4m3,
           make_op(opcode::fields, {},
                   {leaf(opcode::rans0), leaf(opcode::rans0),
                    leaf(opcode::rans0)})),
      small_ints(5000, 7));
  add("fields_f8e5m2",
      view(1, meaning::f8e5m2,
           make_op(opcode::fields, {},
                   {leaf(opcode::constant), leaf(opcode::rans0),
                    leaf(opcode::rans0)})),
      small_ints(5000, 6));

  // Integer transforms.
  bytes const ramp = lanes_of<uint32_t>(1300, [&](size_t i) {
    return static_cast<uint32_t>(100000 + 3 * i + (rng() % 5));
  });
  add("delta_zigzag",
      view(4, meaning::sint,
           make_op(opcode::delta, {},
                   {make_op(opcode::map, {0, 0}, {rans0_planes(4)})})),
      ramp);
  add("xor_prev",
      view(2, meaning::uint, make_op(opcode::xor_prev, {}, {rans0_planes(2)})),
      lanes_of<uint16_t>(2600, [&](size_t i) {
        return static_cast<uint16_t>(0x4000 | (i / 16));
      }));
  {
    // Rows of 16 u32 that repeat with small changes.
    std::vector<uint32_t> row(16);
    for (uint32_t& v : row) v = static_cast<uint32_t>(rng());
    add("xor_row",
        view(4, meaning::uint,
             make_op(opcode::xor_row, {16}, {leaf(opcode::zstd, {3})})),
        lanes_of<uint32_t>(1300, [&](size_t i) {
          return row[i % 16] ^ static_cast<uint32_t>(rng() % 4);
        }));
    add("transpose",
        view(4, meaning::uint,
             make_op(opcode::transpose, {16}, {rans0_planes(4)})),
        lanes_of<uint32_t>(1301, [&](size_t i) { return row[i % 16]; }));
  }
  add("map_xor_add_rotate",
      view(2, meaning::uint,
           make_op(
               opcode::map, {1, 0x8000},
               {make_op(opcode::map, {2, 12345},
                        {make_op(opcode::map, {3, 5}, {rans0_planes(2)})})})),
      lanes_of<uint16_t>(
          2600, [&](size_t) { return static_cast<uint16_t>(rng() % 64); }));
  add("map_u64_rotate",
      view(8, meaning::uint, make_op(opcode::map, {3, 63}, {rans0_planes(8)})),
      lanes_of<uint64_t>(650, [&](size_t) { return rng() % 1000; }));
  {
    std::vector<uint16_t> values = {0x3f80, 0xbf80, 0x0000, 0x4000, 0x3e00};
    auto pick = [&](size_t) { return values[rng() % values.size()]; };
    add("palette_u16",
        view(2, meaning::bf16,
             make_op(opcode::palette, {},
                     {leaf(opcode::raw),
                      rans_static_for(lanes_of<uint16_t>(
                                          8,
                                          [](size_t i) {
                                            return static_cast<uint16_t>(i % 5);
                                          }),
                                      2)})),
        lanes_of<uint16_t>(2600, pick));
    add("palette_u16_u8",
        view(2, meaning::bf16,
             make_op(opcode::palette, {1},
                     {leaf(opcode::raw), leaf(opcode::rans0)})),
        lanes_of<uint16_t>(2600, pick));
  }
  add("palette_bytes",
      make_op(opcode::palette, {}, {leaf(opcode::raw), leaf(opcode::rans1)}),
      text(5000));
  add("palette_u64",
      view(8, meaning::uint,
           make_op(opcode::palette, {2},
                   {leaf(opcode::raw), leaf(opcode::rans0)})),
      lanes_of<uint64_t>(650, [&](size_t) { return (rng() % 300) << 40; }));
  {
    bytes d;
    for (size_t run = 0; d.size() < 5200; ++run) {
      uint32_t const v = run % 3 == 0 ? 0 : static_cast<uint32_t>(rng());
      size_t const len = 1 + rng() % 40;
      for (size_t i = 0; i < len; ++i) testing::append<uint32_t>(d, v);
    }
    add("runs",
        view(4, meaning::fp32,
             make_op(opcode::runs, {},
                     {leaf(opcode::zstd, {3}), rans0_planes(4)})),
        d);
    add("runs_bytes",
        make_op(opcode::runs, {}, {leaf(opcode::rans0), leaf(opcode::rans0)}),
        d);
  }
  {
    bytes const up = lanes_of<uint32_t>(1300, [&](size_t) {
      return uint32_t{testing::to_bf16(normal(rng))} << 16;
    });
    add("low_zero_16",
        view(4, meaning::fp32,
             make_op(opcode::low_zero, {16},
                     {rans_static_for(
                         lanes_of<uint16_t>(up.size() / 4,
                                            [&](size_t i) {
                                              return load_le<uint16_t>(
                                                  up.data() + 4 * i + 2);
                                            }),
                         2)})),
        up);
    add("low_zero_13_bitfields",
        view(4, meaning::fp32,
             make_op(opcode::low_zero, {13},
                     {make_op(opcode::bitfields, {3, 16, 13},
                              {leaf(opcode::rans0), rans0_planes(2),
                               leaf(opcode::zero)})})),
        up);
  }
  add("low_zero_u8",
      view(1, meaning::uint,
           make_op(opcode::low_zero, {4}, {leaf(opcode::rans0)})),
      lanes_of<uint8_t>(5000, [&](size_t) {
        return static_cast<uint8_t>((rng() % 16) << 4);
      }));
  add("split",
      make_op(opcode::split, {700},
              {leaf(opcode::raw),
               make_op(opcode::split, {3000},
                       {leaf(opcode::zstd, {19}), leaf(opcode::rans0)})}),
      text(5000));
  add("bitfields_u16",
      view(2, meaning::uint,
           make_op(opcode::bitfields, {4, 12},
                   {leaf(opcode::rans0), rans0_planes(2)})),
      lanes_of<uint16_t>(2600, [&](size_t i) {
        return static_cast<uint16_t>((i % 16) | ((rng() % 50) << 4));
      }));
  add("bitfields_u64",
      view(8, meaning::uint,
           make_op(
               opcode::bitfields, {1, 7, 8, 16, 32},
               {leaf(opcode::rans0), leaf(opcode::rans0),
                leaf(opcode::constant), rans0_planes(2), leaf(opcode::zero)})),
      lanes_of<uint64_t>(650, [&](size_t) {
        return (rng() & 0xff) | (uint64_t{0x42} << 8) | ((rng() % 1000) << 16);
      }));
  add("bitplanes_u8",
      view(1, meaning::uint,
           make_op(
               opcode::bitplanes, {},
               {leaf(opcode::rans0), leaf(opcode::rans0), leaf(opcode::rans0),
                leaf(opcode::zero), leaf(opcode::zero), leaf(opcode::zero),
                leaf(opcode::zero), leaf(opcode::zero)})),
      small_ints(5003, 3));
  {
    std::vector<node> planes(16, leaf(opcode::zero));
    for (size_t i = 0; i < 5; ++i) planes[i] = leaf(opcode::rans0);
    add("bitplanes_u16",
        view(2, meaning::uint, make_op(opcode::bitplanes, {}, planes)),
        lanes_of<uint16_t>(
            2603, [&](size_t) { return static_cast<uint16_t>(rng() % 32); }));
  }
  {
    std::vector<uint32_t> period(7);
    for (uint32_t& v : period) v = static_cast<uint32_t>(rng());
    add("repeat",
        view(4, meaning::uint,
             make_op(opcode::repeat, {7}, {leaf(opcode::raw)})),
        lanes_of<uint32_t>(1300, [&](size_t i) { return period[i % 7]; }));
  }
  add("repeat_bytes", make_op(opcode::repeat, {5}, {leaf(opcode::raw)}),
      lanes_of<uint8_t>(
          5000, [](size_t i) { return static_cast<uint8_t>("abcde"[i % 5]); }));
  // Deeper nesting: several operators under one another.
  add("deep",
      view(4, meaning::uint,
           make_op(
               opcode::delta, {},
               {make_op(
                   opcode::xor_prev, {},
                   {make_op(opcode::map, {0, 0},
                            {make_op(opcode::bitfields, {8, 8, 16},
                                     {leaf(opcode::rans0), leaf(opcode::rans1),
                                      make_op(opcode::planes, {},
                                              {leaf(opcode::rans0),
                                               leaf(opcode::zero)})})})})}),
           make_op(opcode::split, {1}, {leaf(opcode::raw), leaf(opcode::raw)})),
      [&] {
        bytes d = ramp;
        d.push_back(1);
        d.push_back(2);
        return d;
      }());
  // Later additions, with their own generator so earlier seeds stay put.
  {
    bytes const d = text(5000);  // every chunk a slice of the blob
    node n = leaf(opcode::literal);
    n.blob = d;
    add("leaf_literal", n, d);
  }
  {
    std::mt19937_64 r16(16);
    add("sparse_u16",
        view(2, meaning::fp16,
             make_op(opcode::sparse, {},
                     {leaf(opcode::rans0), rans0_planes(2)})),
        lanes_of<uint16_t>(2600, [&](size_t i) {
          return static_cast<uint16_t>(i % 5 == 0 ? 0x3c00 + (r16() & 0x3ff)
                                                  : 0);
        }));
  }
  // bits (format 1.3): at the root, under bitfields (a bf16 mantissa) and
  // on 16-bit lanes, each with an odd tail.
  add("leaf_bits7", leaf(opcode::bits, {7}), small_ints(5001, 7));
  {
    bytes d = bf16s(2600);
    d.push_back(0x5a);
    add("bitfields_bf16_bits",
        view(2, meaning::bf16,
             make_op(opcode::bitfields, {7, 9},
                     {leaf(opcode::bits, {7}), leaf(opcode::rans0)})),
        d);
  }
  {
    bytes d = lanes_of<uint16_t>(
        2600, [&](size_t) { return static_cast<uint16_t>(rng() & 511); });
    d.push_back(0x01);
    add("view_u16_bits9", view(2, meaning::uint, leaf(opcode::bits, {9})), d);
  }
  return out;
}

// Chooses one fixed program for every region.
class fixed_chooser final : public program_chooser {
 public:
  explicit fixed_chooser(node p) : p_(std::move(p)) {}
  node choose(region const&, byte_view) const override { return p_; }

 private:
  node p_;
};

// The archive of `c.data` (one untyped region) with every chunk coded by
// `c.program`, even where the writer would prefer its fallback.
bytes archive_with_program(seed_case const& c) {
  fixed_chooser chooser(c.program);
  region r;
  r.length = c.data.size();
  archive_writer w(c.data, {r}, chooser, c.chunk_size);
  w.choose_program(0);
  w.plan_chunks();
  bytes out = w.header();
  for (size_t i = 0; i < w.chunk_count(); ++i) {
    encoded_chunk e = w.encode(i);
    if (e.program == 0) {  // the fallback won: code it with the program
      size_t const at = i * c.chunk_size;
      size_t const n = std::min<size_t>(c.chunk_size, c.data.size() - at);
      e.payload.clear();
      encode_chunk(c.program, byte_view(c.data).subspan(at, n), e.payload);
      e.program = 1;
    }
    put_bytes(out, w.append(e));
  }
  put_bytes(out, w.finish());
  return out;
}

// A fuzz_program input: varint program length, program, varint output size,
// payload.
bytes program_input(node const& program, byte_view chunk) {
  bytes text = serialize_program(program);
  bytes payload;
  encode_chunk(program, chunk, payload);
  bytes out;
  put_blob(out, text);
  put_varint(out, chunk.size());
  put_bytes(out, payload);
  return out;
}

fs::path corpus_dir(char const* target) {
  return fs::path(BREVIS_SOURCE_DIR) / "tests/fuzz/corpus" / target;
}

bytes load(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), {});
}

void save(fs::path const& p, bytes const& b) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<char const*>(b.data()),
             static_cast<std::streamsize>(b.size()));
}

TEST(fuzz_seeds_test, every_case_codes_with_its_own_program) {
  for (seed_case const& c : seed_cases()) {
    SCOPED_TRACE(c.name);
    check_program(c.program);
    bytes const a = archive_with_program(c);
    EXPECT_LT(a.size(), 20u << 10);
    archive_reader r(a);
    ASSERT_GE(r.chunks().size(), 2u);
    for (chunk_entry const& e : r.chunks()) {
      EXPECT_EQ(r.programs()[e.program], c.program);
    }
    bytes back(r.original_size());
    r.read(0, back.size(), back.data());
    EXPECT_EQ(back, c.data);
  }
}

TEST(fuzz_seeds_test, committed_seeds_decode) {
  for (seed_case const& c : seed_cases()) {
    SCOPED_TRACE(c.name);
    fs::path const p = corpus_dir("decode") / ("op_" + c.name + ".brv");
    ASSERT_TRUE(fs::exists(p));
    bytes const a = load(p);
    archive_reader r(a);
    bytes back(r.original_size());
    r.read(0, back.size(), back.data());
    EXPECT_EQ(back, c.data);
  }
}

TEST(fuzz_seeds_test, DISABLED_generate_seeds) {
  for (seed_case const& c : seed_cases()) {
    save(corpus_dir("decode") / ("op_" + c.name + ".brv"),
         archive_with_program(c));
    // The program target gets the first chunk and the short last one.
    size_t const last = (c.data.size() - 1) / c.chunk_size * c.chunk_size;
    byte_view const d = c.data;
    save(corpus_dir("program") / (c.name + "_first.bin"),
         program_input(c.program,
                       d.first(std::min<size_t>(c.chunk_size, d.size()))));
    save(corpus_dir("program") / (c.name + "_last.bin"),
         program_input(c.program, d.subspan(last)));
  }
}

}  // namespace
}  // namespace brevis::codec
