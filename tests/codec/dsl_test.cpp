#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "codec/dsl/scratch.h"

namespace brevis::codec {
namespace {

TEST(dsl_test, unknown_opcode_is_rejected) {
  bytes prog = {200, 0, 0, 0};  // opcode 200, no params, no blob, no kids
  EXPECT_THROW(parse_program(prog), error);
}

TEST(dsl_test, truncated_programs_are_rejected) {
  bytes prog = {1, 5, 1, 2};  // claims 5 params, has 2
  try {
    parse_program(prog);
    FAIL();
  } catch (error const& e) {
    EXPECT_EQ(e.code(), errc::truncated);
  }
}

TEST(dsl_test, absurd_counts_are_limited) {
  bytes prog = {1};
  put_varint(prog, 1ULL << 40);  // parameter count
  try {
    parse_program(prog);
    FAIL();
  } catch (error const& e) {
    EXPECT_EQ(e.code(), errc::limit);
  }
}

TEST(dsl_test, deep_nesting_is_limited) {
  bytes prog;
  for (size_t i = 0; i < max_program_depth + 2; ++i) {
    prog.insert(prog.end(), {4, 0, 0, 1});  // delta, one child
  }
  EXPECT_THROW(parse_program(prog), error);
}

TEST(dsl_test, scratch_buffers_have_the_asked_size_and_are_reused) {
  EXPECT_TRUE(scratch::take(0).empty());
  bytes a = scratch::take(1000);
  ASSERT_EQ(a.size(), 1000u);
  uint8_t const* const p = a.data();
  scratch::give(std::move(a));
  bytes b = scratch::take(500);  // fits the cached buffer: same memory
  EXPECT_EQ(b.size(), 500u);
  EXPECT_EQ(b.data(), p);
  bytes c = scratch::take(4000);  // larger than anything cached
  EXPECT_EQ(c.size(), 4000u);
  scratch::give(std::move(b));
  scratch::give(std::move(c));
}

// A pool lent by a pool_scope serves whichever thread holds it; outside
// the scope a thread has its own again, and nested scopes restore the one
// before. (Sizes no other test caches, so their buffers do not qualify.)
TEST(dsl_test, scratch_pools_lent_to_threads_are_shared_by_them) {
  scratch::pool lent;
  uint8_t const* given = nullptr;
  std::thread([&] {
    scratch::pool_scope const scope(lent);
    bytes a = scratch::take(777777);
    given = a.data();
    scratch::give(std::move(a));
  }).join();
  std::thread([&] {
    bytes own = scratch::take(700000);  // not the lent pool's buffer
    EXPECT_NE(own.data(), given);
    scratch::pool other;
    {
      scratch::pool_scope const outer(lent);
      {
        scratch::pool_scope const inner(other);
        bytes b = scratch::take(700000);  // the other pool has none
        EXPECT_NE(b.data(), given);
        scratch::give(std::move(b));
      }
      bytes c = scratch::take(700000);  // the lent pool again
      EXPECT_EQ(c.data(), given);
      scratch::give(std::move(c));
    }
    scratch::give(std::move(own));
  }).join();
  // Decoders' buffers too.
  uint8_t const* p = nullptr;
  {
    scratch::pool_scope const scope(lent);
    scratch::buffer b = scratch::take_buffer(654321);
    p = b.data.get();
    scratch::give(std::move(b));
  }
  std::thread([&] {
    scratch::pool_scope const again(lent);
    scratch::buffer d = scratch::take_buffer(600000);
    EXPECT_EQ(d.data.get(), p);
    scratch::give(std::move(d));
  }).join();
}

TEST(dsl_test, empty_scratch_buffers_have_room_and_are_reused) {
  bytes a = scratch::take_empty(100000);
  EXPECT_TRUE(a.empty());
  EXPECT_GE(a.capacity(), 100000u);
  a.assign(100000, 7);
  uint8_t const* const p = a.data();
  scratch::give(std::move(a));
  bytes b = scratch::take_empty(70000);  // the cached buffer, emptied
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), p);
  bytes c = scratch::take(90000);  // larger than anything cached now
  EXPECT_EQ(c.size(), 90000u);
  scratch::give(std::move(b));
  scratch::give(std::move(c));
}

// A buffer grown past its length zero-fills the new bytes: take() picks the
// cached buffer that fills fewest (not the smallest one), and take_empty()
// the shortest, keeping the longer ones for take(). (Sizes above what the
// other tests cache, so that their buffers do not qualify.)
TEST(dsl_test, scratch_buffers_are_picked_to_fill_the_fewest_bytes) {
  bytes longer = scratch::take(3900000);  // room for 2^22
  uint8_t const* const p = longer.data();
  bytes shorter;
  shorter.reserve(3950000);  // less room, far shorter
  shorter.resize(10);
  scratch::give(std::move(longer));
  scratch::give(std::move(shorter));
  bytes b = scratch::take(3920000);
  EXPECT_EQ(b.size(), 3920000u);
  EXPECT_EQ(b.data(), p);
  scratch::give(std::move(b));

  bytes full = scratch::take(4000000);  // the long one again
  ASSERT_EQ(full.data(), p);
  bytes empty;
  empty.reserve(size_t{1} << 22);
  empty.resize(10);
  uint8_t const* const q = empty.data();
  scratch::give(std::move(full));
  scratch::give(std::move(empty));
  bytes e = scratch::take_empty(4100000);
  EXPECT_TRUE(e.empty());
  EXPECT_EQ(e.data(), q);
  bytes f = scratch::take(4100000);  // the long one, still cached
  EXPECT_EQ(f.data(), p);
  scratch::give(std::move(e));
  scratch::give(std::move(f));
}

// A cache full of small buffers still keeps a large one (which a file of
// many small tensors would otherwise evict, chunk after chunk).
TEST(dsl_test, scratch_cache_prefers_large_buffers) {
  std::vector<bytes> small;
  for (int i = 0; i < 64; ++i) small.push_back(scratch::take(16));
  for (bytes& b : small) scratch::give(std::move(b));
  bytes big = scratch::take(1u << 20);
  uint8_t const* const p = big.data();
  scratch::give(std::move(big));
  bytes again = scratch::take(1u << 20);
  EXPECT_EQ(again.data(), p);
  scratch::give(std::move(again));
}

// Values pass through reused buffers holding older bytes, and view and split
// decode their children in place: chunks of changing sizes and contents on
// one thread must still roundtrip exactly.
TEST(dsl_test, reused_buffers_do_not_leak_between_chunks) {
  node const planes = make_op(
      opcode::planes, {}, {make_leaf(opcode::rans0), make_leaf(opcode::raw)});
  node const view =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::uint)},
              {planes, make_leaf(opcode::raw)});
  node const split =
      make_op(opcode::split, {100}, {make_leaf(opcode::raw), view});
  uint32_t seed = 1;
  for (size_t size : {70001u, 5u, 4096u, 0u, 65536u, 1u, 99999u, 100u, 101u}) {
    bytes in(size);
    for (uint8_t& v : in) {
      seed = seed * 1664525u + 1013904223u;
      v = static_cast<uint8_t>(seed >> 24);
    }
    EXPECT_TRUE(roundtrips(view, in)) << size;
    EXPECT_TRUE(roundtrips(split, in)) << size;
  }
  // runs and palette write their children into reused buffers too: values
  // of few levels in runs, so both apply, at sizes that shrink and grow.
  auto over_u16 = [](node op) {
    return make_op(opcode::view, {2, static_cast<uint64_t>(meaning::uint)},
                   {std::move(op), make_leaf(opcode::raw)});
  };
  node const runs = over_u16(make_op(
      opcode::runs, {}, {make_leaf(opcode::raw), make_leaf(opcode::rans0)}));
  node const palette = over_u16(make_op(
      opcode::palette, {1}, {make_leaf(opcode::raw), make_leaf(opcode::raw)}));
  for (size_t size : {70001u, 5u, 4096u, 0u, 65536u, 1u, 99999u, 101u}) {
    bytes in(size);
    for (size_t i = 0; i < size; ++i) {
      seed = seed * 1664525u + 1013904223u;
      in[i] = i % 2 == 1 ? 0 : static_cast<uint8_t>((i / 64 + seed % 2) % 9);
    }
    EXPECT_TRUE(roundtrips(runs, in)) << size;
    EXPECT_TRUE(roundtrips(palette, in)) << size;
  }
}

// A leaf writes straight into the payload after room for its length guessed
// from its input's; every guess, right or wrong either way, must leave the
// payload framed as varint(length) then the bytes.
TEST(dsl_test, leaf_payloads_are_framed_whatever_the_length_guess) {
  uint32_t seed = 7;
  auto noise = [&](size_t n) {
    bytes b(n);
    for (uint8_t& v : b) {
      seed = seed * 1664525u + 1013904223u;
      v = static_cast<uint8_t>(seed >> 24);
    }
    return b;
  };
  auto expect_framed = [](bytes const& payload, size_t prefix) {
    byte_reader r(byte_view(payload).subspan(prefix));
    uint64_t const length = r.varint();
    EXPECT_EQ(length, r.remaining());
  };
  // raw: the guess is right.
  for (size_t size : {0u, 1u, 127u, 128u, 300u, 16383u, 16384u, 16385u}) {
    bytes const in = noise(size);
    bytes payload;
    encode_chunk(make_leaf(opcode::raw), in, payload);
    bytes expected;
    put_blob(expected, in);
    EXPECT_EQ(payload, expected) << size;
  }
  // constant: 200 bytes in (2 varint bytes), 1 out (1 byte), after a prefix.
  bytes payload = {9, 9};
  node const constant = make_leaf(opcode::constant);
  encode_chunk(constant, bytes(200, 5), payload);
  EXPECT_EQ(payload, (bytes{9, 9, 1, 5}));
  bytes back(200);
  decode_chunk(constant, byte_view(payload).subspan(2), back.size(),
               back.data());
  EXPECT_EQ(back, bytes(200, 5));
  // zstd on noise expands: 120 bytes in (1 varint byte), over 127 out (2).
  node const zstd = make_leaf(opcode::zstd, {1});
  for (size_t size : {120u, 127u, 16370u, 16383u}) {
    bytes const in = noise(size);
    payload = {9};
    encode_chunk(zstd, in, payload);
    EXPECT_GT(payload.size(), size + 1);
    expect_framed(payload, 1);
    back.assign(size, 0);
    decode_chunk(zstd, byte_view(payload).subspan(1), size, back.data());
    EXPECT_EQ(back, in) << size;
  }
  // A leaf that refuses leaves the payload as it was.
  payload = {9, 9};
  EXPECT_THROW(encode_chunk(constant, noise(300), payload), error);
  EXPECT_EQ(payload, (bytes{9, 9}));
}

// view at a program's root slices the chunk itself (encode_view): the
// payload is its children's, lanes then tail.
TEST(dsl_test, view_at_the_root_slices_the_chunk) {
  node const view =
      make_op(opcode::view, {4, static_cast<uint64_t>(meaning::uint)},
              {make_leaf(opcode::raw), make_leaf(opcode::raw)});
  for (size_t size : {0u, 3u, 4u, 4099u, 70001u}) {
    bytes in(size);
    for (size_t i = 0; i < size; ++i) in[i] = static_cast<uint8_t>(i * 7);
    bytes payload;
    encode_chunk(view, in, payload);
    size_t const whole = size / 4 * 4;
    bytes expected;
    put_blob(expected, byte_view(in).first(whole));
    put_blob(expected, byte_view(in).subspan(whole));
    EXPECT_EQ(payload, expected) << size;
    EXPECT_TRUE(roundtrips(view, in)) << size;
  }
}

// Under a view at the root, fields and planes read the chunk in place
// (encode_view): the same children as from a stream, and programs over
// them roundtrip at sizes that leave a tail.
TEST(dsl_test, encode_view_gives_the_children_encode_gives) {
  value_type const bf16{2, meaning::bf16};
  bytes in(2 * 4099);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = static_cast<uint8_t>(i * 37 + (i >> 3));
  }
  for (opcode op : {opcode::fields, opcode::planes}) {
    node const n =
        op == opcode::fields
            ? make_op(op, {},
                      {make_leaf(opcode::raw), make_leaf(opcode::raw),
                       make_leaf(opcode::raw)})
            : make_op(op, {}, {make_leaf(opcode::raw), make_leaf(opcode::raw)});
    std::vector<stream> from_stream, from_view;
    bytes side_a, side_b;
    op_for(op).encode(n, stream{in, bf16}, from_stream, side_a);
    op_for(op).encode_view(n, in, bf16, from_view, side_b);
    ASSERT_EQ(from_stream.size(), from_view.size());
    for (size_t i = 0; i < from_view.size(); ++i) {
      EXPECT_EQ(from_stream[i].data, from_view[i].data) << i;
      EXPECT_EQ(from_stream[i].type, from_view[i].type) << i;
    }
    EXPECT_EQ(side_a, side_b);
    node const root =
        make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
                {n, make_leaf(opcode::raw)});
    node const split =
        make_op(opcode::split, {100}, {make_leaf(opcode::raw), root});
    for (size_t size : {0u, 1u, 2u, 3u, 4097u, 8198u, 65537u}) {
      bytes v(size);
      for (size_t i = 0; i < size; ++i)
        v[i] = static_cast<uint8_t>(i ^ (i >> 7));
      EXPECT_TRUE(roundtrips(root, v)) << size;
      EXPECT_TRUE(roundtrips(split, v)) << size;
    }
  }
}

TEST(dsl_test, uninitialized_scratch_buffers_hold_the_size_and_are_reused) {
  scratch::buffer a = scratch::take_buffer(1000);
  ASSERT_TRUE(a.data);
  EXPECT_GE(a.capacity, 1000u);
  uint8_t* const p = a.data.get();
  std::memset(p, 7, 1000);  // the whole size is writable
  scratch::give(std::move(a));
  scratch::buffer b = scratch::take_buffer(600);  // fits: the same memory
  EXPECT_EQ(b.data.get(), p);
  scratch::buffer c = scratch::take_buffer(0);  // an empty value still works
  EXPECT_TRUE(c.data);
  scratch::give(std::move(b));
  scratch::give(std::move(c));
}

// Raw children of operators that interleave (planes, fields, palette) are
// read in place from the payload: every length, odd tails and empty values
// roundtrip, and a raw child whose framed length is off is rejected.
TEST(dsl_test, raw_children_are_read_in_place) {
  node const planes =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::uint)},
              {make_op(opcode::planes, {},
                       {make_leaf(opcode::raw), make_leaf(opcode::raw)}),
               make_leaf(opcode::raw)});
  node const fields =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_op(opcode::fields, {},
                       {make_leaf(opcode::raw), make_leaf(opcode::rans0),
                        make_leaf(opcode::raw)}),
               make_leaf(opcode::raw)});
  node const palette =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::uint)},
              {make_op(opcode::palette, {1},
                       {make_leaf(opcode::raw), make_leaf(opcode::raw)}),
               make_leaf(opcode::raw)});
  uint32_t seed = 3;
  for (size_t size = 0; size <= 4099; ++size) {
    bytes in(size);
    for (size_t i = 0; i < size; ++i) {
      seed = seed * 1664525u + 1013904223u;
      in[i] = i % 2 == 1 ? static_cast<uint8_t>(seed >> 29)
                         : static_cast<uint8_t>(seed >> 24);
    }
    ASSERT_TRUE(roundtrips(planes, in)) << size;
    ASSERT_TRUE(roundtrips(fields, in)) << size;
    bytes few = in;  // palette needs few levels
    for (uint8_t& v : few) v &= 3;
    ASSERT_TRUE(roundtrips(palette, few)) << size;
  }
  bytes const in{1, 2, 3, 4};
  bytes payload;
  encode_chunk(planes, in, payload);
  // Two raw planes of two bytes, then the view's empty tail.
  ASSERT_EQ(payload, (bytes{2, 1, 3, 2, 2, 4, 0}));
  bytes out(in.size());
  decode_chunk(planes, payload, out.size(), out.data());
  EXPECT_EQ(out, in);
  for (uint8_t wrong : {0, 1, 3}) {
    bytes bad = payload;
    bad[0] = wrong;
    EXPECT_THROW(decode_chunk(planes, bad, out.size(), out.data()), error)
        << int{wrong};
  }
}

// `levels` runs nested on their values: on bytes with no two neighbours
// equal, each level's children take 5 bytes a byte (the values, and a u32
// length of 1 each).
node nested_runs(size_t levels) {
  node n = make_leaf(opcode::raw);
  for (size_t i = 0; i < levels; ++i) {
    n = make_op(opcode::runs, {}, {std::move(n), make_leaf(opcode::raw)});
  }
  return n;
}

// Last: it leaves large buffers in the scratch cache, which the reuse
// tests above would pick up.
TEST(dsl_test, the_encoder_refuses_programs_the_decoder_would_refuse) {
  // 1 MiB: the decoder allows 65 MiB of intermediate values, 13 levels'
  // worth exactly; a 14th asks for 70.
  bytes in(size_t{1} << 20);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i % 7);
  ASSERT_EQ(decode_budget(in.size()), size_t{13} * 5 * in.size());
  EXPECT_TRUE(roundtrips(nested_runs(13), in));
  bytes payload;
  try {
    encode_chunk(nested_runs(14), in, payload);
    FAIL() << "a payload no decoder accepts was written";
  } catch (error const& e) {
    EXPECT_EQ(e.code(), errc::limit) << e.what();
  }
  EXPECT_FALSE(roundtrips(nested_runs(14), in));  // a refusal, not a throw
}

}  // namespace
}  // namespace brevis::codec
