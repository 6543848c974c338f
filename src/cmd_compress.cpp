// `brevis compress FILE...`: FILE -> FILE.brv, keeping FILE (zstd's habit;
// --rm deletes it after success).

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "codec/choose/chooser.h"
#include "codec/container/archive.h"
#include "codec/core/error.h"
#include "codec/search/search_chooser.h"
#include "src/archive_io.h"
#include "src/commands.h"
#include "src/huge_heap.h"
#include "src/input.h"
#include "src/output_file.h"
#include "src/parallel.h"
#include "src/progress.h"
#include "src/report.h"

namespace brevis::cli {
namespace {

double process_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

bool has_archive_suffix(std::string const& path) {
  return path.ends_with(archive_suffix);
}

std::string output_for(compress_options const& opt, std::string const& in) {
  if (opt.to_stdout) return "-";
  if (!opt.output.empty()) return opt.output;
  if (in == "-") return "-";
  return in + archive_suffix;
}

// Chunks stored with the fallback program: a fault (a bug the fallback
// contained; the archive is still correct) is a warning unless -q, and -v
// also counts the refusals (values a program was not chosen for).
void report_fallbacks(std::string const& path,
                      codec::archive_writer::fallback_counts const& f,
                      int verbosity) {
  char const* const name = path == "-" ? "stdin" : path.c_str();
  if (f.faulted > 0 && verbosity >= 1) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): as its neighbours
    std::fprintf(stderr,
                 "brevis: warning: %s: %zu chunks stored with the fallback "
                 "program after an encoder fault (first: %s); the archive is "
                 "correct, please report this\n",
                 name, f.faulted, f.first_fault.c_str());
  }
  if (f.refused > 0 && verbosity >= 2) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): as its neighbours
    std::fprintf(stderr,
                 "%s: %zu chunks stored with the fallback program: their "
                 "program could not code them\n",
                 name, f.refused);
  }
}

void compress_one(compress_options const& opt,
                  codec::program_chooser const& chooser,
                  std::string const& path) {
  auto const start = std::chrono::steady_clock::now();
  double const start_cpu = process_cpu_seconds();
  bool const force = opt.common.force;
  if (path != "-" && has_archive_suffix(path) && !force) {
    codec::fail(codec::errc::io,
                "already has the .brv suffix; ignored (use -f to compress "
                "anyway)");
  }
  std::string const out_path = output_for(opt, path);
  if (names_stdout(out_path) && ::isatty(STDOUT_FILENO) == 1 && !force) {
    codec::fail(codec::errc::io,
                "refusing to write compressed data to a terminal (use -f)");
  }
  if (opt.remove_input) check_removable(path);
  input in = load_input(path, input_use::whole);
  // Reading the input (its pages mapped in) is neither choosing nor
  // encoding: the second share of -v leaves it out.
  double const read_cpu = process_cpu_seconds() - start_cpu;
  if (out_path != "-" && path != "-" && same_file(path, out_path)) {
    codec::fail(codec::errc::io, "input and output are the same file");
  }
  codec::byte_view const data = in.data();

  // Checks the output name before the expensive part.
  output_file out(out_path, force, in.is_regular ? &in.st : nullptr);
  // The input goes only once its archive is a file of its own, on disk.
  bool const remove = opt.remove_input && out.is_new_file();
  if (remove) out.sync_on_commit();

  uint32_t const chunk_size =
      opt.chunk_size ? opt.chunk_size : codec::default_chunk_size;
  codec::archive_writer writer(data, base_name(path), chooser, chunk_size);
  // Decoding back doubles the encoding work; it pays where the input is
  // about to be deleted.
  writer.set_verify(opt.verify || opt.remove_input);
  writer.set_record_times(!opt.reproducible);
  parallel_for_index(opt.common.threads, writer.region_count(),
                     [&](size_t r) { writer.choose_program(r); });
  // Choosing: parsing, the file's tables and prior, and every search, in
  // CPU seconds of the process (the machine may be shared). Planning the
  // chunks (hashing each for deduplication) is archive work: counted apart.
  double const choose_cpu = process_cpu_seconds() - start_cpu;
  writer.plan_chunks();
  double const plan_cpu = process_cpu_seconds() - start_cpu - choose_cpu;
  if (opt.common.verbosity >= 2) {
    std::string const learned = writer.chooser_summary();
    if (!learned.empty()) {
      std::fprintf(stderr, "%s: %s", path == "-" ? "stdin" : path.c_str(),
                   learned.c_str());
    }
  }

  progress bar(path == "-" ? "stdin" : path, data.size(),
               opt.common.verbosity < 1);
  out.write(writer.header());
  size_t const count = writer.chunk_count();
  // Encodes in parallel, writes in chunk order: at most 2 x threads chunks
  // are in flight, so memory stays bounded whatever the file size.
  ordered_run(
      opt.common.threads, count, [&](size_t i) { return writer.encode(i); },
      [&](codec::encoded_chunk& c) {
        out.write(writer.append(c));
        bar.update(data.size() * (c.index + 1) / count);
        codec::archive_writer::recycle(std::move(c));
      });
  out.write(writer.finish());
  check_unchanged(in);
  out.commit();
  bar.finish();

  if (remove) {
    // The archive must open before its input goes (its chunks were decoded
    // back already): an index the reader refuses, such as one breaking a
    // limit the writer did not check, keeps the input.
    try {
      input const written = load_input(out_path, input_use::map);
      (void)open_archive(written);
    } catch (codec::error const& e) {
      codec::fail(e.code(), std::string("the archive written does not open "
                                        "(the input is kept): ") +
                                e.what());
    }
    remove_input(in);
  }
  report_fallbacks(path, writer.fallbacks(), opt.common.verbosity);
  if (opt.common.verbosity >= 2) {
    double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    double ratio = out.written() ? static_cast<double>(data.size()) /
                                       static_cast<double>(out.written())
                                 : 0.0;
    std::fprintf(stderr, "%s: %s -> %s (ratio %.3f), %.2f s, %.1f MB/s -> %s\n",
                 path == "-" ? "stdin" : path.c_str(),
                 human_size(data.size()).c_str(),
                 human_size(out.written()).c_str(), ratio, secs,
                 secs > 0 ? static_cast<double>(data.size()) / 1e6 / secs : 0.0,
                 out_path == "-" ? "stdout" : out_path.c_str());
    size_t expansions = 0;
    double coding_ms = 0;
    for (codec::region_entry const& e : writer.regions()) {
      if (e.how) expansions += e.how->expansions, coding_ms += e.how->coding_ms;
    }
    double const cpu = process_cpu_seconds() - start_cpu;
    // The choosing clock (from the start, as it always was) also ran while
    // the input was read and while the symbol counts and static tables that
    // the coders take as input were computed (choice_record::coding_ms): an
    // order-0 coder does that work as it encodes. Only the work whose result
    // the chosen program codes with counts: the classes' counting passes
    // where the classes win, not the tables of a program they replace
    // (classes_candidate.cpp). Both shares are shown.
    double const coding = std::min(choose_cpu - read_cpu, coding_ms / 1000);
    double const choosing_alone = choose_cpu - read_cpu - coding;
    std::fprintf(stderr,
                 "%s: choosing programs %.3f s (%.1f%% of %.3f CPU s; "
                 "%.3f s, %.1f%%, without reading the input, %.3f s, and the "
                 "symbol counts and tables the coders take as input (of the "
                 "programs coding with static tables, searched or not), "
                 "%.3f s; "
                 "planning and hashing chunks %.3f s apart), %zu search "
                 "expansions, %zu chunks decoded back\n",
                 path == "-" ? "stdin" : path.c_str(), choose_cpu,
                 cpu > 0 ? 100 * choose_cpu / cpu : 0.0, cpu, choosing_alone,
                 cpu > 0 ? 100 * choosing_alone / cpu : 0.0, read_cpu, coding,
                 plan_cpu, expansions, writer.verified_chunks());
  }
}

}  // namespace

int run_compress(compress_options const& opt) {
  share_main_arena();
  if (!opt.output.empty() && opt.inputs.size() > 1) {
    report_error(opt.output, "-o takes exactly one input file");
    return 1;
  }
  if (opt.to_stdout && opt.inputs.size() > 1) {
    // Archives do not concatenate (each ends in its index), unlike zstd's
    // frames: the result would not decompress.
    report_error("-c", "takes exactly one input file (an archive holds one)");
    return 1;
  }
  if (opt.reproducible && opt.search_ms > 0) {
    // A time limit makes the programs depend on the machine's speed.
    report_error("--reproducible",
                 "cannot be used with a --search-ms time limit");
    return 1;
  }
  codec::search_chooser_options so;
  so.search.how = opt.search == "greedy"  ? codec::search::strategy::greedy
                  : opt.search == "fixed" ? codec::search::strategy::fixed
                                          : codec::search::strategy::astar;
  so.prior = opt.prior == "uniform" ? codec::prior_kind::uniform
                                    : codec::prior_kind::learned;
  so.search.budget = opt.search_budget;
  so.search.time_ms = opt.search_ms;
  so.search.slow_margin = opt.slow_margin;
  so.classes = opt.classes;
  if (opt.chunk_size) so.search.chunk_size = opt.chunk_size;
  so.parallel = [threads = opt.common.threads](size_t count,
                                               codec::range_body const& body) {
    parallel_for_ranges(threads, count, body);
  };
  auto chooser = codec::make_search_chooser(so);
  return for_each_input(opt.inputs, [&](std::string const& path) {
    compress_one(opt, *chooser, path);
  });
}

}  // namespace brevis::cli
