#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace brevis::codec
