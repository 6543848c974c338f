// The literal leaf: bytes held in the program blob, the payload an offset.
#include <gtest/gtest.h>

#include <random>

#include "codec/container/archive.h"
#include "codec/container/index.h"
#include "codec/core/checksum.h"
#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/error_code.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

using testing::adversarial;
using testing::code_of;
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
        if (d.size() % w == 0) {
          EXPECT_TRUE(roundtrip(whole, d, w));
        }
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

// The payload is the first offset where the value occurs, found in time
// linear in the blob: 4 KiB chunks of a 64 KiB region of one repeated byte
// with another at a chunk's start (Boyer-Moore-Horspool shifted one byte a
// position there, comparing a whole chunk each time).
TEST(literal_test, the_offset_is_the_first_occurrence_in_repetitive_blobs) {
  leaf_def const* leaf = find_leaf(opcode::literal);
  value_type const t{1, meaning::none};
  auto offset_of = [&](node const& n, byte_view value) {
    bytes payload;
    leaf->encode(n, stream{bytes(value.begin(), value.end()), t}, payload);
    byte_reader r(payload);
    return r.varint();
  };
  bytes blob(64u << 10, 'a');
  blob[15u << 12] = 'b';  // the last chunk's first byte
  node const n = literal_of(blob);
  byte_view const v = blob;
  for (size_t chunk = 0; chunk < 16; ++chunk) {
    // Chunks of 'a' alone occur first at 0; the last only where it is.
    EXPECT_EQ(offset_of(n, v.subspan(chunk << 12, 4096)),
              chunk < 15 ? 0u : chunk << 12)
        << "chunk " << chunk;
  }
  // A value that starts in one chunk and ends in the next, and one found
  // only at the end.
  EXPECT_EQ(offset_of(n, v.subspan((15u << 12) - 100, 200)), (15u << 12) - 100);
  EXPECT_EQ(offset_of(n, v.last(4097)), blob.size() - 4097);
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
  auto const chooser = make_search_chooser();
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
  auto const alone = make_store_chooser();
  archive_writer w2(file, regions, *alone, 4096);
  for (size_t r = 0; r < w2.region_count(); ++r) {
    w2.choose_program(r);
  }
  w2.plan_chunks();
  for (node const& p : w2.programs()) EXPECT_NE(p.op, opcode::literal);
}

// A small "checkpoint": opaque headers between bf16 tensors.
struct small_file {
  bytes data;
  std::vector<region> regions;
};

small_file headers_and_tensors(size_t count, size_t header, size_t tensor) {
  std::mt19937 rng(21);
  small_file f;
  for (size_t i = 0; i < count; ++i) {
    region h;
    h.offset = f.data.size();
    h.length = header;
    for (size_t k = 0; k < header; ++k)
      f.data.push_back(static_cast<uint8_t>(k * 3 + i));
    f.regions.push_back(h);
    region t;
    t.offset = f.data.size();
    t.length = tensor;
    t.kind = region_kind::tensor;
    t.type = dtype::bf16;
    for (size_t k = 0; k < tensor; ++k)
      f.data.push_back(static_cast<uint8_t>(rng()));
    f.regions.push_back(t);
  }
  return f;
}

bytes write(small_file const& f, program_chooser const& c, uint32_t chunk) {
  archive_writer w(f.data, f.regions, c, chunk);
  return write_all(w);
}

TEST(literal_test, literal_regions_are_stored_in_the_index_alone) {
  // Headers of 5000 bytes over 4096-byte chunks: two in-program chunks each.
  small_file const f = headers_and_tensors(6, 5000, 3000);
  auto const chooser = make_search_chooser();
  bytes const a = write(f, *chooser, 4096);
  archive_reader r(a);
  size_t in_program = 0;
  for (chunk_entry const& c : r.chunks()) {
    region const& g = r.regions()[c.region].info;
    EXPECT_EQ(c.in_program, g.kind == region_kind::opaque);
    if (!c.in_program) continue;
    ++in_program;
    EXPECT_EQ(c.payload_length, 0u);
    EXPECT_EQ(r.programs()[c.program].op, opcode::literal);
    // The checksum is computed from the index, and is the bytes' own.
    EXPECT_EQ(c.checksum, xxh3(byte_view(f.data).subspan(c.offset, c.length)));
  }
  EXPECT_EQ(in_program, 12u);
  bytes back(r.original_size());
  r.read(0, back.size(), back.data());
  EXPECT_EQ(back, f.data);
  // Random access inside an in-program chunk, and across into a tensor.
  bytes piece(3000);
  r.read(4000, piece.size(), piece.data());
  EXPECT_TRUE(std::equal(piece.begin(), piece.end(), f.data.begin() + 4000));
}

TEST(literal_test, forged_in_program_chunks_are_rejected) {
  small_file const f = headers_and_tensors(3, 300, 2000);
  auto const chooser = make_search_chooser();
  bytes const a = write(f, *chooser, 4096);
  archive_reader r(a);
  brv::archive_index x;
  x.original_size = r.original_size();
  x.original_checksum = r.original_checksum();
  x.regions.assign(r.regions().begin(), r.regions().end());
  x.programs.assign(r.programs().begin(), r.programs().end());
  x.chunks.assign(r.chunks().begin(), r.chunks().end());
  uint64_t payload_area = 0;
  for (chunk_entry const& c : x.chunks) payload_area += c.payload_length;
  auto decodes = [&](brv::archive_index const& y) {
    return code_of(
        [&] { brv::decode_index(brv::encode_index(y), 4096, payload_area); });
  };
  EXPECT_EQ(decodes(x), errc::ok);
  size_t const tensor_chunk = 1;  // header, tensor, header, ...
  ASSERT_FALSE(x.chunks[tensor_chunk].in_program);
  ASSERT_TRUE(x.chunks[0].in_program);
  {
    // In-program, but its region's program is not a literal leaf.
    brv::archive_index y = x;
    y.chunks[tensor_chunk].in_program = true;
    payload_area -= y.chunks[tensor_chunk].payload_length;
    EXPECT_EQ(decodes(y), errc::corrupt);
    payload_area += y.chunks[tensor_chunk].payload_length;
  }
  {
    // The literal blob is shorter than the chunk.
    brv::archive_index y = x;
    node& p = y.programs[y.regions[0].program];
    p.blob.pop_back();
    EXPECT_EQ(decodes(y), errc::corrupt);
  }
  {
    // The region's program is a literal under an operator.
    brv::archive_index y = x;
    node& p = y.programs[y.regions[0].program];
    p = make_op(opcode::split, {0}, {make_leaf(opcode::raw), p});
    EXPECT_EQ(decodes(y), errc::corrupt);
  }
}

}  // namespace
}  // namespace brevis::codec
