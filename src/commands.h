#pragma once
// The subcommands of `brevis`. Each takes its parsed options and returns the
// process exit code (0 when every file succeeded, 1 otherwise); per-file
// problems are reported as one line `brevis: FILE: problem` on stderr and
// the command goes on with the next file, as zstd does.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace brevis::cli {

inline constexpr char const* archive_suffix = ".brv";

struct common_options {
  unsigned threads = 1;  // resolved: >= 1
  int verbosity = 1;     // 0 quiet, 1 normal, 2 verbose
  bool force = false;
};

struct compress_options {
  std::vector<std::string> inputs;  // "-" is stdin
  std::string output;               // empty: FILE.brv; "-": stdout
  bool to_stdout = false;           // -c
  bool remove_input = false;        // --rm
  // Decode every chunk back before writing it (--verify); always on with
  // --rm, where the input is not there to compress again.
  bool verify = false;
  uint32_t chunk_size = 0;  // 0: the codec's default
  // The program search (codec/search): strategy astar|greedy|fixed, prior
  // learned|uniform, expansions and milliseconds per region (0 ms: no
  // limit), and the fraction a program decoding below 500 MB/s must save.
  std::string search = "astar";
  std::string prior = "learned";
  size_t search_budget = 24;
  // 0: the search is bounded by expansions alone, so the archive does not
  // depend on how busy the machine is.
  double search_ms = 0;
  double slow_margin = 0.03;
  bool classes = true;  // also try the classes operator (--no-classes: off)
  // Record 0 for the time each region's choice took, so that the same input,
  // options and build give the same archive bytes on any machine, at any -T.
  bool reproducible = false;
  common_options common;
};

struct decompress_options {
  std::vector<std::string> inputs;
  std::string output;  // empty: strip .brv; "-": stdout
  bool to_stdout = false;
  bool remove_input = false;
  common_options common;
};

struct inspect_options {
  std::vector<std::string> inputs;
  // --range OFFSET:LENGTH of the original file.
  std::optional<std::pair<uint64_t, uint64_t>> range;
  common_options common;
};

struct verify_options {
  std::vector<std::string> inputs;
  common_options common;
};

/// `brevis store add|get|rm|ls`, `brevis stats|fsck|gc`.
struct store_cli_options {
  std::string action;  // add, get, rm, ls, read-bench, stats, fsck, gc
  std::string store;
  std::vector<std::string> files;  // add: paths; get, rm: names
  std::string as;                  // add: the name of the one file
  std::string output;              // get: output path (default: NAME)
  bool repair = false;             // fsck
  double threshold = 0.5;          // gc: rewrite packs less live than this
  unsigned read_count = 1000;      // read-bench
  uint32_t chunk_size = 0;
  common_options common;
};

/// `brevis mount STORE MOUNTPOINT`, `brevis unmount MOUNTPOINT`.
struct mount_cli_options {
  std::string store;
  std::string mountpoint;
  bool foreground = false;   // -f
  bool debug = false;        // -d: libfuse's request trace (implies -f)
  bool allow_other = false;  // other users may enter
  bool no_compress = false;  // files stay staged
  unsigned quiet_ms = 1000;  // wait after the last writer closes
  unsigned fuse_threads = 0;
  std::string cache_size = "256M";       // decoded chunks kept (K/M/G suffix)
  unsigned prefetch = 2;                 // chunk sizes decoded ahead (0: none)
  std::string pipeline_memory = "256M";  // compression's bytes in flight
  std::string log;                       // FILE, "syslog" or "stderr"
  bool lazy = false;                     // unmount -z
};

int run_compress(compress_options const& opt);
int run_decompress(decompress_options const& opt);
int run_inspect(inspect_options const& opt);
int run_verify(verify_options const& opt);
int run_store(store_cli_options const& opt);
int run_mount(mount_cli_options const& opt);
int run_unmount(mount_cli_options const& opt);

/// Parses the command line and runs a subcommand; main() is just this.
int run_cli(int argc, char** argv);

}  // namespace brevis::cli
