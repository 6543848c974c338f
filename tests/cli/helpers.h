#pragma once
// Helpers for end-to-end tests of the `brevis` binary: run it (or python)
// with redirected stdio, temporary directories, files and generators.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace brevis::cli_test {

namespace fs = std::filesystem;

inline std::string brevis_binary() {
  char const* env = std::getenv("BREVIS");
  return env && *env ? env : BREVIS_BINARY;
}

inline std::string read_file(fs::path const& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_file(fs::path const& p, std::string const& data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

/// The disk space the files in `dir` take (their blocks, not their
/// length): what punching holes out of a store's packs gives back.
inline uint64_t disk_bytes_of_files(fs::path const& dir) {
  uint64_t n = 0;
  for (auto const& e : fs::directory_iterator(dir)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0) {
      n += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return n;
}

/// A fresh directory under the system temp dir, removed at scope exit.
class temp_dir {
 public:
  temp_dir() {
    std::string tmpl =
        (fs::temp_directory_path() / "brevis-cli-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(temp_dir const&) = delete;
  temp_dir& operator=(temp_dir const&) = delete;
  fs::path const& path() const { return path_; }
  fs::path operator/(std::string const& name) const { return path_ / name; }

 private:
  fs::path path_;
};

struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
  size_t err_lines() const {
    size_t n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

/// A program started by start_program. One never finished (a failed
/// assertion returned early) is killed and reaped when this dies.
struct started_program {
  temp_dir capture;
  std::string out_file, err_file;
  bool out_captured = false;
  pid_t pid = -1;  // -1: not running (never started, or finished)

  started_program() = default;
  started_program(started_program const&) = delete;
  started_program& operator=(started_program const&) = delete;
  ~started_program() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

/// Starts argv[0] (a path) with stdin from `in` and stdout/stderr captured
/// (or stdout into `out_path` when given); finish_program waits for it.
inline void start_program(started_program& p,
                          std::vector<std::string> const& argv,
                          std::string const& in = "/dev/null",
                          std::string const& out_path = "") {
  p.out_captured = out_path.empty();
  p.out_file = p.out_captured ? (p.capture / "stdout").string() : out_path;
  p.err_file = (p.capture / "stderr").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, p.out_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, p.err_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (auto const& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) == 0) {
    p.pid = pid;
  }
  posix_spawn_file_actions_destroy(&fa);
}

/// Waits for a started program; its exit code is 128 + the signal that
/// ended it, if one did.
inline run_result finish_program(started_program& p) {
  run_result r;
  if (p.pid > 0) {
    int status = 0;
    waitpid(p.pid, &status, 0);
    r.exit_code =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    p.pid = -1;
  }
  if (p.out_captured) r.out = read_file(p.out_file);
  r.err = read_file(p.err_file);
  return r;
}

/// Runs argv[0] (a path) with stdin from `in` and stdout/stderr captured (or
/// stdout into `out_path` when given).
inline run_result run_program(std::vector<std::string> const& argv,
                              std::string const& in = "/dev/null",
                              std::string const& out_path = "") {
  started_program p;
  start_program(p, argv, in, out_path);
  return finish_program(p);
}

/// Runs `brevis args...`.
inline run_result brevis(std::vector<std::string> args,
                         std::string const& in = "/dev/null",
                         std::string const& out_path = "") {
  args.insert(args.begin(), brevis_binary());
  return run_program(args, in, out_path);
}

inline bool python_has(std::string const& module) {
  if (!fs::exists("/usr/bin/python3")) return false;
  return run_program({"/usr/bin/python3", "-c", "import " + module})
             .exit_code == 0;
}

inline std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

/// bf16-looking weights: a narrow exponent range, random mantissas.
inline std::string bf16_weights(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::string s(count * 2, '\0');
  for (size_t i = 0; i < count; ++i) {
    float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint16_t h = static_cast<uint16_t>(bits >> 16);
    s[2 * i] = static_cast<char>(h & 0xff);
    s[2 * i + 1] = static_cast<char>(h >> 8);
  }
  return s;
}

struct st_tensor {
  std::string name;
  std::string dtype;  // "BF16", "F32", ...
  std::vector<uint64_t> shape;
  std::string data;
};

/// A safetensors file: u64 header length, JSON header, tensor data.
inline std::string make_safetensors(std::vector<st_tensor> const& tensors) {
  std::string json = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (auto const& t : tensors) {
    json += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      // Appended in two steps: GCC 12 warns (-Wrestrict, a false positive)
      // on `(i ? "," : "") + std::to_string(...)`.
      if (i) json += ',';
      json += std::to_string(t.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + t.data.size()) + "]}";
    offset += t.data.size();
  }
  json += "}";
  while (json.size() % 8 != 0) json += ' ';
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  out += json;
  for (auto const& t : tensors) out += t.data;
  return out;
}

/// Files in `dir` whose names contain the CLI's temporary marker.
inline std::vector<std::string> temp_leftovers(fs::path const& dir) {
  std::vector<std::string> found;
  for (auto const& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.find(".brevis-tmp-") != std::string::npos) found.push_back(name);
  }
  return found;
}

/// The threads of this process (tests of what starts one).
inline size_t thread_count() {
  size_t n = 0;
  for (auto const& e : fs::directory_iterator("/proc/self/task")) {
    (void)e;
    ++n;
  }
  return n;
}

}  // namespace brevis::cli_test
