// `brevis store add|get|ls|rm`, `brevis stats`, `brevis fsck`, `brevis gc`:
// the program store without a mount, through the same fs::store code paths
// the mount uses.

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "codec/choose/chooser.h"
#include "codec/container/archive.h"
#include "codec/core/checksum.h"
#include "codec/search/search_chooser.h"
#include "fs/pipeline/ordered_pipeline.h"
#include "fs/store/store.h"
#include "src/buffer_ring.h"
#include "src/commands.h"
#include "src/decode_workers.h"
#include "src/input.h"
#include "src/output_file.h"
#include "src/progress.h"
#include "src/report.h"

namespace brevis::cli {
namespace {

std::unique_ptr<fs::store> open_store(store_cli_options const& opt,
                                      bool create) {
  fs::store_options so;
  so.create = create;
  if (opt.chunk_size) so.chunk_size = opt.chunk_size;
  auto s = std::make_unique<fs::store>(opt.store, so);
  if (opt.common.verbosity >= 1) {
    for (fs::open_finding const& f : findings(s->report(), true)) {
      report_error(opt.store, f.line);
    }
  }
  return s;
}

double ratio(uint64_t logical, uint64_t stored) {
  return stored ? static_cast<double>(logical) / static_cast<double>(stored)
                : 0.0;
}

int store_add(store_cli_options const& opt) {
  if (!opt.as.empty() && opt.files.size() != 1) {
    report_error(opt.store, "--as takes exactly one file");
    return 1;
  }
  // A file size limit makes writes fail with EFBIG (reported as no space)
  // instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  std::unique_ptr<fs::store> s;
  try {
    s = open_store(opt, true);
  } catch (std::exception const& e) {
    report_error(opt.store, e.what());
    return 1;
  }
  auto chooser = codec::make_store_chooser();
  return for_each_input(opt.files, [&](std::string const& path) {
    input in = load_input(path);
    std::string const name = opt.as.empty() ? base_name(path) : opt.as;
    int64_t mtime = 0;
    uint32_t mode = 0644;
    if (in.is_regular) {
      mtime =
          int64_t{in.st.st_mtim.tv_sec} * 1000000000 + in.st.st_mtim.tv_nsec;
      mode = in.st.st_mode & 07777;
      // Stored as the caller's (as cp makes a copy): bits that meant
      // something only with the file's own owner or group go, or a setuid
      // file of another user's would come back setuid to the caller.
      if (in.st.st_uid != ::geteuid()) mode &= ~uint32_t{S_ISUID};
      if (in.st.st_gid != ::getegid()) mode &= ~uint32_t{S_ISGID};
    }
    fs::add_result r =
        s->add_file(fs::root_inode, name, in.data(), *chooser, mode, mtime);
    if (opt.common.verbosity >= 2) {
      std::fprintf(stderr,
                   "%s: %s -> %s stored, %s new (ratio %.3f, %llu of "
                   "%llu chunks deduplicated)\n",
                   name.c_str(), human_size(r.size).c_str(),
                   human_size(r.stored).c_str(), human_size(r.written).c_str(),
                   ratio(r.size, r.stored),
                   static_cast<unsigned long long>(r.dedup_chunks),
                   static_cast<unsigned long long>(r.chunks));
    }
    if (r.healed > 0) {
      report_error(name, "stored " + std::to_string(r.healed) +
                             " payloads anew whose stored copies were "
                             "damaged or missing (run brevis fsck for the "
                             "rest)");
    }
  });
}

namespace {

// A staged file (written through a mount, not compressed yet): its bytes
// are its staged copy. False when there is none (a live mount may just
// have compressed the file).
bool copy_staged(std::string const& path, output_file& out) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) return false;
  if (fd < 0) {
    throw fs::store_error(fs::store_errc::io,
                          "staged copy " + path + ": " + std::strerror(errno));
  }
  std::vector<uint8_t> buf(1u << 20);
  for (;;) {
    ssize_t const n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int const e = errno;
      ::close(fd);
      throw fs::store_error(fs::store_errc::io,
                            "read " + path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    out.write(codec::byte_view(buf.data(), static_cast<size_t>(n)));
  }
  ::close(fd);
  return true;
}

}  // namespace

int store_get(store_cli_options const& opt) {
  return for_each_input(opt.files, [&](std::string const& name) {
    auto s = open_store(opt, false);
    auto ino = s->lookup(fs::root_inode, name);
    if (!ino) {
      throw fs::store_error(fs::store_errc::not_found,
                            "no such file in " + opt.store);
    }
    fs::inode_attr a = s->stat(*ino);
    if (!S_ISREG(a.mode)) {
      throw fs::store_error(fs::store_errc::invalid,
                            name + " is not a regular file");
    }
    std::string const out_path = opt.output.empty() ? name : opt.output;
    struct stat like {};
    like.st_mode = S_IFREG | (a.mode & 07777);
    like.st_uid = a.uid;  // kept where the caller may (output_file::commit)
    like.st_gid = a.gid;
    like.st_mtim.tv_sec = a.mtime_ns / 1000000000;
    like.st_mtim.tv_nsec = a.mtime_ns % 1000000000;
    like.st_atim = like.st_mtim;
    output_file out(out_path, opt.common.force, &like);
    if (a.state == fs::file_state::staged) {
      if (copy_staged(s->staging_path(*ino), out)) {
        out.commit();
        return;
      }
      a = s->stat(*ino);  // compressed meanwhile, or damage
      if (a.state == fs::file_state::staged) {
        throw fs::store_error(fs::store_errc::corrupt,
                              "its staged copy " + s->staging_path(*ino) +
                                  " is missing (run brevis fsck)");
      }
    }
    // Chunks decode in parallel while the in-order stage hashes and writes
    // the previous ones, at most 2 per thread in flight (as decompress).
    std::vector<fs::store::chunk_span> const spans = s->chunk_map(*ino);
    uint64_t pos = 0;
    size_t longest = 0;
    for (auto const& sp : spans) {
      if (sp.offset != pos || sp.length == 0) {
        throw fs::store_error(fs::store_errc::corrupt,
                              "chunk records do not tile the file");
      }
      if (sp.length > codec::max_chunk_size) {
        throw fs::store_error(fs::store_errc::corrupt,
                              "chunk larger than the chunk size limit");
      }
      pos += sp.length;
      longest = std::max<size_t>(longest, sp.length);
    }
    if (pos != a.size) {
      throw fs::store_error(fs::store_errc::corrupt,
                            "chunk records do not tile the file");
    }
    struct decoded {
      std::unique_ptr<uint8_t[]> data;
      size_t length = 0;
    };
    buffer_ring buffers(longest);
    codec::xxh3_stream hash;
    // Fewer decodes at once where the chunks are long (a damaged index).
    unsigned const workers =
        decode_workers(opt.common.threads, longest, decode_memory_limit());
    tbb::global_control const fewer(
        tbb::global_control::max_allowed_parallelism, workers);
    fs::ordered_pipeline(
        spans.size(), 2 * size_t{workers},
        [&](size_t i) {
          decoded d{buffers.take(), spans[i].length};
          if (s->read(*ino, spans[i].offset, d.length, d.data.get()) !=
              d.length) {
            throw fs::store_error(fs::store_errc::corrupt,
                                  "file shorter than its chunk records");
          }
          return d;
        },
        [&](decoded& d) {
          codec::byte_view const b(d.data.get(), d.length);
          hash.update(b);
          out.write(b);
          buffers.give(std::move(d.data));
        });
    if (hash.digest() != a.checksum) {
      throw fs::store_error(fs::store_errc::corrupt,
                            "whole-file checksum mismatch");
    }
    out.commit();
  });
}

int store_rm(store_cli_options const& opt) {
  std::unique_ptr<fs::store> s;
  try {
    s = open_store(opt, false);
  } catch (std::exception const& e) {
    report_error(opt.store, e.what());
    return 1;
  }
  return for_each_input(opt.files, [&](std::string const& name) {
    s->unlink(fs::root_inode, name);
  });
}

// What `store ls` says of an entry: a file's state, or another type's name.
char const* state_name(fs::inode_attr const& a) {
  if (S_ISDIR(a.mode)) return "directory";
  if (S_ISLNK(a.mode)) return "symlink";
  if (S_ISFIFO(a.mode)) return "fifo";
  if (S_ISSOCK(a.mode)) return "socket";
  return a.state == fs::file_state::staged ? "staged" : "compressed";
}

int store_ls(store_cli_options const& opt) {
  return for_each_input({opt.store}, [&](std::string const&) {
    auto s = open_store(opt, false);
    std::printf("%-40s %12s %12s %7s  %s\n", "NAME", "SIZE", "STORED", "RATIO",
                "STATE");
    for (fs::dir_entry const& e : s->list(fs::root_inode)) {
      std::printf("%-40s %12llu %12llu %7.3f  %s\n", e.name.c_str(),
                  static_cast<unsigned long long>(e.attr.size),
                  static_cast<unsigned long long>(e.attr.stored),
                  ratio(e.attr.size, e.attr.stored), state_name(e.attr));
    }
  });
}

/// Whether a live `brevis mount` holds STORE/mount.lock.
bool mounted(std::string const& store_dir) {
  std::string const path = store_dir + "/mount.lock";
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool const held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

double seconds_since(int64_t wall_ns) {
  auto const now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return static_cast<double>(now - wall_ns) / 1e9;
}

/// The mount's queue and its last jobs (FORMAT.md S.3, `extra` inode 0).
void print_pipeline(fs::store const& s, fs::store_stats const& t, bool live) {
  std::printf("staged:         %llu files, %s not compressed yet\n",
              static_cast<unsigned long long>(t.staged_files),
              human_size(t.staged_bytes).c_str());
  std::optional<fs::pipeline_status> const q = s.get_pipeline_status();
  if (!live) {
    std::printf(
        "queue:          not mounted (staged files are queued at "
        "the next mount)\n");
  } else if (q) {
    std::printf("queue:          %llu waiting",
                static_cast<unsigned long long>(q->queued));
    std::printf(" (as of %.0f s ago)", seconds_since(q->updated_ns));
    if (q->running) {
      std::printf(", compressing '%s' (%s, for %.0f s)",
                  q->running_name.c_str(), human_size(q->running_size).c_str(),
                  seconds_since(q->running_since_ns));
    } else {
      std::printf(", idle");
    }
    std::printf("\n");
  }
  std::vector<fs::job_record> const jobs = s.recent_jobs();
  if (jobs.empty()) return;
  uint64_t bytes = 0, micros = 0;
  for (auto const& j : jobs) {
    bytes += j.size;
    micros += j.micros;
  }
  std::printf(
      "last %zu jobs:   %s in %.1f s, %.1f MB/s\n", jobs.size(),
      human_size(bytes).c_str(), static_cast<double>(micros) / 1e6,
      micros ? static_cast<double>(bytes) / static_cast<double>(micros) : 0.0);
  size_t const shown = std::min<size_t>(jobs.size(), 5);
  for (size_t i = jobs.size() - shown; i < jobs.size(); ++i) {
    fs::job_record const& j = jobs[i];
    std::printf("  %-28s %9s -> %9s  ratio %.3f  %6.1f s  %.0f s ago\n",
                j.name.c_str(), human_size(j.size).c_str(),
                human_size(j.stored).c_str(), ratio(j.size, j.stored),
                static_cast<double>(j.micros) / 1e6,
                seconds_since(j.finished_ns));
  }
}

int store_stats(store_cli_options const& opt) {
  return for_each_input({opt.store}, [&](std::string const&) {
    // Read-only: no writer lock and no recovery, so it runs beside a live
    // mount without waiting for it or touching its packs.
    fs::store_options so;
    so.create = false;
    so.read_only = true;
    auto s = std::make_unique<fs::store>(opt.store, so);
    fs::store_stats const t = s->stats();
    auto pct = [](uint64_t a, uint64_t b) {
      return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0;
    };
    std::printf("files:          %llu\n",
                static_cast<unsigned long long>(t.files));
    std::printf("logical:        %llu (%s)\n",
                static_cast<unsigned long long>(t.logical),
                human_size(t.logical).c_str());
    std::printf("stored:         %llu (%s), ratio %.3f\n",
                static_cast<unsigned long long>(t.unique),
                human_size(t.unique).c_str(), ratio(t.logical, t.unique));
    std::printf("savings:        %llu (%.1f%%)\n",
                static_cast<unsigned long long>(t.logical -
                                                std::min(t.logical, t.unique)),
                pct(t.logical - std::min(t.logical, t.unique), t.logical));
    std::printf("dedup savings:  %llu (%.1f%% of referenced payload)\n",
                static_cast<unsigned long long>(t.referenced - t.unique),
                pct(t.referenced - t.unique, t.referenced));
    std::printf("payloads:       %llu, programs %llu\n",
                static_cast<unsigned long long>(t.payloads),
                static_cast<unsigned long long>(t.programs));
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): as its neighbours
    std::printf("packs:          %llu, %llu bytes (%s on disk), %.1f%% live\n",
                static_cast<unsigned long long>(t.packs),
                static_cast<unsigned long long>(t.pack_bytes),
                human_size(t.pack_disk_bytes).c_str(),
                pct(t.live_bytes, t.pack_bytes));
    std::printf("index:          %s used of a %s map\n",
                human_size(t.map_used).c_str(), human_size(t.map_size).c_str());
    print_pipeline(*s, t, mounted(opt.store));
  });
}

int store_fsck(store_cli_options const& opt) {
  int status = 0;
  int r = for_each_input({opt.store}, [&](std::string const&) {
    auto s = open_store(opt, false);
    fs::fsck_options fo;
    fo.repair = opt.repair;
    fo.mounted = mounted(opt.store);
    fs::fsck_report const rep = s->fsck(fo);
    for (auto const& p : rep.problems) std::printf("problem: %s\n", p.c_str());
    for (auto const& p : rep.repairs) std::printf("repaired: %s\n", p.c_str());
    for (auto const& p : rep.too_new) {
      std::printf("kept: %s\n", p.c_str());
    }
    for (auto const& p : rep.open_orphans) {
      std::string const line = "kept: " + p +
                               " (unlinked or replaced, still open on the "
                               "live mount or held by its kernel)\n";
      std::fputs(line.c_str(), stdout);
    }
    std::printf("%llu files, %llu chunks, %llu pack records checked: %s\n",
                static_cast<unsigned long long>(rep.files),
                static_cast<unsigned long long>(rep.chunks),
                static_cast<unsigned long long>(rep.records),
                rep.clean()  ? "clean"
                : opt.repair ? "repaired"
                             : "PROBLEMS (run brevis fsck --repair)");
    if (!rep.clean() && !opt.repair) status = 1;
  });
  return r ? r : status;
}

int store_gc(store_cli_options const& opt) {
  int status = 0;
  int const r = for_each_input({opt.store}, [&](std::string const&) {
    auto s = open_store(opt, false);
    fs::gc_report const g = s->gc(opt.threshold);
    std::printf(
        "gc: %llu packs rewritten, %llu removed, %llu records moved (%s), "
        "%s reclaimed, %llu programs dropped, %llu dead records punched "
        "(%s freed)\n",
        static_cast<unsigned long long>(g.packs_rewritten),
        static_cast<unsigned long long>(g.packs_removed),
        static_cast<unsigned long long>(g.records_moved),
        human_size(g.bytes_moved).c_str(),
        human_size(g.bytes_reclaimed).c_str(),
        static_cast<unsigned long long>(g.programs_removed),
        static_cast<unsigned long long>(g.records_punched),
        human_size(g.bytes_punched).c_str());
    if (g.punching_deferred) {
      std::fputs(
          "gc: no dead record punched: a brevis fsck is reading the store; "
          "run gc again after it\n",
          stdout);
    }
    // Left as they are: what was damaged, and the exit status, say so.
    for (std::string const& d : g.damaged) {
      report_error(opt.store,
                   "gc left a pack as it is, a live record in it "
                   "is damaged: " +
                       d + " (run brevis fsck)");
      status = 1;
    }
  });
  return r ? r : status;
}

// Random reads of one stored file, after dropping the packs from the page
// cache: what a mount serving random access would see, without FUSE.
int store_read_bench(store_cli_options const& opt) {
  return for_each_input(opt.files, [&](std::string const& name) {
    std::string const packs = opt.store + "/packs";
    if (DIR* d = ::opendir(packs.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string p = packs + "/" + e->d_name;
        int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
      }
      ::closedir(d);
    }
    auto s = open_store(opt, false);
    auto ino = s->lookup(fs::root_inode, name);
    if (!ino) {
      throw fs::store_error(fs::store_errc::not_found,
                            "no such file in " + opt.store);
    }
    uint64_t const size = s->stat(*ino).size;
    size_t const len = static_cast<size_t>(std::min<uint64_t>(128 << 10, size));
    codec::bytes buf(len);
    std::mt19937_64 rng(1);
    auto const start = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < opt.read_count; ++i) {
      uint64_t off = size > len ? rng() % (size - len) : 0;
      s->read(*ino, off, len, buf.data());
    }
    double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("%u random %zu-byte reads: %.1f reads/s, %.1f MB/s\n",
                opt.read_count, len, opt.read_count / secs,
                opt.read_count * static_cast<double>(len) / 1e6 / secs);
  });
}

}  // namespace

int run_store(store_cli_options const& opt) {
  if (opt.action == "add") return store_add(opt);
  if (opt.action == "get") return store_get(opt);
  if (opt.action == "rm") return store_rm(opt);
  if (opt.action == "ls") return store_ls(opt);
  if (opt.action == "read-bench") return store_read_bench(opt);
  if (opt.action == "stats") return store_stats(opt);
  if (opt.action == "fsck") return store_fsck(opt);
  return store_gc(opt);
}

}  // namespace brevis::cli
