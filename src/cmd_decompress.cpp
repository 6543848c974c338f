// `brevis decompress FILE.brv...`: FILE.brv -> FILE, keeping FILE.brv unless
// --rm. Files are read a chunk's payload at a time (after the index at their
// end); stdin is read into memory whole.

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "codec/core/error.h"
#include "src/archive_io.h"
#include "src/commands.h"
#include "src/huge_heap.h"
#include "src/input.h"
#include "src/output_file.h"
#include "src/progress.h"
#include "src/report.h"

namespace brevis::cli {
namespace {

std::string output_for(decompress_options const& opt, std::string const& in) {
  if (opt.to_stdout) return "-";
  if (!opt.output.empty()) return opt.output;
  if (in == "-") return "-";
  std::string const base = base_name(in);
  size_t const n = std::strlen(archive_suffix);
  if (base.size() <= n || !base.ends_with(archive_suffix)) {
    codec::fail(codec::errc::io,
                "unknown suffix (expected .brv); use -o to name the output");
  }
  return in.substr(0, in.size() - n);
}

void decompress_one(decompress_options const& opt, std::string const& path) {
  auto const start = std::chrono::steady_clock::now();
  std::string const out_path = output_for(opt, path);
  // Each payload is read into one reused buffer: less CPU than mapping the
  // archive (blazepose-heavy bf16, 19 MB: MAP_POPULATE ~15 ms, pread ~8 ms)
  // and memory bounded by a few chunks.
  if (opt.remove_input) check_removable(path);
  input in = load_input(path, input_use::stream);
  if (out_path != "-" && path != "-" && same_file(path, out_path)) {
    codec::fail(codec::errc::io, "input and output are the same file");
  }
  codec::archive_reader reader = open_archive(in);
  output_file out(out_path, opt.common.force, in.is_regular ? &in.st : nullptr);
  // The archive goes only once its file is a file of its own, on disk.
  bool const remove = opt.remove_input && out.is_new_file();
  if (remove) out.sync_on_commit();
  out.reserve(reader.original_size());
  progress bar(path == "-" ? "stdin" : path, reader.original_size(),
               opt.common.verbosity < 1);
  decode_all(
      reader, opt.common.threads, [&](codec::byte_view v) { out.write(v); },
      bar, whole_file_check::skip);
  out.commit();
  bar.finish();

  if (remove) remove_input(in);
  if (opt.common.verbosity >= 2) {
    double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    uint64_t size = reader.original_size();
    uint64_t const archive_size =
        in.streams() ? static_cast<uint64_t>(in.st.st_size) : in.data().size();
    std::fprintf(stderr, "%s: %s -> %s, %.2f s, %.1f MB/s -> %s\n",
                 path == "-" ? "stdin" : path.c_str(),
                 human_size(archive_size).c_str(), human_size(size).c_str(),
                 secs, secs > 0 ? static_cast<double>(size) / 1e6 / secs : 0.0,
                 out_path == "-" ? "stdout" : out_path.c_str());
  }
}

}  // namespace

int run_decompress(decompress_options const& opt) {
  share_main_arena();
  if (!opt.output.empty() && opt.inputs.size() > 1) {
    report_error(opt.output, "-o takes exactly one input file");
    return 1;
  }
  return for_each_input(
      opt.inputs, [&](std::string const& path) { decompress_one(opt, path); });
}

}  // namespace brevis::cli
