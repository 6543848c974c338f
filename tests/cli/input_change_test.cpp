// An input changed by another process while compress reads it. Compress
// maps its input (src/input.h), so it reads the file's pages live: a file
// cut short faults (SIGBUS), and one rewritten in place could mix old and
// new bytes. Either way compress must fail with a message naming the file
// and leave no output, rather than write an archive of bytes it never saw
// whole.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/helpers.h"

namespace brevis::cli_test {
namespace {

// 48 MiB of weights: compress -T1 works on them for a few hundred ms after
// it creates its output's temporary, which happens once the input is mapped.
std::string const& weights() {
  static std::string const data = bf16_weights(size_t{24} << 20, 7);
  return data;
}

// Starts `compress -T1 IN -o OUT EXTRA...` (from `sh -c` after `prelude`,
// when given) and returns once its temporary output exists (the input is
// mapped by then), or the program ended first.
void start_compress(started_program& p, fs::path const& dir, fs::path const& in,
                    fs::path const& out, std::vector<std::string> extra = {},
                    std::string const& prelude = "") {
  std::vector<std::string> argv = {brevis_binary(), "compress", "-T1",
                                   in.string(),     "-o",       out.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (!prelude.empty()) {
    argv.insert(argv.begin(),
                {"/bin/sh", "-c", prelude + "; exec \"$0\" \"$@\""});
  }
  start_program(p, argv);
  ASSERT_GT(p.pid, 0);
  auto const give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (temp_leftovers(dir).empty() && !fs::exists(out) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// 48 MiB of weights in a fresh directory, being compressed (start_compress)
// once this is made.
struct compress_run {
  temp_dir dir;
  fs::path in = dir / "weights.bin";
  fs::path out = dir / "weights.brv";
  started_program p;

  explicit compress_run(std::vector<std::string> extra = {},
                        std::string const& prelude = "") {
    write_file(in, weights());
    start_compress(p, dir.path(), in, out, std::move(extra), prelude);
  }
};

// Compresses 48 MiB of weights, runs `change` on the input once compress is
// reading it, and checks the failure: an error line naming the input (and
// `message`), no output, no temporary left.
void expect_failure_when_changed(
    std::function<void(fs::path const&)> const& change,
    std::string const& message) {
  compress_run run;
  auto& [dir, in, out, p] = run;
  change(in);
  run_result const r = finish_program(p);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err_lines(), 1u) << r.err;
  EXPECT_NE(r.err.find(in.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out)) << "a failed compress left its output";
  EXPECT_TRUE(temp_leftovers(dir.path()).empty());
}

TEST(cli_input_change_test, input_cut_short_while_compressed) {
  // Not at a page's end: the rest of the last page reads as zeros, which
  // only the size check catches.
  expect_failure_when_changed(
      [](fs::path const& in) {
        ASSERT_EQ(::truncate(in.c_str(), 4096 + 100), 0);
      },
      "");
}

TEST(cli_input_change_test, input_rewritten_while_compressed) {
  // The same size, other bytes, as a writer rewriting the file in place.
  expect_failure_when_changed(
      [](fs::path const& in) {
        std::string const other = random_bytes(size_t{1} << 20, 8);
        int const fd = ::open(in.c_str(), O_WRONLY);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(::pwrite(fd, other.data(), other.size(), 8 << 20),
                  static_cast<ssize_t>(other.size()));
        ::close(fd);
      },
      "changed while it was read");
}

// Unchanged, the same file compresses and comes back byte for byte (the
// check does not fail a file merely read).
TEST(cli_input_change_test, unchanged_input_compresses) {
  temp_dir dir;
  fs::path const in = dir / "weights.bin";
  write_file(in, weights().substr(0, size_t{1} << 20));
  run_result const c = brevis({"compress", "-T1", in.string()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  run_result const d = brevis({"decompress", (in.string() + ".brv"), "-o",
                               (dir / "back.bin").string()});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(read_file(dir / "back.bin") == weights().substr(0, 1u << 20));
}

// --rm deletes only the file it read: a new file renamed over the input's
// name meanwhile stays, and the run fails saying so (the archive, of the
// old bytes, is kept).
TEST(cli_input_change_test, rm_keeps_a_file_moved_over_the_input) {
  compress_run run({"--rm"});
  auto& [dir, in, out, p] = run;
  write_file(dir / "new", "a newer file");
  ASSERT_EQ(::rename((dir / "new").c_str(), in.c_str()), 0);
  run_result const r = finish_program(p);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err_lines(), 1u) << r.err;
  EXPECT_NE(r.err.find("now names another file"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::exists(in));
  EXPECT_EQ(read_file(in), "a newer file");
  run_result const d =
      brevis({"decompress", out.string(), "-o", (dir / "back.bin").string()});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(read_file(dir / "back.bin") == weights());
}

// A signal the caller ignores (nohup, a shell's background job) stays
// ignored: SIGINT does not stop the run.
TEST(cli_input_change_test, an_ignored_interrupt_stays_ignored) {
  compress_run run({}, "trap '' INT");
  auto& [dir, in, out, p] = run;
  ASSERT_EQ(::kill(p.pid, SIGINT), 0);
  run_result const r = finish_program(p);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_TRUE(temp_leftovers(dir.path()).empty());
}

// A signal that ends the process by default other than SIGINT, SIGTERM and
// SIGHUP (here SIGXFSZ, a file size limit) also removes the temporary.
TEST(cli_input_change_test, a_file_size_limit_leaves_no_temporary) {
  temp_dir dir;
  fs::path const in = dir / "weights.bin";
  fs::path const out = dir / "weights.brv";
  write_file(in, weights());
  run_result const r = run_program(
      {"/bin/sh", "-c", "ulimit -f 2048; exec \"$0\" \"$@\"", brevis_binary(),
       "compress", in.string(), "-o", out.string()});
  EXPECT_EQ(r.exit_code, 128 + SIGXFSZ) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(temp_leftovers(dir.path()).empty());
}

}  // namespace
}  // namespace brevis::cli_test
