// Command-line parsing (CLI11) and dispatch to the subcommands.

#include <sched.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "codec/container/archive.h"
#include "src/commands.h"
#include "src/fatal_signals.h"
#include "src/size_arg.h"

namespace brevis::cli {
namespace {

// Options every subcommand takes; resolved into common_options after parsing.
struct raw_common {
  unsigned threads = 0;
  int verbose = 0;
  int quiet = 0;
  bool force = false;
};

// --chunk-size's text into `out`, left as it is when the option was not
// given; false, the error printed, when it is not a size from 4K to 64M.
bool resolve_chunk_size(std::string const& text, uint32_t& out) {
  if (text.empty()) return true;
  auto size = parse_size(text);
  if (!size || *size < codec::min_chunk_size || *size > codec::max_chunk_size) {
    std::fprintf(stderr,
                 "brevis: --chunk-size %s: expected a size from 4K to 64M\n",
                 text.c_str());
    return false;
  }
  out = static_cast<uint32_t>(*size);
  return true;
}

void add_common(CLI::App& sub, raw_common& c, bool writes) {
  sub.add_option("-T,--threads", c.threads,
                 "Worker threads (0 = all cores, the default)");
  sub.add_flag("-v,--verbose", c.verbose, "Print a summary per file");
  sub.add_flag("-q,--quiet", c.quiet, "No progress display");
  if (writes) {
    sub.add_flag("-f,--force", c.force,
                 "Overwrite existing output files; compress .brv inputs; "
                 "write to a terminal");
  }
}

// The cores this process may run on (its affinity mask), which is what
// oneTBB counts too: asking oneTBB would load its library (see
// fs/pipeline/tbb_on_demand.cpp) in runs that stay on one thread.
unsigned available_cores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
  }
  return static_cast<unsigned>(
      std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));  // > 1024 CPUs
}

common_options resolve(raw_common const& c) {
  common_options o;
  o.threads = c.threads ? c.threads : available_cores();
  o.verbosity = std::clamp(1 + c.verbose - c.quiet, 0, 2);
  o.force = c.force;
  return o;
}

constexpr char const* commands[] = {
    "compress", "decompress", "inspect", "verify", "store",
    "stats",    "fsck",       "gc",      "mount",  "unmount"};

bool is_command(std::string const& word) {
  return std::find(std::begin(commands), std::end(commands), word) !=
         std::end(commands);
}

// zstd-style shortcuts: `brevis -d F.brv` is `brevis decompress F.brv`,
// `-z` compress and `-t` verify.
std::vector<std::string> rewrite_shortcuts(std::vector<std::string> args) {
  static constexpr std::pair<char const*, char const*> shortcuts[] = {
      {"-d", "decompress"}, {"--decompress", "decompress"},
      {"-z", "compress"},   {"--compress", "compress"},
      {"-t", "verify"},     {"--test", "verify"}};
  if (args.size() < 2 || is_command(args[1])) return args;
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    for (auto const& [flag, command] : shortcuts) {
      if (args[i] == flag) {
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
        args.insert(args.begin() + 1, command);
        return args;
      }
    }
  }
  return args;
}

// With no file named, read stdin when it is not a terminal (as zstd does).
bool default_to_stdin(std::vector<std::string>& inputs) {
  if (!inputs.empty()) return true;
  if (::isatty(STDIN_FILENO) == 1) {
    std::fprintf(stderr, "brevis: no input files (use - for stdin)\n");
    return false;
  }
  inputs.push_back("-");
  return true;
}

}  // namespace

int run_cli(int argc, char** argv) {
  install_fatal_signal_handlers();
  std::vector<std::string> args =
      rewrite_shortcuts(std::vector<std::string>(argv, argv + argc));

  CLI::App app{
      "brevis: lossless compression for ML model checkpoints.\n"
      "Shortcuts: -z = compress, -d = decompress, -t = verify."};
  app.set_version_flag("--version", "brevis 0.1.0");
  app.require_subcommand(1);
  // Only the named subcommand is built (all of them for the top-level help
  // and errors): building every option of every subcommand took ~0.5 ms of
  // each run's ~10 ms start-up (decompress of a missing file, min of 40).
  auto const wants = [&args](char const* name) {
    return args.size() < 2 || !is_command(args[1]) || args[1] == name;
  };
  auto const parsed = [](CLI::App const* c) {
    return c != nullptr && c->parsed();
  };

  raw_common common;
  compress_options copt;
  std::string chunk_size_text;
  bool keep = false;
  CLI::App* compress = nullptr;
  if (wants("compress")) {
    compress = app.add_subcommand(
        "compress",
        "Compress FILE to FILE.brv. Inputs are kept (as zstd does); --rm "
        "deletes them after success. - is stdin/stdout.");
    compress->add_option("files", copt.inputs, "Files to compress (- = stdin)");
    compress->add_option("-o,--output", copt.output,
                         "Output file (one input only; - = stdout)");
    compress->add_flag("-c,--stdout", copt.to_stdout, "Write to stdout");
    compress->add_flag("-k,--keep", keep,
                       "Keep the input (the default; overrides --rm)");
    compress->add_flag(
        "--rm", copt.remove_input,
        "Delete the input once its archive is written and synced (not when "
        "the output is stdout, a device or a FIFO)");
    compress->add_flag(
        "--verify", copt.verify,
        "Decode every chunk back before writing it, falling back to zstd on "
        "a mismatch (always on with --rm; off, each chunk's XXH3 in the "
        "archive still lets decompress and verify detect a fault)");
    compress->add_option(
        "--chunk-size", chunk_size_text,
        "Chunk size, e.g. 1M (K/M/G = KiB/MiB/GiB; default 1M)");
    compress
        ->add_option("--search", copt.search,
                     "Program search: astar (default), greedy, or fixed "
                     "(one byte-planes program per dtype)")
        ->check(CLI::IsMember({"astar", "greedy", "fixed"}));
    compress
        ->add_option("--prior", copt.prior,
                     "Production prior: learned per file (default) or "
                     "uniform")
        ->check(CLI::IsMember({"learned", "uniform"}));
    compress
        ->add_option("--search-budget", copt.search_budget,
                     "Search expansions per region (default 24)")
        ->check(CLI::Range(size_t{1}, size_t{100000}));
    compress->add_flag(
        "--reproducible", copt.reproducible,
        "Same input, options and brevis build, same archive bytes on any "
        "machine and at any -T: records 0 for the time each region's choice "
        "took (inspect's ms column); not with a --search-ms limit");
    compress
        ->add_option("--search-ms", copt.search_ms,
                     "Search limit per region in ms of CPU time (default 0: "
                     "none, expansions alone bound it and the output does not "
                     "depend on timing)")
        ->check(CLI::Range(0.0, 1e6));
    compress
        ->add_option("--slow-margin", copt.slow_margin,
                     "Fraction a program decoding below 500 MB/s must "
                     "save to be chosen (default 0.03)")
        ->check(CLI::Range(0.0, 1.0));
    compress->add_flag(
        "--classes,!--no-classes", copt.classes,
        "Code bf16/fp16 tensors whose output channels (or rows) differ in "
        "scale by classes of channels, each with its own tables (default "
        "on; --no-classes: one program per tensor, ~1% larger bf16/fp16 "
        "safetensors, compression ~2x faster on blazepose-heavy)");
    add_common(*compress, common, true);
  }

  decompress_options dopt;
  CLI::App* decompress = nullptr;
  if (wants("decompress")) {
    decompress = app.add_subcommand(
        "decompress",
        "Decompress FILE.brv to FILE (inputs are kept unless --rm). - is "
        "stdin/stdout.");
    decompress->add_option("files", dopt.inputs,
                           "Archives to decompress (- = stdin)");
    decompress->add_option("-o,--output", dopt.output,
                           "Output file (one input only; - = stdout)");
    decompress->add_flag("-c,--stdout", dopt.to_stdout, "Write to stdout");
    decompress->add_flag("-k,--keep", keep,
                         "Keep the input (the default; overrides --rm)");
    decompress->add_flag(
        "--rm", dopt.remove_input,
        "Delete the archive once its file is written and synced (not when "
        "the output is stdout, a device or a FIFO)");
    add_common(*decompress, common, true);
  }

  inspect_options iopt;
  std::string range_text;
  CLI::App* inspect = nullptr;
  if (wants("inspect")) {
    inspect = app.add_subcommand(
        "inspect", "List an archive's regions, their programs and sizes");
    inspect->add_option("files", iopt.inputs, "Archives")->required();
    inspect->add_option(
        "--range", range_text,
        "OFFSET:LENGTH of the original: how many chunks it needs");
    add_common(*inspect, common, false);
  }

  verify_options vopt;
  CLI::App* verify = nullptr;
  if (wants("verify")) {
    verify = app.add_subcommand(
        "verify", "Decode archives fully and check every checksum");
    verify->add_option("files", vopt.inputs, "Archives")->required();
    add_common(*verify, common, false);
  }

  store_cli_options sopt;
  CLI::App *store_cmd = nullptr, *s_add = nullptr, *s_get = nullptr,
           *s_rm = nullptr, *s_ls = nullptr, *s_bench = nullptr;
  if (wants("store")) {
    store_cmd = app.add_subcommand(
        "store", "Use a program store directory without a mount");
    store_cmd->require_subcommand(1);
    s_add = store_cmd->add_subcommand(
        "add", "Compress files into the store (replacing same-named ones)");
    s_add->add_option("store", sopt.store, "Store directory")->required();
    s_add->add_option("files", sopt.files, "Files to add")->required();
    s_add->add_option("--as", sopt.as, "Name in the store (one file only)");
    s_add->add_option("--chunk-size", chunk_size_text,
                      "Chunk size, e.g. 1M (default 1M)");
    add_common(*s_add, common, false);
    s_get = store_cmd->add_subcommand(
        "get", "Write a stored file out, checking every checksum");
    s_get->add_option("store", sopt.store, "Store directory")->required();
    s_get->add_option("name", sopt.files, "Name in the store")->required();
    s_get->add_option("-o,--output", sopt.output, "Output file (- = stdout)");
    add_common(*s_get, common, true);
    s_rm = store_cmd->add_subcommand("rm", "Remove files from the store");
    s_rm->add_option("store", sopt.store, "Store directory")->required();
    s_rm->add_option("names", sopt.files, "Names in the store")->required();
    add_common(*s_rm, common, false);
    s_ls = store_cmd->add_subcommand(
        "ls", "List stored files: size, stored size, ratio, state");
    s_ls->add_option("store", sopt.store, "Store directory")->required();
    add_common(*s_ls, common, false);
    s_bench = store_cmd->add_subcommand(
        "read-bench",
        "Random 128 KiB reads of a stored file, page cache dropped first");
    s_bench->add_option("store", sopt.store, "Store directory")->required();
    s_bench->add_option("name", sopt.files, "Name in the store")->required();
    s_bench->add_option("--count", sopt.read_count, "Reads (default 1000)");
    add_common(*s_bench, common, false);
  }
  CLI::App* stats = nullptr;
  if (wants("stats")) {
    stats = app.add_subcommand(
        "stats", "Store totals: savings, dedup savings, pack fill");
    stats->add_option("store", sopt.store, "Store directory")->required();
    add_common(*stats, common, false);
  }
  CLI::App* fsck = nullptr;
  if (wants("fsck")) {
    fsck = app.add_subcommand(
        "fsck",
        "Check every pack record, chunk and reference count of a store");
    fsck->add_option("store", sopt.store, "Store directory")->required();
    fsck->add_flag("--repair", sopt.repair,
                   "Remove what cannot be read and fix counts; never touches "
                   "readable files");
    add_common(*fsck, common, false);
  }
  CLI::App* gc = nullptr;
  if (wants("gc")) {
    gc = app.add_subcommand(
        "gc", "Rewrite mostly-dead packs and reclaim their space");
    gc->add_option("store", sopt.store, "Store directory")->required();
    gc->add_option("--threshold", sopt.threshold,
                   "Rewrite packs whose live fraction is below this (0..1, "
                   "default 0.5)")
        ->check(CLI::Range(0.0, 1.0));
    add_common(*gc, common, false);
  }

  mount_cli_options mopt;
  CLI::App* mount = nullptr;
  if (wants("mount")) {
    mount = app.add_subcommand(
        "mount",
        "Mount a store: files copied in are staged at disk speed and "
        "compressed behind; reads decode only what they touch");
    mount->add_option("store", mopt.store, "Store directory (created if new)")
        ->required();
    mount->add_option("mountpoint", mopt.mountpoint, "Directory to mount on")
        ->required();
    mount->add_flag("-f,--foreground", mopt.foreground,
                    "Stay in the foreground (default: daemonize)");
    mount->add_flag("-d,--debug", mopt.debug,
                    "Trace FUSE requests on stderr (implies -f)");
    mount->add_flag("--allow-other", mopt.allow_other,
                    "Let other users use the mount (permissions are checked)");
    mount->add_flag("--no-compress", mopt.no_compress,
                    "Keep written files staged (no background compression)");
    mount->add_option("--quiet-ms", mopt.quiet_ms,
                      "Wait this long after the last writer closes a file "
                      "before compressing it (default 1000)");
    mount->add_option("--fuse-threads", mopt.fuse_threads,
                      "Maximum FUSE worker threads (0: libfuse's default)");
    mount->add_option("--cache-size", mopt.cache_size,
                      "Memory for decoded chunks, e.g. 512M or 2G (default "
                      "256M; 0: no cache)");
    mount->add_option("--prefetch", mopt.prefetch,
                      "Chunk sizes (1 MiB each) decoded ahead of a sequential "
                      "reader (default 2; 0: no background decoding)");
    mount->add_option("--pipeline-memory", mopt.pipeline_memory,
                      "Memory the background compression may hold in flight, "
                      "e.g. 128M (default 256M)");
    mount->add_option("--log", mopt.log,
                      "Where to log (one line per compressed file, and "
                      "errors): FILE, syslog or stderr (default: stderr with "
                      "-f, syslog when daemonized)");
  }
  CLI::App* unmount = nullptr;
  if (wants("unmount")) {
    unmount = app.add_subcommand("unmount", "Unmount (fusermount3 -u)");
    unmount->add_option("mountpoint", mopt.mountpoint, "Mounted directory")
        ->required();
    unmount->add_flag("-z,--lazy", mopt.lazy, "Detach even when busy");
  }

  try {
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (CLI::ParseError const& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  common_options const resolved = resolve(common);
  // Bounds TBB's worker count for the whole run, except for the commands
  // that run their loops through src/parallel.h: it sets the bound where a
  // loop goes parallel, and creating the control here would start TBB for
  // runs that stay on one thread (~2 ms at -T1; ~45 page faults more for
  // a small file decompressed at the default thread count).
  bool const without_tbb = parsed(compress) || parsed(decompress) ||
                           parsed(inspect) || parsed(verify);
  std::optional<tbb::global_control> limit;
  if (!without_tbb) {
    limit.emplace(tbb::global_control::max_allowed_parallelism,
                  resolved.threads);
  }

  for (auto [cmd, action] : {std::pair{s_add, "add"},
                             {s_get, "get"},
                             {s_rm, "rm"},
                             {s_ls, "ls"},
                             {s_bench, "read-bench"},
                             {stats, "stats"},
                             {fsck, "fsck"},
                             {gc, "gc"}}) {
    if (!parsed(cmd)) continue;
    sopt.action = action;
    sopt.common = resolved;
    if (!resolve_chunk_size(chunk_size_text, sopt.chunk_size)) return 1;
    return run_store(sopt);
  }
  if (parsed(mount)) {
    if (mopt.debug) mopt.foreground = true;
    return run_mount(mopt);
  }
  if (parsed(unmount)) return run_unmount(mopt);
  if (parsed(compress)) {
    copt.common = resolved;
    if (!resolve_chunk_size(chunk_size_text, copt.chunk_size)) return 1;
    if (!default_to_stdin(copt.inputs)) return 1;
    if (keep) copt.remove_input = false;
    return run_compress(copt);
  }
  if (parsed(decompress)) {
    dopt.common = resolved;
    if (!default_to_stdin(dopt.inputs)) return 1;
    if (keep) dopt.remove_input = false;
    return run_decompress(dopt);
  }
  if (parsed(inspect)) {
    iopt.common = resolved;
    if (!range_text.empty()) {
      size_t colon = range_text.find(':');
      std::optional<uint64_t> off, len;
      if (colon != std::string::npos) {
        off = parse_size(std::string_view(range_text).substr(0, colon));
        len = parse_size(std::string_view(range_text).substr(colon + 1));
      }
      if (!off || !len) {
        std::fprintf(stderr,
                     "brevis: --range %s: expected OFFSET:LENGTH (sizes may "
                     "use K/M/G)\n",
                     range_text.c_str());
        return 1;
      }
      iopt.range = std::pair{*off, *len};
    }
    return run_inspect(iopt);
  }
  vopt.common = resolved;
  return run_verify(vopt);
}

}  // namespace brevis::cli
