// `brevis verify FILE.brv`: decodes everything, checking every chunk's XXH3
// and the whole file's, without writing anything.

#include <cstdio>

#include "src/archive_io.h"
#include "src/commands.h"
#include "src/huge_heap.h"
#include "src/input.h"
#include "src/progress.h"
#include "src/report.h"

namespace brevis::cli {

int run_verify(verify_options const& opt) {
  share_main_arena();
  return for_each_input(opt.inputs, [&](std::string const& path) {
    input in = load_input(path, input_use::stream);
    codec::archive_reader reader = open_archive(in);
    progress bar(path == "-" ? "stdin" : path, reader.original_size(),
                 opt.common.verbosity < 1);
    decode_all(
        reader, opt.common.threads, [](codec::byte_view) {}, bar,
        whole_file_check::check);
    bar.finish();
    if (opt.common.verbosity >= 1) {
      std::printf("%s: OK\n", path == "-" ? "stdin" : path.c_str());
      std::fflush(stdout);
    }
  });
}

}  // namespace brevis::cli
