// The literal leaf: bytes held in the program blob, the payload an offset.
#include <gtest/gtest.h>

#include <random>

#include "codec/container/archive.h"
#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

using testing::adversarial;
using testing::test_lengths;

node literal_of(byte_view blob) {
  node n = make_leaf(opcode::literal);
  n.blob.assign(blob.begin(), blob.end());
  return n;
}

// Encodes `data` with `n` as a leaf of lanes of `width` bytes, decodes and
// compares; false when the leaf refuses (errc::domain).
bool roundtrip(node const& n, byte_view data, unsigned width) {
  value_type const t{static_cast<uint8_t>(width), meaning::none};
  check_program(n, t);
  leaf_def const* leaf = find_leaf(opcode::literal);
  bytes payload;
  try {
    leaf->encode(n, stream{bytes(data.begin(), data.end()), t}, payload);
  } catch (error const& e) {
    EXPECT_EQ(e.code(), errc::domain);
    return false;
  }
  bytes back(data.size());
  leaf->decode(n, t, payload, back.size(), back.data());
  EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin(), data.end()));
  // Through the serialized program too.
  bytes again(data.size());
  decode_chunk(
      parse_program(serialize_program(n), t),
      [&] {
        bytes p;
        put_blob(p, payload);
        return p;
      }(),
      again.size(), again.data());
  EXPECT_EQ(again, back);
  return true;
}

TEST(literal_test, roundtrips_every_adversarial_input_and_its_slices) {
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    for (size_t len : test_lengths()) {
      for (auto const& s : adversarial(len, w)) {
        bytes const& d = s.data;
        SCOPED_TRACE("w=" + std::to_string(w) + " " + s.name +
                     " n=" + std::to_string(d.size()));
        node const whole = literal_of(d);
        EXPECT_TRUE(roundtrip(whole, d, 1));
        // Slices, as a region's chunks are: head, middle, tail.
        byte_view const v = d;
        EXPECT_TRUE(roundtrip(whole, v.first(d.size() / 2), 1));
        EXPECT_TRUE(roundtrip(whole, v.subspan(d.size() / 3, d.size() / 3), 1));
        EXPECT_TRUE(roundtrip(whole, v.subspan(d.size() / 2), 1));
        // Any lane width: the leaf copies bytes.
        if (d.size() % w == 0) EXPECT_TRUE(roundtrip(whole, d, w));
      }
    }
  }
}

TEST(literal_test, refuses_bytes_the_blob_does_not_hold) {
  bytes const blob = {1, 2, 3, 4, 5};
  node const n = literal_of(blob);
  EXPECT_TRUE(roundtrip(n, bytes{3, 4}, 1));
  EXPECT_FALSE(roundtrip(n, bytes{3, 5}, 1));
  EXPECT_FALSE(roundtrip(n, bytes{1, 2, 3, 4, 5, 6}, 1));
  EXPECT_TRUE(roundtrip(literal_of({}), bytes{}, 1));
  EXPECT_FALSE(roundtrip(literal_of({}), bytes{0}, 1));
  // Parameters are not allowed.
  EXPECT_THROW(check_program(make_leaf(opcode::literal, {1})), error);
}

TEST(literal_test, malformed_payloads_throw_and_never_crash) {
  std::mt19937 rng(71);
  bytes blob(3000);
  for (uint8_t& b : blob) b = static_cast<uint8_t>(rng());
  node const n = literal_of(blob);
  leaf_def const* leaf = find_leaf(opcode::literal);
  auto decodes = [&](bytes const& payload, size_t size) {
    bytes out(size);
    try {
      leaf->decode(n, bytes_type, payload, size, out.data());
    } catch (error const& e) {
      EXPECT_TRUE(e.code() == errc::corrupt || e.code() == errc::truncated)
          << e.what();
      return false;
    }
    return true;
  };
  bytes p;
  put_varint(p, 1000);
  EXPECT_TRUE(decodes(p, 2000));              // ends exactly at the blob's end
  EXPECT_FALSE(decodes(p, 2001));             // one past it
  EXPECT_FALSE(decodes(bytes{}, 1));          // no offset
  EXPECT_FALSE(decodes(bytes{0x80}, 1));      // truncated varint
  EXPECT_FALSE(decodes(bytes{0, 0}, 1));      // trailing bytes
  EXPECT_FALSE(decodes(bytes(11, 0xff), 1));  // overlong varint
  bytes huge;
  put_varint(huge, ~uint64_t{0});
  EXPECT_FALSE(decodes(huge, 1));
  EXPECT_FALSE(decodes(huge, 0));
  for (int i = 0; i < 2000; ++i) {
    bytes q(rng() % 12);
    for (uint8_t& b : q) b = static_cast<uint8_t>(rng());
    decodes(q, rng() % 4000);
  }
}

// A fixed program for every region.
class fixed_chooser final : public program_chooser {
 public:
  explicit fixed_chooser(node p) : p_(std::move(p)) {}
  node choose(region const&, byte_view) const override { return p_; }

 private:
  node p_;
};

TEST(literal_test, a_region_of_many_chunks_is_sliced_from_one_blob) {
  std::mt19937 rng(3);
  bytes file(3 * 4096 + 123);
  for (uint8_t& b : file) b = static_cast<uint8_t>(rng() % 7);
  fixed_chooser chooser(literal_of(file));
  region r;
  r.length = file.size();
  archive_writer w(file, {r}, chooser, 4096);
  w.choose_program(0);
  w.plan_chunks();
  bytes a = w.header();
  size_t payload = 0;
  for (size_t i = 0; i < w.chunk_count(); ++i) {
    encoded_chunk const e = w.encode(i);
    EXPECT_EQ(e.program, 1u);  // not the fallback
    payload += e.payload.size();
    put_bytes(a, w.append(e));
  }
  put_bytes(a, w.finish());
  EXPECT_LT(payload, 4 * w.chunk_count());  // offsets only
  archive_reader rd(a);
  bytes back(file.size());
  rd.read(0, back.size(), back.data());
  EXPECT_EQ(back, file);
}

TEST(literal_test, the_file_chooser_keeps_small_opaque_regions_as_literals) {
  // A zip-like file: small headers between tensors.
  std::mt19937 rng(9);
  bytes file;
  std::vector<region> regions;
  for (int i = 0; i < 20; ++i) {
    region h;
    h.offset = file.size();
    h.length = 40;
    h.name = "header";
    for (int k = 0; k < 40; ++k) file.push_back(static_cast<uint8_t>(k + i));
    regions.push_back(h);
    region t;
    t.offset = file.size();
    t.length = 600;
    t.kind = region_kind::tensor;
    t.type = dtype::bf16;
    for (int k = 0; k < 600; ++k) file.push_back(static_cast<uint8_t>(rng()));
    regions.push_back(t);
  }
  auto const chooser = make_candidate_chooser();
  archive_writer w(file, regions, *chooser, 4096);
  for (size_t r = 0; r < w.region_count(); ++r) w.choose_program(r);
  w.plan_chunks();
  size_t literals = 0;
  for (region_entry const& e : w.regions()) {
    bool const lit = w.programs()[e.program].op == opcode::literal;
    EXPECT_EQ(lit, e.info.kind == region_kind::opaque);
    literals += lit;
  }
  EXPECT_EQ(literals, 20u);
  bytes a = w.header();
  for (size_t i = 0; i < w.chunk_count(); ++i)
    put_bytes(a, w.append(w.encode(i)));
  put_bytes(a, w.finish());
  archive_reader rd(a);
  bytes back(file.size());
  rd.read(0, back.size(), back.data());
  EXPECT_EQ(back, file);
  // A store-style chooser (regions coded on their own) uses none.
  auto const alone = make_candidate_chooser(table_sharing::per_region);
  archive_writer w2(file, regions, *alone, 4096);
  for (size_t r = 0; r < w2.region_count(); ++r) {
    w2.choose_program(r);
  }
  w2.plan_chunks();
  for (node const& p : w2.programs()) EXPECT_NE(p.op, opcode::literal);
}

}  // namespace
}  // namespace brevis::codec
