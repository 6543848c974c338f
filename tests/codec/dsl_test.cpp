#include <gtest/gtest.h>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"

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

}  // namespace
}  // namespace brevis::codec
