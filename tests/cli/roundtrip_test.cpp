// compress -> decompress through the real binary is byte-identical, for
// generated files and for files written by numpy and torch.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/helpers.h"

namespace brevis::cli_test {
namespace {

// Compresses `name` (holding `data`) in `dir`, decompresses to NAME.out and
// checks the bytes.
void expect_roundtrip(temp_dir const& dir, std::string const& name,
                      std::string const& data,
                      std::vector<std::string> extra = {}) {
  fs::path const in = dir / name;
  write_file(in, data);
  std::vector<std::string> args = {"compress", in.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  run_result c = brevis(args);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.err, "");
  ASSERT_TRUE(fs::exists(in.string() + ".brv"));
  EXPECT_TRUE(fs::exists(in)) << "compress keeps its input by default";
  fs::path const out = dir / (name + ".out");
  run_result d =
      brevis({"decompress", in.string() + ".brv", "-o", out.string()});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(read_file(out) == data) << name << " differs after roundtrip";
  EXPECT_TRUE(temp_leftovers(dir.path()).empty());
}

TEST(cli_roundtrip_test, random_bytes) {
  temp_dir dir;
  expect_roundtrip(dir, "random.bin", random_bytes(300000, 1));
}

TEST(cli_roundtrip_test, empty_file) {
  temp_dir dir;
  expect_roundtrip(dir, "empty.bin", "");
}

TEST(cli_roundtrip_test, small_chunks_and_threads) {
  temp_dir dir;
  expect_roundtrip(dir, "w.bin", bf16_weights(100000, 2),
                   {"--chunk-size", "4K", "-T", "2"});
  expect_roundtrip(dir, "w1.bin", bf16_weights(50000, 3),
                   {"--chunk-size", "16KiB", "-T", "1"});
}

// At -T1 the loops run on the calling thread without TBB (src/parallel.h):
// the same bytes as at -T2, and a damaged chunk still fails the run after
// the chunks before it, leaving no output.
TEST(cli_roundtrip_test, one_thread_matches_two_and_fails_cleanly) {
  temp_dir dir;
  std::string const data = bf16_weights(60000, 11);
  fs::path const in = dir / "w.bin";
  write_file(in, data);
  for (char const* threads : {"1", "2"}) {
    fs::path const archive = dir / (std::string("w") + threads + ".brv");
    ASSERT_EQ(brevis({"compress", in.string(), "-o", archive.string(),
                      "--chunk-size", "4K", "-T", threads})
                  .exit_code,
              0);
    for (char const* back : {"1", "2"}) {
      fs::path const out = dir / (std::string("w.out") + threads + back);
      run_result d = brevis(
          {"decompress", archive.string(), "-o", out.string(), "-T", back});
      ASSERT_EQ(d.exit_code, 0) << d.err;
      EXPECT_TRUE(read_file(out) == data) << threads << " -> " << back;
    }
    EXPECT_EQ(brevis({"verify", archive.string(), "-T", "1"}).exit_code, 0);
  }
  // A byte in the middle of the payloads (30 chunks of 4 KiB) flipped.
  std::string damaged = read_file(dir / "w1.brv");
  damaged[damaged.size() / 3] ^= 0x5a;
  write_file(dir / "bad.brv", damaged);
  run_result d = brevis({"decompress", (dir / "bad.brv").string(), "-o",
                         (dir / "bad.out").string(), "-T", "1"});
  EXPECT_EQ(d.exit_code, 1) << d.err;
  EXPECT_FALSE(fs::exists(dir / "bad.out"));
  EXPECT_EQ(brevis({"verify", (dir / "bad.brv").string(), "-T", "1"}).exit_code,
            1);
  EXPECT_TRUE(temp_leftovers(dir.path()).empty());
}

TEST(cli_roundtrip_test, safetensors_made_here) {
  temp_dir dir;
  std::string st = make_safetensors({
      {"embed.weight", "BF16", {256, 128}, bf16_weights(256 * 128, 4)},
      {"norm.weight", "F32", {1000}, random_bytes(4000, 5)},
      {"odd.bias", "U8", {77}, random_bytes(77, 6)},
      {"empty", "F16", {0}, ""},
  });
  expect_roundtrip(dir, "model.safetensors", st);
}

// --reproducible: the same archive bytes at -T1 and -T2, whatever the
// machine's speed; every region's choice record says 0 ms. Without it the
// time spent choosing is recorded (the search runs on these tensors).
TEST(cli_roundtrip_test, reproducible_archives_at_any_thread_count) {
  temp_dir dir;
  std::string const st = make_safetensors({
      {"a.weight", "BF16", {128, 96}, bf16_weights(128 * 96, 21)},
      {"b.weight", "BF16", {96, 64}, bf16_weights(96 * 64, 22)},
      {"c.weight", "F32", {3000}, random_bytes(12000, 23)},
      {"d.bias", "U8", {333}, random_bytes(333, 24)},
  });
  fs::path const in = dir / "m.safetensors";
  write_file(in, st);
  auto archive = [&](char const* threads, bool reproducible) {
    fs::path const out =
        dir / (std::string("m") + threads + (reproducible ? "r" : "") + ".brv");
    std::vector<std::string> args = {
        "compress", in.string(), "-o", out.string(),   "-T",
        threads,    "-k",        "-f", "--chunk-size", "8K"};
    if (reproducible) args.emplace_back("--reproducible");
    run_result const r = brevis(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  };
  std::string const one = read_file(archive("1", true));
  EXPECT_TRUE(one == read_file(archive("2", true)));
  EXPECT_TRUE(one == read_file(archive("1", true)));

  // inspect's ms column: 0 in every region row of the reproducible archive;
  // more than 0 somewhere in the default one.
  auto ms_column = [&](fs::path const& a) {
    run_result const r = brevis({"inspect", a.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // The column is right-aligned under its heading; names and programs
    // may hold spaces, so it is found by position, not by counting words.
    std::vector<double> ms;
    std::istringstream lines(r.out);
    std::string line;
    size_t end = std::string::npos;  // one past the column's last character
    while (std::getline(lines, line)) {
      if (end == std::string::npos) {
        size_t const at = line.find("  ms  ");
        if (line.rfind("region", 0) == 0 && at != std::string::npos) {
          end = at + 4;
        }
        continue;
      }
      if (line.rfind("total", 0) == 0) break;
      EXPECT_GT(line.size(), end) << line;
      if (line.size() <= end) continue;
      size_t const begin = line.rfind(' ', end - 1) + 1;
      ms.push_back(std::stod(line.substr(begin, end - begin)));
    }
    return ms;
  };
  std::vector<double> const zero = ms_column(dir / "m1r.brv");
  ASSERT_GE(zero.size(), 4u);
  for (double v : zero) EXPECT_EQ(v, 0.0);
  std::vector<double> const timed = ms_column(archive("1", false));
  ASSERT_EQ(timed.size(), zero.size());
  EXPECT_GT(*std::max_element(timed.begin(), timed.end()), 0.0);
  expect_roundtrip(dir, "again.safetensors", st, {"--reproducible"});

  run_result const both =
      brevis({"compress", in.string(), "-o", (dir / "x.brv").string(),
              "--reproducible", "--search-ms", "5"});
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--search-ms"), std::string::npos) << both.err;
  // 0 ms is no limit: accepted.
  EXPECT_EQ(
      brevis({"compress", in.string(), "-f", "-o", (dir / "y.brv").string(),
              "--reproducible", "--search-ms", "0"})
          .exit_code,
      0);
}

// Classes (the default): a bf16 tensor whose output channels (columns)
// carry 8 scales is coded by classes of columns, across chunks that hold
// whole class cycles; --no-classes codes it with one program.
TEST(cli_roundtrip_test, classes_by_default_and_no_classes) {
  temp_dir dir;
  size_t const rows = 256, cols = 128;
  std::string w = bf16_weights(rows * cols, 7);
  for (size_t i = 0; i < rows * cols; ++i) {
    // Raise the exponent field (bits 7-14 of the little-endian word) by the
    // column's scale step; the weights' exponents leave room for 7 more.
    auto const lo = static_cast<uint8_t>(w[2 * i]);
    auto const hi = static_cast<uint8_t>(w[2 * i + 1]);
    auto word = static_cast<uint16_t>(lo | hi << 8);
    word = static_cast<uint16_t>(word + ((i % cols) % 8 << 7));
    w[2 * i] = static_cast<char>(word & 0xff);
    w[2 * i + 1] = static_cast<char>(word >> 8);
  }
  std::string const st =
      make_safetensors({{"conv.weight", "BF16", {rows, cols}, w}});
  expect_roundtrip(dir, "scaled.safetensors", st, {"--chunk-size", "16K"});
  run_result const on =
      brevis({"inspect", (dir / "scaled.safetensors.brv").string()});
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("classes"), std::string::npos) << on.out;
  expect_roundtrip(dir, "plain.safetensors", st,
                   {"--no-classes", "--chunk-size", "16K"});
  run_result const off =
      brevis({"inspect", (dir / "plain.safetensors.brv").string()});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(off.out.find("classes"), std::string::npos) << off.out;
  EXPECT_LT(fs::file_size(dir / "scaled.safetensors.brv"),
            fs::file_size(dir / "plain.safetensors.brv"));
}

TEST(cli_roundtrip_test, default_names_and_decompress_shortcut) {
  temp_dir dir;
  std::string data = bf16_weights(20000, 7);
  write_file(dir / "m.bin", data);
  ASSERT_EQ(brevis({"compress", (dir / "m.bin").string()}).exit_code, 0);
  fs::remove(dir / "m.bin");
  run_result d = brevis({"-d", (dir / "m.bin.brv").string()});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(read_file(dir / "m.bin") == data);
  EXPECT_TRUE(fs::exists(dir / "m.bin.brv")) << "archives are kept";
}

TEST(cli_roundtrip_test, rm_removes_input_after_success) {
  temp_dir dir;
  std::string data = random_bytes(5000, 8);
  write_file(dir / "x", data);
  ASSERT_EQ(brevis({"compress", "--rm", (dir / "x").string()}).exit_code, 0);
  EXPECT_FALSE(fs::exists(dir / "x"));
  ASSERT_EQ(brevis({"decompress", "--rm", (dir / "x.brv").string()}).exit_code,
            0);
  EXPECT_FALSE(fs::exists(dir / "x.brv"));
  EXPECT_TRUE(read_file(dir / "x") == data);
}

// --rm deletes a regular input only, once its output is a file of its own:
// with -k, to stdout or a device, the input stays; a FIFO or a symlink is
// refused before anything is written.
TEST(cli_roundtrip_test, rm_keeps_what_it_may_not_remove) {
  temp_dir dir;
  std::string const data = bf16_weights(20000, 3);
  std::string const x = (dir / "x").string();
  write_file(x, data);
  run_result const k = brevis({"compress", "--rm", "-k", x});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  EXPECT_TRUE(fs::exists(x)) << "-k overrides --rm";
  for (std::vector<std::string> to : {std::vector<std::string>{"-c"},
                                      {"-o", "/dev/stdout"},
                                      {"-o", "/dev/null"}}) {
    std::vector<std::string> args = {"compress", "-f", "--rm", x};
    args.insert(args.end(), to.begin(), to.end());
    run_result const r = brevis(args, "/dev/null", "/dev/null");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(x)) << to.back();
  }
  // A name of stdout itself, stdout being a file: written there, the input
  // kept (a temporary renamed over it would have replaced the link).
  std::string const piped = (dir / "piped.brv").string();
  run_result const s =
      brevis({"compress", "-f", "--rm", x, "-o", "/proc/self/fd/1"},
             "/dev/null", piped);
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_TRUE(fs::exists(x));
  run_result const back = brevis({"decompress", "-c", piped});
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_TRUE(back.out == data);

  fs::path const fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::path const link = dir / "link";
  fs::create_symlink(x, link);
  for (fs::path const& p : {fifo, link}) {
    fs::path const out = dir / "refused.brv";
    run_result const r =
        brevis({"compress", "--rm", p.string(), "-o", out.string()});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err_lines(), 1u) << r.err;
    EXPECT_NE(r.err.find("regular files only"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << p;
    EXPECT_TRUE(fs::exists(fs::symlink_status(p))) << p;
  }
  EXPECT_TRUE(read_file(x) == data);
}

// Bytes come from where they are: stdin from where the caller left it (as
// zstd reads it), and a file whose size says 0 (/proc's) by reading it.
TEST(cli_roundtrip_test, stdin_part_read_and_files_sized_zero) {
  temp_dir dir;
  std::string const data = bf16_weights(20000, 4);
  std::string const in = (dir / "in").string();
  write_file(in, data);
  std::string const b = brevis_binary();
  run_result const r = run_program(
      {"/bin/sh", "-c",
       "{ dd bs=1000 count=1 of=/dev/null status=none; \"$0\" compress -c "
       "-; } < \"$1\" | \"$0\" decompress -c -",
       b, in});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == data.substr(1000));
  std::string const version = read_file("/proc/version");
  ASSERT_FALSE(version.empty());
  std::string const v = (dir / "version.brv").string();
  ASSERT_EQ(brevis({"compress", "/proc/version", "-o", v}).exit_code, 0);
  run_result const d = brevis({"decompress", "-c", v});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, version);
}

// Archives do not concatenate: -c takes one input.
TEST(cli_roundtrip_test, several_inputs_to_stdout_are_refused) {
  temp_dir dir;
  write_file(dir / "a", random_bytes(1000, 1));
  write_file(dir / "b", random_bytes(1000, 2));
  run_result const r =
      brevis({"compress", "-c", (dir / "a").string(), (dir / "b").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err_lines(), 1u) << r.err;
  EXPECT_TRUE(r.out.empty());
}

// The output gets the input's owner and group where it may, and the setuid
// and setgid bits and group permissions only with them: a setuid file of
// root's compressed by another user does not become a setuid file of
// theirs. (As root: run as nobody through setpriv.)
TEST(cli_roundtrip_test, the_output_keeps_the_owner_or_loses_setuid) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to own files as others";
  temp_dir dir;
  ::chmod(dir.path().c_str(), 0777);
  std::string const x = (dir / "x").string();
  write_file(x, random_bytes(3000, 5));
  ASSERT_EQ(::chown(x.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(x.c_str(), 04750), 0);
  ASSERT_EQ(brevis({"compress", x}).exit_code, 0);
  struct stat st {};
  ASSERT_EQ(::stat((x + ".brv").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_gid, 65534u);
  EXPECT_EQ(st.st_mode & 07777, 04750u);

  std::string const y = (dir / "y").string();
  write_file(y, random_bytes(3000, 6));
  ASSERT_EQ(::chmod(y.c_str(), 06755), 0);  // root's
  // `compress IN -o IN.brv` as nobody, in the supplementary groups given.
  auto compress_as_nobody = [&](std::string const& in,
                                std::string const& groups) {
    run_result const r = run_program({"/usr/bin/setpriv", "--reuid=65534",
                                      "--regid=65534", groups, brevis_binary(),
                                      "compress", in, "-o", in + ".brv"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ::stat((in + ".brv").c_str(), &st) == 0;
  };
  ASSERT_TRUE(compress_as_nobody(y, "--clear-groups"));
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_mode & 07777, 0705u);

  // The group alone, where the caller may give the file to it.
  std::string const z = (dir / "z").string();
  write_file(z, random_bytes(3000, 7));
  ASSERT_EQ(::chown(z.c_str(), 1000, 1234), 0);
  ASSERT_EQ(::chmod(z.c_str(), 0664), 0);
  ASSERT_TRUE(compress_as_nobody(z, "--groups=1234"));
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_gid, 1234u);
  EXPECT_EQ(st.st_mode & 07777, 0664u);
}

// The count -v reports of chunks compress decoded back before writing.
size_t chunks_decoded_back(std::string const& err) {
  size_t const end = err.find(" chunks decoded back");
  if (end == std::string::npos) return SIZE_MAX;
  size_t begin = end;
  while (begin > 0 && err[begin - 1] >= '0' && err[begin - 1] <= '9') --begin;
  if (begin == end) return SIZE_MAX;
  return std::stoul(err.substr(begin, end - begin));
}

TEST(cli_roundtrip_test, compress_decodes_back_with_verify_or_rm) {
  temp_dir dir;
  std::string const data = bf16_weights(40000, 11);  // 80 KB: 5 chunks
  std::string const x = (dir / "x").string();
  write_file(x, data);
  std::vector<std::string> const base = {"compress",     "-v",  "-f",
                                         "--chunk-size", "16K", x};
  run_result plain = brevis(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(chunks_decoded_back(plain.err), 0u) << plain.err;

  std::vector<std::string> args = base;
  args.push_back("--verify");
  run_result checked = brevis(args);
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  size_t const n = chunks_decoded_back(checked.err);
  EXPECT_GE(n, 4u) << checked.err;  // those not left to the fallback
  EXPECT_LE(n, 5u) << checked.err;

  args = base;
  args.push_back("--rm");
  run_result removed = brevis(args);
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_EQ(chunks_decoded_back(removed.err), n) << removed.err;
  EXPECT_FALSE(fs::exists(x));
  run_result d = brevis({"decompress", x + ".brv"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(read_file(x) == data);
}

TEST(cli_roundtrip_test, stdin_and_stdout) {
  temp_dir dir;
  std::string data = bf16_weights(40000, 9);
  write_file(dir / "in", data);
  run_result c = brevis({"compress", "-"}, (dir / "in").string(),
                        (dir / "a.brv").string());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  run_result d = brevis({"decompress", "-"}, (dir / "a.brv").string(),
                        (dir / "back").string());
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(read_file(dir / "back") == data);
  // -c writes a named file's result to stdout; -o - does the same.
  run_result c2 = brevis({"compress", "-c", (dir / "in").string()}, "/dev/null",
                         (dir / "b.brv").string());
  ASSERT_EQ(c2.exit_code, 0) << c2.err;
  run_result d2 = brevis({"decompress", (dir / "b.brv").string(), "-o", "-"});
  ASSERT_EQ(d2.exit_code, 0) << d2.err;
  EXPECT_TRUE(d2.out == data);
  EXPECT_FALSE(fs::exists(dir / "b"));
}

// stdin as a pipe (not a regular file): read until it ends into a buffer
// that grows, here past its first 2 MiB, both to compress and to decompress.
TEST(cli_roundtrip_test, stdin_from_a_pipe) {
  temp_dir dir;
  std::string const data = bf16_weights(1800000, 13);  // 3.6 MB
  write_file(dir / "in", data);
  std::string const b = brevis_binary();
  std::string const in = (dir / "in").string();
  std::string const back = (dir / "back").string();
  run_result r = run_program({"/bin/sh", "-c",
                              "cat '" + in + "' | '" + b +
                                  "' compress -T2 -f - | cat | '" + b +
                                  "' decompress -T2 - > '" + back + "'"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_file(back) == data);
  run_result e = run_program(
      {"/bin/sh", "-c", "printf '' | '" + b + "' decompress - > /dev/null"});
  EXPECT_NE(e.exit_code, 0);
  EXPECT_EQ(e.err_lines(), 1u) << e.err;
}

// An existing FIFO (like /dev/null, a device) is written in place, with or
// without -f: never replaced by a regular file.
TEST(cli_roundtrip_test, output_to_a_fifo_is_written_in_place) {
  temp_dir dir;
  std::string const data = bf16_weights(30000, 5);
  write_file(dir / "in", data);
  ASSERT_EQ(brevis({"compress", (dir / "in").string()}).exit_code, 0);
  fs::path const fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (bool force : {false, true}) {
    std::string got;
    std::thread reader([&] { got = read_file(fifo); });
    std::vector<std::string> args = {"decompress", (dir / "in.brv").string(),
                                     "-o", fifo.string()};
    if (force) args.push_back("-f");
    run_result const d = brevis(args);
    reader.join();
    EXPECT_EQ(d.exit_code, 0) << d.err;
    EXPECT_TRUE(got == data);
    EXPECT_TRUE(fs::is_fifo(fifo));
  }
}

TEST(cli_roundtrip_test, multiple_files) {
  temp_dir dir;
  std::vector<std::string> names = {"a.bin", "b.bin", "c.bin"};
  std::vector<std::string> args = {"compress"};
  for (size_t i = 0; i < names.size(); ++i) {
    write_file(dir / names[i], random_bytes(1000 * (i + 1), 10 + i));
    args.push_back((dir / names[i]).string());
  }
  ASSERT_EQ(brevis(args).exit_code, 0);
  std::vector<std::string> dargs = {"decompress", "-f"};
  for (auto const& n : names) dargs.push_back((dir / (n + ".brv")).string());
  ASSERT_EQ(brevis(dargs).exit_code, 0);
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(read_file(dir / names[i]) ==
                random_bytes(1000 * (i + 1), 10 + i));
  }
}

TEST(cli_roundtrip_test, one_missing_file_does_not_stop_the_others) {
  temp_dir dir;
  write_file(dir / "ok", "hello");
  run_result c =
      brevis({"compress", (dir / "missing").string(), (dir / "ok").string()});
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_EQ(c.err_lines(), 1u) << c.err;
  EXPECT_NE(c.err.find("missing"), std::string::npos) << c.err;
  EXPECT_TRUE(fs::exists(dir / "ok.brv"));
}

TEST(cli_roundtrip_test, refuses_overwrite_without_force) {
  temp_dir dir;
  std::string data = random_bytes(4000, 20);
  write_file(dir / "f", data);
  write_file(dir / "f.brv", "precious");
  run_result c = brevis({"compress", (dir / "f").string()});
  EXPECT_NE(c.exit_code, 0);
  EXPECT_EQ(c.err_lines(), 1u) << c.err;
  EXPECT_EQ(read_file(dir / "f.brv"), "precious");
  EXPECT_TRUE(temp_leftovers(dir.path()).empty());

  run_result f = brevis({"compress", "-f", (dir / "f").string()});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(read_file(dir / "f.brv"), "precious");

  // decompress onto the existing original: refused, then forced.
  write_file(dir / "f", "also precious");
  run_result d = brevis({"decompress", (dir / "f.brv").string()});
  EXPECT_NE(d.exit_code, 0);
  EXPECT_NE(d.err.find("f.brv"), std::string::npos) << d.err;
  EXPECT_EQ(read_file(dir / "f"), "also precious");
  run_result df = brevis({"decompress", "-f", (dir / "f.brv").string()});
  ASSERT_EQ(df.exit_code, 0) << df.err;
  EXPECT_TRUE(read_file(dir / "f") == data);
  EXPECT_TRUE(temp_leftovers(dir.path()).empty());
}

TEST(cli_roundtrip_test, refuses_unknown_suffix_without_output) {
  temp_dir dir;
  write_file(dir / "x", "data");
  ASSERT_EQ(brevis({"compress", (dir / "x").string()}).exit_code, 0);
  fs::rename(dir / "x.brv", dir / "x.archive");
  run_result d = brevis({"decompress", (dir / "x.archive").string()});
  EXPECT_NE(d.exit_code, 0);
  EXPECT_NE(d.err.find("x.archive"), std::string::npos);
  run_result o = brevis(
      {"decompress", (dir / "x.archive").string(), "-o", (dir / "y").string()});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(read_file(dir / "y"), "data");
}

TEST(cli_roundtrip_test, npy_written_by_numpy) {
  if (!python_has("numpy")) GTEST_SKIP() << "no numpy in /usr/bin/python3";
  temp_dir dir;
  fs::path const npy = dir / "a.npy";
  run_result py = run_program({"/usr/bin/python3", "-c",
                               "import numpy as np, sys\n"
                               "r = np.random.default_rng(1)\n"
                               "np.save(sys.argv[1], r.standard_normal((300, "
                               "70)).astype(np.float32))\n",
                               npy.string()});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  expect_roundtrip(dir, "b.npy", read_file(npy));
}

TEST(cli_roundtrip_test, pt_written_by_torch) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  temp_dir dir;
  fs::path const pt = dir / "m.pt";
  run_result py = run_program(
      {"/usr/bin/python3", "-c",
       "import torch, sys\n"
       "torch.manual_seed(0)\n"
       "sd = {'w': torch.randn(128, 96).to(torch.bfloat16),\n"
       "      'b': torch.randn(96), 'n': torch.arange(10, dtype=torch.int64),\n"
       "      'h': torch.randn(33, 7).half()}\n"
       "torch.save(sd, sys.argv[1])\n",
       pt.string()});
  // One interpreter start (importing torch takes seconds): skip on import
  // failure rather than probing first.
  if (py.exit_code != 0 &&
      py.err.find("No module named") != std::string::npos) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  }
  ASSERT_EQ(py.exit_code, 0) << py.err;
  expect_roundtrip(dir, "copy.pt", read_file(pt));
}

// numpy writes a safetensors file; after the CLI roundtrip numpy parses the
// copy and compares every array with the originals it regenerates.
TEST(cli_roundtrip_test, safetensors_read_back_by_numpy) {
  if (!python_has("numpy")) GTEST_SKIP() << "no numpy in /usr/bin/python3";
  temp_dir dir;
  std::string const script =
      "import json, struct, sys\n"
      "import numpy as np\n"
      "def arrays():\n"
      "  r = np.random.default_rng(7)\n"
      "  w = (r.standard_normal((200, 64)).astype(np.float32) * 0.02)\n"
      "  bf = (w.view(np.uint32) >> 16).astype(np.uint16)\n"
      "  return {'layer.0.w': ('BF16', bf, w.shape),\n"
      "          'layer.0.b': ('F32', "
      "r.standard_normal(64).astype(np.float32), (64,)),\n"
      "          'layer.0.h': ('F16', r.standard_normal((9, "
      "5)).astype(np.float16), (9, 5)),\n"
      "          'ids': ('I64', np.arange(-50, 50, dtype=np.int64), (100,))}\n"
      "np_type = {'BF16': np.uint16, 'F32': np.float32, 'F16': np.float16, "
      "'I64': np.int64}\n"
      "if sys.argv[1] == 'write':\n"
      "  head, blob, off = {}, b'', 0\n"
      "  for k, (dt, a, shape) in arrays().items():\n"
      "    b = a.tobytes(); head[k] = {'dtype': dt, 'shape': list(shape), "
      "'data_offsets': [off, off + len(b)]}\n"
      "    blob += b; off += len(b)\n"
      "  h = json.dumps(head).encode(); h += b' ' * (-len(h) % 8)\n"
      "  open(sys.argv[2], 'wb').write(struct.pack('<Q', len(h)) + h + blob)\n"
      "else:\n"
      "  raw = open(sys.argv[2], 'rb').read()\n"
      "  n = struct.unpack('<Q', raw[:8])[0]; head = json.loads(raw[8:8 + n])\n"
      "  for k, (dt, a, shape) in arrays().items():\n"
      "    e = head[k]; s, t = e['data_offsets']\n"
      "    got = np.frombuffer(raw[8 + n + s:8 + n + t], "
      "dtype=np_type[dt]).reshape(e['shape'])\n"
      "    assert e['dtype'] == dt and tuple(e['shape']) == tuple(shape), k\n"
      "    assert np.array_equal(got.view(np.uint8), "
      "a.reshape(shape).view(np.uint8)), k\n"
      "  print('arrays equal')\n";
  write_file(dir / "st.py", script);
  fs::path const st = dir / "np.safetensors";
  run_result w = run_program(
      {"/usr/bin/python3", (dir / "st.py").string(), "write", st.string()});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  ASSERT_EQ(brevis({"compress", st.string()}).exit_code, 0);
  fs::rename(st, dir / "orig.safetensors");
  run_result d = brevis({"decompress", st.string() + ".brv"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  run_result r = run_program(
      {"/usr/bin/python3", (dir / "st.py").string(), "read", st.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "arrays equal\n");
}

}  // namespace
}  // namespace brevis::cli_test
