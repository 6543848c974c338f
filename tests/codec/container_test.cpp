#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "codec/choose/chooser.h"
#include "codec/container/archive.h"
#include "codec/container/format.h"
#include "codec/container/index.h"
#include "codec/core/checksum.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

namespace fs = std::filesystem;

// Chooses one fixed program for every region.
class fixed_chooser final : public program_chooser {
 public:
  explicit fixed_chooser(node p) : p_(std::move(p)) {}
  node choose(region const&, byte_view) const override { return p_; }

 private:
  node p_;
};

bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  bytes out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// The store's search, without choice records: these tests are about the
// container, whose bytes must not depend on how long a choice took.
class unrecorded_chooser final : public program_chooser {
 public:
  node choose(region const& r, byte_view data) const override {
    return search_->choose(r, data);
  }

 private:
  std::unique_ptr<program_chooser> search_ = make_store_chooser();
};

bytes archive_of(byte_view file, uint32_t chunk_size = 4096) {
  return write_archive(file, "test.bin", unrecorded_chooser{}, chunk_size);
}

bytes read_all(archive_reader const& r) {
  bytes out(r.original_size());
  r.read(0, out.size(), out.data());
  return out;
}

void expect_roundtrip(byte_view file, uint32_t chunk_size = 4096) {
  bytes a = archive_of(file, chunk_size);
  archive_reader r(a);
  EXPECT_EQ(r.original_size(), file.size());
  EXPECT_EQ(r.original_checksum(), xxh3(file));
  EXPECT_EQ(r.chunk_size(), chunk_size);
  bytes back = read_all(r);
  ASSERT_TRUE(std::equal(back.begin(), back.end(), file.begin(), file.end()));
  for (size_t i = 0; i < r.chunks().size(); ++i) {
    chunk_entry const& c = r.chunks()[i];
    bytes one(c.length);
    r.decode_chunk(i, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), file.data() + c.offset, c.length));
  }
}

errc error_of(std::function<void()> f) {
  try {
    f();
  } catch (error const& e) {
    return e.code();
  }
  return errc::ok;
}

errc open_and_read(byte_view archive) {
  return error_of([&] {
    archive_reader r(archive);
    bytes back = read_all(r);
  });
}

// Rewrites an archive's index (and the trailer, so the index checksum holds):
// builds well-checksummed archives whose content is a lie.
bytes forge(bytes const& archive,
            std::function<void(brv::archive_index&)> const& edit) {
  uint64_t const n = archive.size();
  uint64_t const at = load_le<uint64_t>(archive.data() + n - 32);
  uint64_t const len = load_le<uint64_t>(archive.data() + n - 24);
  uint32_t const chunk_size = load_le<uint32_t>(archive.data() + 8);
  bool const packed =
      load_le<uint16_t>(archive.data() + 6) & brv::header_flag_index_zstd;
  byte_view stored = byte_view(archive).subspan(at, len);
  bytes const unpacked = packed ? brv::unpack_index(stored) : bytes{};
  if (packed) stored = unpacked;
  brv::archive_index x =
      brv::decode_index(stored, chunk_size, at - brv::header_size);
  edit(x);
  bytes index = brv::encode_index(x);
  if (packed) index = brv::pack_index(index, 0);
  bytes out(archive.begin(), archive.begin() + at);
  put_bytes(out, index);
  bytes checked(archive.begin(), archive.begin() + brv::header_size);
  put_bytes(checked, index);
  put_le<uint64_t>(out, at);
  put_le<uint64_t>(out, index.size());
  put_le<uint64_t>(out, xxh3(checked));
  put_bytes(out, brv::end_magic);
  return out;
}

bytes safetensors_file() {
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[5000],"data_offsets":[24,10024]}})";
  while (header.size() % 8 != 0) header += ' ';
  bytes f;
  put_le<uint64_t>(f, header.size());
  put_bytes(f, as_bytes(header));
  bytes data = random_bytes(10024, 9);
  put_bytes(f, data);
  return f;
}

// ------------------------------------------------------------ roundtrips

TEST(container_test, roundtrip_empty_and_tiny) {
  expect_roundtrip({});
  bytes one = {42};
  expect_roundtrip(one);
  bytes a = archive_of({});
  archive_reader r(a);
  EXPECT_EQ(r.chunks().size(), 0u);
  EXPECT_EQ(r.regions().size(), 0u);
}

TEST(container_test, roundtrip_sizes_around_chunk_boundaries) {
  for (uint32_t cs : {4096u, 5000u, 65536u}) {
    for (size_t n : {size_t{cs} - 1, size_t{cs}, size_t{cs} + 1,
                     2 * size_t{cs} - 1, 2 * size_t{cs}, 3 * size_t{cs} + 7}) {
      SCOPED_TRACE(std::to_string(cs) + "/" + std::to_string(n));
      expect_roundtrip(random_bytes(n, static_cast<uint32_t>(n)), cs);
    }
  }
}

TEST(container_test, roundtrip_adversarial_samples) {
  for (auto const& s : testing::adversarial(9000, 4)) {
    SCOPED_TRACE(s.name);
    expect_roundtrip(s.data);
  }
}

TEST(container_test, repeated_chunks_become_refs) {
  bytes block = random_bytes(4096, 1);
  bytes file;
  for (int i = 0; i < 4; ++i) put_bytes(file, block);
  put_bytes(file, random_bytes(4096, 2));
  put_bytes(file, block);
  put_bytes(file, bytes(100, 7));
  bytes a = archive_of(file);
  archive_reader r(a);
  size_t refs = 0;
  for (chunk_entry const& c : r.chunks()) {
    if (c.is_ref) {
      ++refs;
      EXPECT_EQ(c.ref_offset, 0u);
      EXPECT_EQ(c.payload_length, 0u);
    }
  }
  EXPECT_EQ(refs, 4u);
  EXPECT_LT(a.size(), 3 * 4096u + 1000);
  bytes back = read_all(r);
  EXPECT_EQ(back, file);
}

TEST(container_test, equal_hash_needs_equal_bytes) {
  // Same length, different bytes: never a ref.
  bytes file = random_bytes(4096, 3);
  put_bytes(file, random_bytes(4096, 4));
  bytes a = archive_of(file);
  archive_reader r(a);
  for (chunk_entry const& c : r.chunks()) EXPECT_FALSE(c.is_ref);
}

TEST(container_test, safetensors_roundtrip) {
  bytes f = safetensors_file();
  expect_roundtrip(f);
  bytes a = archive_of(f);
  archive_reader r(a);
  uint64_t total = 0;
  for (region_entry const& g : r.regions()) {
    EXPECT_EQ(g.info.offset, total);
    total += g.info.length;
  }
  EXPECT_EQ(total, f.size());
}

TEST(container_test, typed_regions_are_cut_element_aligned) {
  bytes file = random_bytes(3 + 20000 + 9000 + 17, 5);
  std::vector<region> regions(4);
  regions[0] = {0, 3, region_kind::opaque, dtype::none, {}, "head"};
  regions[1] = {3, 20000, region_kind::tensor, dtype::f64, {2500}, "w"};
  regions[2] = {20003, 9000, region_kind::tensor, dtype::f32, {2250}, "v"};
  regions[3] = {29003, 17, region_kind::opaque, dtype::none, {}, "pad"};
  fixed_chooser chooser(make_leaf(opcode::raw));
  archive_writer w(file, regions, chooser, 5000);
  bytes const a = write_all(w);
  archive_reader r(a);
  ASSERT_EQ(r.regions().size(), 4u);
  EXPECT_EQ(r.regions()[1].info.name, "w");
  EXPECT_EQ(r.regions()[1].info.type, dtype::f64);
  EXPECT_EQ(r.regions()[2].info.shape, std::vector<uint64_t>{2250});
  for (chunk_entry const& c : r.chunks()) {
    region const& g = r.regions()[c.region].info;
    unsigned const wd = std::max(1u, dtype_width(g.type));
    EXPECT_GE(c.offset, g.offset);
    EXPECT_LE(c.offset + c.length, g.offset + g.length);
    EXPECT_EQ((c.offset - g.offset) % wd, 0u);
    EXPECT_LE(c.length, 5000u);
  }
  EXPECT_EQ(read_all(r), file);
}

// A file's names and shapes have no limits; a region entry's have (4096
// bytes, rank 32): the writer cuts them so that its archive opens (it
// wrote entries the reader then refused). A name is cut before the UTF-8
// character the limit would split.
TEST(container_test, names_and_shapes_past_the_index_limits_are_cut) {
  bytes file = random_bytes(size_t{3} * 4000, 6);
  std::string long_name(brv::max_name_length - 1, 'a');
  long_name += "\xC3\xA9 and more";  // U+00E9 across the limit
  std::vector<region> regions(3);
  regions[0] = {0, 4000, region_kind::tensor, dtype::f16, {2000}, long_name};
  regions[1] = {4000,
                4000,
                region_kind::tensor,
                dtype::f16,
                std::vector<uint64_t>(brv::max_rank + 1, 1),
                "deep"};
  regions[1].shape.back() = 2000;
  regions[2] = {8000,
                4000,
                region_kind::tensor,
                dtype::f16,
                std::vector<uint64_t>(brv::max_rank, 1),
                std::string(brv::max_name_length, 'b')};
  fixed_chooser chooser(make_leaf(opcode::raw));
  archive_writer w(file, regions, chooser, 4096);
  bytes const a = write_all(w);
  archive_reader r(a);
  ASSERT_EQ(r.regions().size(), 3u);
  EXPECT_EQ(r.regions()[0].info.name,
            std::string(brv::max_name_length - 1, 'a'));
  EXPECT_EQ(r.regions()[0].info.shape, std::vector<uint64_t>{2000});
  EXPECT_EQ(r.regions()[1].info.name, "deep");
  EXPECT_TRUE(r.regions()[1].info.shape.empty());
  // At the limits, nothing is cut.
  EXPECT_EQ(r.regions()[2].info.name.size(), brv::max_name_length);
  EXPECT_EQ(r.regions()[2].info.shape.size(), brv::max_rank);
  EXPECT_EQ(read_all(r), file);
}

// The same through the parser: a safetensors tensor named with 5,000
// bytes.
TEST(container_test, a_tensor_name_longer_than_the_index_holds_roundtrips) {
  std::string const name(5000, 'x');
  std::string header =
      R"({")" + name +
      R"(":{"dtype":"F16","shape":[3000],"data_offsets":[0,6000]}})";
  while (header.size() % 8 != 0) header += ' ';
  bytes f;
  put_le<uint64_t>(f, header.size());
  put_bytes(f, as_bytes(header));
  put_bytes(f, random_bytes(6000, 7));
  expect_roundtrip(f);
  archive_reader r(archive_of(f));
  ASSERT_EQ(r.regions().size(), 2u);
  EXPECT_EQ(r.regions()[1].info.name, std::string(brv::max_name_length, 'x'));
}

// Payload buffers handed back with recycle() serve the next chunks on this
// thread: regions of different sizes (chunks of different lengths, payloads
// shorter and longer than the buffer's last contents) must still give the
// same archive as fresh buffers do.
TEST(container_test, recycled_payload_buffers_give_the_same_archive) {
  bytes file = random_bytes(70001, 9);
  for (size_t i = 0; i < 30000; ++i) file[i] = static_cast<uint8_t>(i % 5);
  std::vector<region> regions(4);
  regions[0] = {0, 30000, region_kind::opaque, dtype::none, {}, "runs"};
  regions[1] = {30000, 20000, region_kind::opaque, dtype::none, {}, "a"};
  regions[2] = {50000, 1, region_kind::opaque, dtype::none, {}, "b"};
  regions[3] = {50001, 20000, region_kind::opaque, dtype::none, {}, "c"};
  fixed_chooser chooser(make_leaf(opcode::rans0));
  auto write = [&](bool recycle) {
    archive_writer w(file, regions, chooser, 8192);
    for (size_t r = 0; r < w.region_count(); ++r) w.choose_program(r);
    w.plan_chunks();
    bytes a = w.header();
    for (size_t i = 0; i < w.chunk_count(); ++i) {
      encoded_chunk c = w.encode(i);
      put_bytes(a, w.append(c));
      if (recycle) archive_writer::recycle(std::move(c));
    }
    put_bytes(a, w.finish());
    return a;
  };
  bytes const fresh = write(false);
  bytes const reused = write(true);
  EXPECT_EQ(reused, fresh);
  EXPECT_EQ(write(true), fresh);  // the buffers are warm now
  archive_reader r(reused);
  EXPECT_EQ(read_all(r), file);
}

TEST(container_test, ill_typed_choice_falls_back) {
  bytes file = random_bytes(10000, 6);
  fixed_chooser chooser(make_op(opcode::delta, {}, {}));  // not registered
  bytes a = write_archive(file, "x", chooser, 4096);
  archive_reader r(a);
  EXPECT_EQ(r.programs().size(), 1u);
  EXPECT_EQ(read_all(r), file);
}

// Writes `file` with `chooser`'s program, chunk by chunk in order.
archive_writer::fallback_counts fallbacks_writing(bytes const& file,
                                                  program_chooser const& c) {
  archive_writer w(file, "x", c, 4096);
  bytes const a = write_all(w);
  archive_reader r(a);
  EXPECT_EQ(read_all(r), file);
  return w.fallbacks();
}

// Chunks the fallback program stores are counted by why: a refusal (values
// the program cannot code) is not a fault; an operator failing otherwise is.
TEST(container_test, fallbacks_are_counted_by_why) {
  bytes file = random_bytes(size_t{3} * 4096, 8);
  for (uint8_t& b : file) b &= 7;  // three bits code it
  file[2 * 4096 + 5] = 8;          // except in the third chunk
  fixed_chooser const bits(make_leaf(opcode::bits, {3}));
  archive_writer::fallback_counts const refused = fallbacks_writing(file, bits);
  EXPECT_EQ(refused.refused, 1u);
  EXPECT_EQ(refused.faulted, 0u);
  EXPECT_EQ(refused.first_fault, "");

  // Which failures are refusals; the rest are faults (no well-formed
  // program of brevis's operators reaches them: choose_program checks it).
  EXPECT_TRUE(archive_writer::is_refusal(errc::domain));
  EXPECT_TRUE(archive_writer::is_refusal(errc::limit));
  EXPECT_FALSE(archive_writer::is_refusal(errc::corrupt));
  EXPECT_FALSE(archive_writer::is_refusal(errc::bad_program));
  EXPECT_FALSE(archive_writer::is_refusal(errc::truncated));
}

// Writes `file` with rans0 for every chunk, decoding back when `verify`.
bytes rans0_archive(byte_view file, bool verify, size_t& verified) {
  fixed_chooser chooser(make_leaf(opcode::rans0));
  archive_writer w(file, "x", chooser, 4096);
  w.set_verify(verify);
  for (size_t r = 0; r < w.region_count(); ++r) w.choose_program(r);
  w.plan_chunks();
  bytes out = w.header();
  for (size_t i = 0; i < w.chunk_count(); ++i) {
    put_bytes(out, w.append(w.encode(i)));
  }
  put_bytes(out, w.finish());
  verified = w.verified_chunks();
  return out;
}

// The mount chooses and encodes from copies of the bytes it reads into
// reused buffers: the archive must be the one the file's own bytes give.
TEST(container_test, copies_of_regions_and_chunks_code_like_the_file) {
  std::mt19937_64 rng(5);
  bytes file(4096 * 6 + 77);
  for (uint8_t& b : file) b = static_cast<uint8_t>(rng() % 11 * (rng() % 2));
  std::copy(file.begin(), file.begin() + 4096, file.begin() + 4096 * 4);
  std::vector<region> regions(2);
  regions[0].length = 4096 * 3 + 5;
  regions[1].offset = regions[0].length;
  regions[1].length = file.size() - regions[0].length;
  unrecorded_chooser chooser;
  auto write = [&](bool copies, archive_writer::file_hash hash,
                   std::optional<uint64_t>& whole) {
    archive_writer w(file, regions, chooser, 4096);
    for (size_t r = 0; r < w.region_count(); ++r) {
      region const& g = w.regions()[r].info;
      bytes const copy(
          file.begin() + static_cast<std::ptrdiff_t>(g.offset),
          file.begin() + static_cast<std::ptrdiff_t>(g.offset + g.length));
      copies ? w.choose_program(r, copy) : w.choose_program(r);
    }
    w.plan_chunks(hash);
    whole = w.file_checksum();
    bytes out = w.header();
    for (size_t i = 0; i < w.chunk_count(); ++i) {
      chunk_entry const& c = w.chunks()[i];
      bytes const copy(
          file.begin() + static_cast<std::ptrdiff_t>(c.offset),
          file.begin() + static_cast<std::ptrdiff_t>(c.offset + c.length));
      put_bytes(out, w.append(copies ? w.encode(i, copy) : w.encode(i)));
    }
    put_bytes(out, w.finish());
    return out;
  };
  std::optional<uint64_t> whole_a, whole_b;
  bytes const a = write(false, archive_writer::file_hash::compute, whole_a);
  bytes const b = write(true, archive_writer::file_hash::skip, whole_b);
  EXPECT_EQ(a, b);
  ASSERT_TRUE(whole_a.has_value());
  EXPECT_EQ(*whole_a, xxh3(file));
  EXPECT_FALSE(whole_b.has_value()) << "skipped, not computed";
  archive_reader r(b);
  EXPECT_EQ(read_all(r), file);

  // A copy of the wrong length is refused, not read past.
  archive_writer w(file, regions, chooser, 4096);
  bytes const short_copy(10);
  EXPECT_THROW(w.choose_program(0, short_copy), error);
  w.choose_program(0);
  w.choose_program(1);
  w.plan_chunks();
  EXPECT_THROW((void)w.encode(0, short_copy), error);
}

TEST(container_test, verify_decodes_back_only_when_on) {
  // Skewed bytes rans0 shrinks, an odd tail, and a repeated chunk (a ref,
  // which has no payload to check).
  std::mt19937_64 rng(21);
  bytes file(4096 * 5 + 333);
  for (uint8_t& b : file) b = static_cast<uint8_t>(rng() % 7 * (rng() % 3));
  std::copy(file.begin(), file.begin() + 4096, file.begin() + 4096 * 3);
  size_t checked = 0, unchecked = 0;
  bytes const a = rans0_archive(file, true, checked);
  bytes const b = rans0_archive(file, false, unchecked);
  EXPECT_EQ(checked, 5u) << "every stored chunk decoded back";
  EXPECT_EQ(unchecked, 0u);
  // Checking changes nothing when the operators are right.
  EXPECT_EQ(a, b);
  archive_reader r(b);
  EXPECT_EQ(read_all(r), file);
  EXPECT_EQ(r.programs().size(), 2u);
  EXPECT_EQ(r.chunks()[3].is_ref, true);
}

TEST(container_test, random_access_reads) {
  bytes file;
  for (auto const& s : testing::adversarial(7001, 2)) put_bytes(file, s.data);
  bytes a = archive_of(file, 4096);
  archive_reader r(a);
  std::mt19937_64 rng(11);
  for (int k = 0; k < 300; ++k) {
    uint64_t const off = rng() % (file.size() + 1);
    size_t const len = rng() % std::min<uint64_t>(file.size() - off + 1, 20000);
    bytes out(len);
    r.read(off, len, out.data());
    ASSERT_EQ(0, std::memcmp(out.data(), file.data() + off, len))
        << off << "+" << len;
  }
  EXPECT_EQ(error_of([&] {
              uint8_t b;
              r.read(file.size(), 1, &b);
            }),
            errc::limit);
}

// A part of a chunk decodes through a reused buffer: a chunk that fails its
// checksum still throws, and the next partial reads are right.
TEST(container_test, partial_reads_after_a_bad_chunk_stay_right) {
  bytes file = random_bytes(4096 * 3, 31);
  for (size_t i = 0; i < file.size(); i += 3) file[i] = 0;  // compressible
  bytes a = archive_of(file, 4096);
  archive_reader good(a);
  chunk_entry const c0 = good.chunks()[0];
  ASSERT_GT(c0.payload_length, 8u);
  bytes bad = a;
  bad[c0.payload_offset + c0.payload_length / 2] ^= 0x40;
  archive_reader r(bad);
  for (int k = 0; k < 3; ++k) {
    bytes out(100);
    EXPECT_THROW(r.read(10, out.size(), out.data()), error);
    r.read(4096 + 50, out.size(), out.data());
    EXPECT_EQ(0, std::memcmp(out.data(), file.data() + 4096 + 50, out.size()));
    r.read(2 * 4096 + 7, out.size(), out.data());
    EXPECT_EQ(0, std::memcmp(out.data(), file.data() + 2 * 4096 + 7, 100));
  }
}

TEST(container_test, chunks_covering_counts) {
  bytes file = random_bytes(4096 * 5 + 10, 12);
  bytes a = archive_of(file, 4096);
  archive_reader r(a);
  ASSERT_EQ(r.chunks().size(), 6u);
  using p = std::pair<size_t, size_t>;
  EXPECT_EQ(r.chunks_covering(0, 0), p(0, 0));
  EXPECT_EQ(r.chunks_covering(0, 1), p(0, 1));
  EXPECT_EQ(r.chunks_covering(0, 4096), p(0, 1));
  EXPECT_EQ(r.chunks_covering(0, 4097), p(0, 2));
  EXPECT_EQ(r.chunks_covering(4095, 2), p(0, 2));
  EXPECT_EQ(r.chunks_covering(4096, 4096 * 2), p(1, 3));
  EXPECT_EQ(r.chunks_covering(file.size() - 1, 1), p(5, 6));
  EXPECT_EQ(r.chunks_covering(0, file.size()), p(0, 6));
  EXPECT_EQ(error_of([&] { r.chunks_covering(1, file.size()); }), errc::limit);
}

TEST(container_test, streaming_parallel_writer_matches_serial) {
  bytes file = random_bytes(4096 * 9 + 123, 13);
  put_bytes(file, bytes(file.begin(), file.begin() + 8192));  // refs
  unrecorded_chooser const chooser;
  archive_writer w(file, "f", chooser, 4096);
  for (size_t r = 0; r < w.region_count(); ++r) w.choose_program(r);
  w.plan_chunks();
  std::vector<encoded_chunk> enc(w.chunk_count());
  std::thread t1([&] {
    for (size_t i = 0; i < enc.size(); i += 2) enc[i] = w.encode(i);
  });
  std::thread t2([&] {
    for (size_t i = 1; i < enc.size(); i += 2) enc[i] = w.encode(i);
  });
  t1.join();
  t2.join();
  bytes streamed = w.header();
  for (auto const& e : enc) put_bytes(streamed, w.append(e));
  put_bytes(streamed, w.finish());
  EXPECT_EQ(streamed, write_archive(file, "f", chooser, 4096));
  archive_reader r(streamed);
  EXPECT_EQ(read_all(r), file);
  // Out of order append is refused.
  archive_writer w2(file, "f", chooser, 4096);
  w2.plan_chunks();
  EXPECT_THROW(w2.append(w2.encode(1)), error);
}

TEST(container_test, reader_through_read_fn) {
  bytes file = random_bytes(20000, 14);
  bytes a = archive_of(file);
  size_t calls = 0;
  archive_reader r(
      [&](uint64_t off, size_t len, uint8_t* out) {
        ++calls;
        ASSERT_LE(off + len, a.size());
        std::memcpy(out, a.data() + off, len);
      },
      a.size());
  size_t const opened = calls;
  bytes out(10);
  r.read(5000, 10, out.data());
  EXPECT_EQ(calls, opened + 1);  // one chunk payload read
  EXPECT_EQ(0, std::memcmp(out.data(), file.data() + 5000, 10));
}

// ------------------------------------------------------------ bad input

TEST(container_test, every_truncation_fails) {
  bytes file = random_bytes(4096 + 300, 21);
  bytes a = archive_of(file);
  for (size_t cut = 0; cut < a.size(); ++cut) {
    bytes t(a.begin(), a.begin() + cut);
    errc e = open_and_read(t);
    ASSERT_NE(e, errc::ok) << "cut at " << cut;
    if (cut >= brv::header_size) {
      ASSERT_EQ(e, errc::truncated) << cut;
    }
  }
}

void flip_every_bit(bytes const& file, bytes const& a, size_t payload_stride) {
  size_t caught = 0;
  size_t const payload_end = a.size() - 32 - 200;
  for (size_t bit = 0; bit < a.size() * 8; ++bit) {
    size_t const byte = bit / 8;
    bool const in_payload = byte >= brv::header_size && byte < payload_end;
    if (in_payload && bit % payload_stride != 0) continue;
    bytes b = a;
    b[byte] ^= static_cast<uint8_t>(1u << (bit % 8));
    try {
      archive_reader r(b);
      bytes back = read_all(r);
      // Only a flip that changes nothing the decoder uses may succeed, and
      // then the bytes must be right.
      ASSERT_EQ(back, file) << "bit " << bit << " decoded wrong bytes";
    } catch (error const&) {
      ++caught;
    }
  }
  EXPECT_GT(caught, 0u);
}

TEST(container_test, every_bit_flip_is_caught_small) {
  bytes file = random_bytes(700, 22);
  flip_every_bit(file, archive_of(file), 1);
}

TEST(container_test, every_bit_flip_is_caught_with_refs) {
  bytes file = random_bytes(4096, 23);
  put_bytes(file, bytes(file));
  put_bytes(file, random_bytes(50, 24));
  flip_every_bit(file, archive_of(file), 61);
}

TEST(container_test, header_checks) {
  bytes a = archive_of(random_bytes(5000, 25));
  auto with = [&](size_t at, uint8_t v) {
    bytes b = a;
    b[at] = v;
    return open_and_read(b);
  };
  EXPECT_EQ(with(0, 0x88), errc::bad_magic);
  EXPECT_EQ(with(3, 'X'), errc::bad_magic);
  EXPECT_EQ(with(4, 2), errc::unsupported_version);
  EXPECT_EQ(with(4, 0), errc::unsupported_version);
  // Bit 0 is Index_Zstd, bit 1 Choice_Records.
  EXPECT_EQ(with(6, 5), errc::reserved_nonzero);
  EXPECT_EQ(with(7, 0x80), errc::reserved_nonzero);
  EXPECT_EQ(with(15, 1), errc::reserved_nonzero);
  EXPECT_EQ(with(11, 0x40), errc::limit);             // a 1 GiB chunk size
  EXPECT_EQ(with(9, 0x00), errc::limit);              // 0 -> below the minimum
  EXPECT_EQ(with(a.size() - 1, 0), errc::truncated);  // end magic
  // A minor version bump is readable; the header is under the index
  // checksum, so flipping it alone is caught there.
  EXPECT_EQ(with(5, 7), errc::checksum);
}

TEST(container_test, forged_indexes_are_rejected) {
  bytes file = random_bytes(4096 * 3, 26);
  put_bytes(file, bytes(file.begin(), file.begin() + 4096));
  bytes a = archive_of(file);
  ASSERT_EQ(open_and_read(forge(a, [](auto&) {})), errc::ok);
  auto expect = [&](errc want, std::function<void(brv::archive_index&)> f) {
    EXPECT_EQ(open_and_read(forge(a, f)), want);
  };
  expect(errc::corrupt, [](auto& x) { x.original_size += 1; });
  expect(errc::corrupt, [](auto& x) { x.original_size = 1ull << 50; });
  expect(errc::corrupt, [](auto& x) {
    x.original_size = 1ull << 50;
    x.regions[0].info.length = 1ull << 50;
  });
  expect(errc::corrupt, [](auto& x) { x.chunks.pop_back(); });
  expect(errc::corrupt, [](auto& x) { x.chunks[0].payload_length += 1; });
  expect(errc::corrupt, [](auto& x) { x.chunks[1].region = 5; });
  expect(errc::corrupt, [](auto& x) { x.chunks[1].program = 9; });
  expect(errc::corrupt, [](auto& x) { x.regions[0].program = 9; });
  expect(errc::corrupt, [](auto& x) {  // overlaps its own chunk
    x.chunks[3].ref_offset = 2 * 4096 + 1;
  });
  expect(errc::corrupt, [](auto& x) {  // a ref to itself
    x.chunks[3].ref_offset = 3 * 4096;
  });
  expect(errc::corrupt, [](auto& x) {  // a ref to a ref
    x.chunks.push_back(x.chunks[3]);
    x.chunks.back().ref_offset = 3 * 4096;
    x.original_size += 4096;
    x.regions[0].info.length += 4096;
  });
  expect(errc::checksum, [](auto& x) { x.chunks[2].checksum ^= 1; });
  expect(errc::checksum, [](auto& x) { x.chunks[3].ref_offset = 4096 + 1; });
  expect(errc::checksum, [](auto& x) { x.original_checksum ^= 1; });
  expect(errc::bad_program,
         [](auto& x) { x.programs[0] = make_leaf(opcode::raw, {1}); });
  expect(errc::bad_program,
         [](auto& x) { x.programs[0] = make_leaf(static_cast<opcode>(99)); });
}

// Hand-built index bytes: counts the encoder would never write.
bytes with_index(bytes const& index, uint32_t chunk_size = 4096,
                 uint16_t flags = 0) {
  bytes out;
  put_bytes(out, brv::magic);
  put_u8(out, 1);
  put_u8(out, 0);
  put_le<uint16_t>(out, flags);
  put_le<uint32_t>(out, chunk_size);
  put_le<uint32_t>(out, 0);
  bytes checked = out;
  put_bytes(checked, index);
  put_bytes(out, index);
  put_le<uint64_t>(out, brv::header_size);
  put_le<uint64_t>(out, index.size());
  put_le<uint64_t>(out, xxh3(checked));
  put_bytes(out, brv::end_magic);
  return out;
}

bytes petabyte_index() {
  bytes ix;
  put_varint(ix, 1ull << 50);  // original size: a petabyte
  put_le<uint64_t>(ix, 0);
  put_varint(ix, 1);  // one program: raw
  put_blob(ix, serialize_program(make_leaf(opcode::raw)));
  put_varint(ix, 1);  // one region covering it
  ix.insert(ix.end(), {0, 0});
  put_varint(ix, 1ull << 50);
  ix.insert(ix.end(), {0, 0, 0});
  put_varint(ix, 1ull << 50);  // 2^50 chunks
  return ix;
}

TEST(container_test, compressed_index_is_bounded_and_checked) {
  uint16_t const z = brv::header_flag_index_zstd;
  // The same absurd index, compressed, fails the same way.
  EXPECT_EQ(
      open_and_read(with_index(brv::pack_index(petabyte_index(), 0), 4096, z)),
      errc::corrupt);
  // Not a zstd frame; a frame with trailing bytes; a cut frame.
  EXPECT_EQ(open_and_read(with_index(petabyte_index(), 4096, z)),
            errc::corrupt);
  bytes two = brv::pack_index(petabyte_index(), 0);
  two.push_back(0);
  EXPECT_EQ(open_and_read(with_index(two, 4096, z)), errc::corrupt);
  bytes cut = brv::pack_index(petabyte_index(), 0);
  cut.resize(cut.size() - 1);
  EXPECT_NE(open_and_read(with_index(cut, 4096, z)), errc{});
  // A small frame that expands past the bound is refused before allocating.
  bytes const zeros(4u << 20, 0);
  bytes bomb(ZSTD_compressBound(zeros.size()));
  bomb.resize(
      ZSTD_compress(bomb.data(), bomb.size(), zeros.data(), zeros.size(), 3));
  EXPECT_EQ(open_and_read(with_index(bomb, 4096, z)), errc::limit);
  // The encoder never writes one: such an index goes in raw blocks.
  bytes const raw = brv::pack_index(zeros, 0);
  EXPECT_GT(raw.size(), zeros.size());
  EXPECT_EQ(brv::unpack_index(raw), zeros);
  EXPECT_EQ(brv::unpack_index(brv::pack_index({}, 0)), bytes{});
  // The encoder's archives use it and read back.
  bytes const file = random_bytes(10000, 8);
  bytes const a = archive_of(file);
  EXPECT_EQ(load_le<uint16_t>(a.data() + 6), z);
}

// A sparse file's archive: thousands of identical zero chunks make an index
// that zstd shrinks far past the decoder's expansion bound; it still reads.
TEST(container_test, index_of_identical_chunks_reads_back) {
  bytes const file(24u << 20, 0);
  bytes const a = archive_of(file, 4096);
  archive_reader r(a);
  EXPECT_EQ(r.chunks().size(), file.size() / 4096);
  bytes const back = read_all(r);
  EXPECT_TRUE(back == file);
}

// An index that weighs in its archive (small tensors: names, shapes and
// checksums) gets the slowest zstd level; next to a large payload a
// faster one. Both unpack to the same bytes.
TEST(container_test, index_level_follows_its_weight) {
  bytes index;
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    std::string const name =
        "model.layers." + std::to_string(i % 97) + ".mlp.weight";
    index.insert(index.end(), name.begin(), name.end());
    for (int k = 0; k < 6; ++k)
      index.push_back(static_cast<uint8_t>(rng() % 7));
  }
  bytes const heavy = brv::pack_index(index, index.size());
  bytes const light = brv::pack_index(index, 1ull << 30);
  EXPECT_LT(heavy.size(), light.size());
  EXPECT_EQ(brv::unpack_index(heavy), index);
  EXPECT_EQ(brv::unpack_index(light), index);
  // Below the payload's size it is light (the slow level cost small files
  // more time than its bytes were worth).
  EXPECT_EQ(brv::pack_index(index, 2 * index.size()), light);
}

TEST(container_test, absurd_counts_fail_fast) {
  EXPECT_EQ(open_and_read(with_index(petabyte_index())), errc::corrupt);
  bytes ix;
  put_varint(ix, 0);
  put_le<uint64_t>(ix, xxh3({}));
  put_varint(ix, 1ull << 40);  // programs
  EXPECT_EQ(open_and_read(with_index(ix)), errc::limit);
  ix.resize(9);
  put_varint(ix, 0);
  put_varint(ix, 1ull << 30);  // regions
  EXPECT_EQ(open_and_read(with_index(ix)), errc::limit);
  ix.resize(10);
  put_varint(ix, 1000);  // regions: under the limit, over the index
  EXPECT_EQ(open_and_read(with_index(ix)), errc::corrupt);
  ix.resize(10);
  put_varint(ix, 0);
  put_varint(ix, 0);  // a valid empty archive
  EXPECT_EQ(open_and_read(with_index(ix)), errc::ok);
  ix.push_back(0);
  EXPECT_EQ(open_and_read(with_index(ix)), errc::corrupt);  // trailing byte
  // Trailer pointing anywhere but just before itself.
  bytes a = archive_of(random_bytes(100, 27));
  for (uint64_t v :
       {uint64_t{0}, uint64_t{15}, uint64_t{1} << 62, ~uint64_t{0}}) {
    bytes b = a;
    store_le<uint64_t>(b.data() + b.size() - 32, v);
    EXPECT_EQ(open_and_read(b), errc::corrupt);
    b = a;
    store_le<uint64_t>(b.data() + b.size() - 24, v);
    EXPECT_EQ(open_and_read(b), errc::corrupt);
  }
}

TEST(container_test, random_bytes_are_rejected) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    bytes b = random_bytes(seed * 7, seed);
    EXPECT_NE(open_and_read(b), errc::ok);
    if (b.size() >= 4) {  // with a good magic and version
      std::copy(brv::magic.begin(), brv::magic.end(), b.begin());
      if (b.size() > 4) b[4] = 1;
      EXPECT_NE(open_and_read(b), errc::ok);
    }
  }
}

// ------------------------------------------------------------ corpora

struct bad_case {
  char const* file;
  errc code;
};
bad_case const bad_cases[] = {
    {"truncated.brv", errc::truncated},
    {"bitflip.brv", errc::checksum},
    {"bad_magic.brv", errc::bad_magic},
    {"future_version.brv", errc::unsupported_version},
    {"reserved_flags.brv", errc::reserved_nonzero},
    {"huge_chunk_size.brv", errc::limit},
    {"petabyte.brv", errc::corrupt},
    {"forward_ref.brv", errc::corrupt},
    {"random.brv", errc::bad_magic},
    {"empty.brv", errc::truncated},
};

fs::path bad_dir() { return fs::path(BREVIS_SOURCE_DIR) / "tests/data/bad"; }

bytes load(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), {});
}

TEST(container_test, bad_inputs_fail_with_their_code) {
  for (bad_case const& c : bad_cases) {
    SCOPED_TRACE(c.file);
    fs::path p = bad_dir() / c.file;
    ASSERT_TRUE(fs::exists(p));
    EXPECT_EQ(open_and_read(load(p)), c.code);
  }
}

// Writes tests/data/bad/ and the valid seeds of the fuzz corpus. Run once by
// hand: container_test --gtest_also_run_disabled_tests
//   --gtest_filter='*generate*'
TEST(container_test, DISABLED_generate_corpora) {
  auto save = [](fs::path const& p, bytes const& b) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<char const*>(b.data()),
               static_cast<std::streamsize>(b.size()));
  };
  bytes file = random_bytes(4096 + 200, 31);
  bytes a = archive_of(file);
  fs::path const bad = bad_dir();
  save(bad / "truncated.brv", bytes(a.begin(), a.begin() + a.size() / 2));
  bytes b = a;
  b[100] ^= 0x10;
  save(bad / "bitflip.brv", b);
  b = a;
  b[1] = 'X';
  save(bad / "bad_magic.brv", b);
  b = a;
  b[4] = 2;
  save(bad / "future_version.brv", b);
  b = a;
  b[6] = 4;  // bit 0 is Index_Zstd, bit 1 Choice_Records
  save(bad / "reserved_flags.brv", b);
  b = a;
  store_le<uint32_t>(b.data() + 8, 1u << 31);
  save(bad / "huge_chunk_size.brv", b);
  save(bad / "petabyte.brv", with_index(petabyte_index()));
  bytes twice(file.begin(), file.begin() + 4096);
  put_bytes(twice, file);
  save(bad / "forward_ref.brv", forge(archive_of(twice), [](auto& x) {
         x.chunks[1].ref_offset = 4096;
       }));
  b = random_bytes(300, 32);
  b[0] = 0;
  save(bad / "random.brv", b);
  save(bad / "empty.brv", {});

  fs::path const seeds =
      fs::path(BREVIS_SOURCE_DIR) / "tests/fuzz/corpus/decode";
  save(seeds / "valid_empty.brv", archive_of({}));
  save(seeds / "valid_one_byte.brv", archive_of(bytes{42}));
  save(seeds / "valid_small.brv", archive_of(random_bytes(300, 33)));
  bytes refs = bytes(4096, 5);
  put_bytes(refs, bytes(4096, 5));
  put_bytes(refs, random_bytes(64, 34));
  save(seeds / "valid_refs.brv", archive_of(refs));
  save(seeds / "valid_safetensors.brv", archive_of(safetensors_file()));
  for (bad_case const& c : bad_cases) {
    fs::copy_file(bad / c.file, seeds / c.file,
                  fs::copy_options::overwrite_existing);
  }
}

}  // namespace
}  // namespace brevis::codec
