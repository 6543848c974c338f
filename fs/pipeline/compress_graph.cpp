#include "fs/pipeline/compress_graph.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <tbb/flow_graph.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "codec/container/archive.h"
#include "codec/core/checksum.h"
#include "codec/core/error.h"
#include "codec/core/thread_name.h"
#include "codec/dsl/interpreter.h"
#include "codec/dsl/scratch.h"
#include "fs/pipeline/mapping_guard.h"
#include "fs/pipeline/resident_memory.h"
#include "fs/pipeline/tbb_worker_names.h"
#include "fs/store/read_at.h"
#include "fs/store/records.h"
#include "fs/store/staged_commit.h"

namespace brevis::fs {

namespace {

namespace flow = tbb::flow;
using clock = std::chrono::steady_clock;

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto const s = [](timeval t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

/// The staged copy, mapped read-only, and guarded: a touch of pages lost
/// since it was mapped (the copy cut short behind the mount's back, or an
/// I/O error) reads zeros and sets faulted() instead of ending the process.
class mapped_copy {
 public:
  explicit mapped_copy(std::string const& path) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd_ < 0) fail("open the staged copy");
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("stat the staged copy");
    size_ = static_cast<size_t>(st.st_size);
    mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                st.st_mtim.tv_nsec;
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) fail("map the staged copy");
    data_ = static_cast<uint8_t const*>(p);
    guard_.emplace(p, size_);
    ::madvise(p, size_, MADV_SEQUENTIAL);
  }
  ~mapped_copy() {
    guard_.reset();
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  mapped_copy(mapped_copy const&) = delete;
  mapped_copy& operator=(mapped_copy const&) = delete;

  codec::byte_view bytes() const { return {data_, size_}; }
  /// Whether reads through bytes() have read zeros for lost pages.
  bool faulted() const { return guard_ && guard_->faulted(); }
  /// Copies bytes [offset, offset + length) of the copy into `out`.
  /// Throws when the copy has shrunk since it was opened (changed behind
  /// the mount's back: the job fails and the file stays staged; reads
  /// through bytes() would fault instead).
  void read(uint64_t offset, size_t length, uint8_t* out) const {
    if (read_at(fd_, offset, length, out, "the staged copy") < length) {
      store_fail(store_errc::io, "the staged copy shrank under the job");
    }
  }
  int64_t mtime_ns() const { return mtime_ns_; }
  /// Drops the whole pages inside [offset, offset + length) from this
  /// process (the page cache keeps them; a later touch maps them again).
  void release(uint64_t offset, uint64_t length) const {
    if (!data_ || length == 0) return;
    static long const page = ::sysconf(_SC_PAGESIZE);
    uint64_t const pg = static_cast<uint64_t>(page);
    uint64_t const from = (offset + pg - 1) / pg * pg;
    uint64_t const to = std::min<uint64_t>(offset + length, size_) / pg * pg;
    if (to > from) {
      ::madvise(const_cast<uint8_t*>(data_) + from, to - from, MADV_DONTNEED);
    }
  }

 private:
  [[noreturn]] void fail(char const* what) {
    int const e = errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    store_fail_errno(e, what);
  }
  int fd_ = -1;
  uint8_t const* data_ = nullptr;
  size_t size_ = 0;
  int64_t mtime_ns_ = 0;
  std::optional<mapping_guard> guard_;
};

/// While alive, drops the mapping's pages whenever the process's resident
/// file pages have grown by `slack` bytes since the last drop (looked at
/// every few milliseconds): choosing programs reads every region through
/// the mapping, and without this the whole file would end up resident. Where
/// that cannot be looked at, it drops them every time.
class page_dropper {
 public:
  page_dropper(mapped_copy const* m, uint64_t slack) : m_(m), slack_(slack) {
    // A copy no larger than the slack never needs one (a small file's
    // job started two such threads for nothing).
    if (m_ && m_->bytes().size() > slack_) {
      thread_ = std::thread([this] {
        codec::name_this_thread("brevis-pagedrop");
        run();
      });
    }
  }
  ~page_dropper() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  page_dropper(page_dropper const&) = delete;
  page_dropper& operator=(page_dropper const&) = delete;

 private:
  void run() {
    std::optional<uint64_t> base = resident_file_bytes();
    std::unique_lock lk(mu_);
    while (!cv_.wait_for(lk, std::chrono::milliseconds(10),
                         [this] { return done_; })) {
      std::optional<uint64_t> const now = resident_file_bytes();
      if (base && now && *now < *base + slack_) continue;
      m_->release(0, m_->bytes().size());
      base = resident_file_bytes();  // what is resident besides the copy
    }
  }
  mapped_copy const* m_;
  uint64_t const slack_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

/// The first error of a job; everything after it only drains.
class first_error {
 public:
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  void set(store_errc code, std::string what) {
    std::lock_guard lk(mu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    code_ = code;
    what_ = std::move(what);
    failed_.store(true, std::memory_order_release);
  }
  /// Runs f, turning whatever it throws into the job's error.
  template <typename F>
  void guard(char const* stage, F&& f) noexcept {
    try {
      f();
    } catch (store_error const& e) {
      set(e.code(), std::string(stage) + ": " + e.what());
    } catch (codec::error const& e) {
      set(store_errc::io, std::string(stage) + ": " + e.what());
    } catch (std::bad_alloc const&) {
      set(store_errc::no_space, std::string(stage) + ": out of memory");
    } catch (std::exception const& e) {
      set(store_errc::io, std::string(stage) + ": " + e.what());
    } catch (...) {
      set(store_errc::io, std::string(stage) + ": unknown error");
    }
  }
  store_errc code() const { return code_; }
  std::string const& what() const { return what_; }

 private:
  std::mutex mu_;
  std::atomic<bool> failed_{false};
  store_errc code_ = store_errc::io;
  std::string what_;
};

struct chunk_msg {
  size_t index = 0;
  // The chunk's bytes, read from the staged copy, until the append stage
  // has hashed them (shared: flow graph messages are copied).
  std::shared_ptr<codec::scratch::buffer> source;
  std::shared_ptr<codec::encoded_chunk> encoded;  // null: ref or skipped
  staged_commit::placement where;
  bool appended = false;
};

/// One attempt. `careful`: the encoder also decodes each payload in memory
/// and falls back to the fallback program for a chunk that does not come
/// back exactly (archive_writer::set_verify); otherwise only the verify
/// stage decodes, and a mismatch fails the attempt with `corrupt`.
compress_outcome run_job(store& s, codec::program_chooser const& chooser,
                         compress_request const& req, bool careful) noexcept {
  auto const started = clock::now();
  double const cpu_started = process_cpu_seconds();
  compress_outcome out;
  first_error err;
  std::unique_ptr<mapped_copy> copy;
  auto stop = [&] {
    return err.failed() || (req.cancelled && req.cancelled()) ||
           (copy && copy->faulted());
  };

  // What the staged copy's pages may take while whole-file stages read it.
  uint64_t const dropper_slack =
      std::max<uint64_t>(req.memory_limit / 8, 8u << 20);
  std::unique_ptr<codec::archive_writer> writer;
  std::vector<std::pair<uint64_t, codec::bytes>> programs;  // hash, bytes

  // Whole-file stages: parse, then programs (choosing them also hashes the
  // chunks, in parallel). The file's checksum is taken in the append stage,
  // chunk by chunk in file order, beside the encoders: in plan_chunks it
  // was a serial pass, ~10% of ckpt-300m's job with a core idle.
  {
    flow::graph g;
    flow::function_node<flow::continue_msg, flow::continue_msg> parse(
        g, flow::serial, [&](flow::continue_msg) {
          err.guard("parse", [&] {
            copy = std::make_unique<mapped_copy>(req.staged_path);
            // Building the writer (parse, cut regions) reads through the
            // mapping before the synthesize stage's dropper starts: without
            // one here a 2 GB checkpoint came to 1.1 GB resident.
            page_dropper dropping(copy.get(), dropper_slack);
            writer = std::make_unique<codec::archive_writer>(
                copy->bytes(), req.name, chooser, s.chunk_size());
            writer->set_verify(careful);
          });
          return flow::continue_msg();
        });
    flow::function_node<flow::continue_msg> synthesize(
        g, flow::serial, [&](flow::continue_msg) {
          if (stop()) return;
          err.guard("synthesize", [&] {
            page_dropper dropping(copy.get(), dropper_slack);
            tbb::parallel_for(size_t{0}, writer->region_count(), [&](size_t r) {
              if (stop()) return;
              // Regions up to a sixteenth of the memory limit are read into
              // a reused buffer, like chunks (mapping pages costs more than
              // the copy); larger ones are read through the mapping.
              uint64_t const length = writer->regions()[r].info.length;
              if (length == 0 || length > req.memory_limit / 16) {
                writer->choose_program(r);
                return;
              }
              codec::scratch::buffer b = codec::scratch::take_buffer(length);
              copy->read(writer->regions()[r].info.offset, length,
                         b.data.get());
              writer->choose_program(r, codec::byte_view(b.data.get(), length));
              codec::scratch::give(std::move(b));
            });
            if (stop()) return;
            writer->plan_chunks();
            for (codec::node const& p : writer->programs()) {
              codec::bytes b = codec::serialize_program(p);
              uint64_t const h = detail::hash64(b);
              programs.emplace_back(h, std::move(b));
            }
          });
        });
    flow::make_edge(parse, synthesize);
    parse.try_put(flow::continue_msg());
    g.wait_for_all();
    if (copy && copy->faulted()) {
      err.set(store_errc::io,
              "synthesize: the staged copy could not be read through its "
              "mapping (cut short behind the mount's back, or an I/O error)");
    }
    // What sampling touched.
    if (copy) copy->release(0, copy->bytes().size());
  }

  auto const chosen = clock::now();
  double const cpu_chosen = process_cpu_seconds();
  out.choose_cpu_seconds = cpu_chosen - cpu_started;
  out.choose_seconds = std::chrono::duration<double>(chosen - started).count();

  // Chunk stages, holding the append lock until the commit.
  std::unique_ptr<staged_commit> commit;
  // Of the whole file, once every chunk has passed the append stage.
  std::optional<uint64_t> file_checksum;
  if (!stop())
    err.guard("append",
              [&] { commit = std::make_unique<staged_commit>(s, req.ino); });
  if (!stop()) {
    auto const chunks = writer->chunks();
    size_t const count = chunks.size();
    size_t const per_chunk = 3 * static_cast<size_t>(s.chunk_size());
    // Four chunks a thread (of this arena: the job's) keep every stage
    // busy; more only wait, holding memory that is fresh pages the first
    // time (ckpt-300m's job: 85 tokens touched 145-165 MB and took
    // 0.75-0.82 s, 8 tokens 105 MB and 0.68-0.72 s on 2 cores).
    size_t const busy = 4 * static_cast<size_t>(std::max(
                                1, tbb::this_task_arena::max_concurrency()));
    size_t const tokens = std::clamp<size_t>(
        std::min(req.memory_limit / std::max<size_t>(1, per_chunk), busy), 2,
        1024);
    size_t next = 0;
    flow::graph g;
    flow::input_node<size_t> source(g, [&](tbb::flow_control& fc) -> size_t {
      if (next == count || stop()) {
        fc.stop();
        return 0;
      }
      return next++;
    });
    flow::limiter_node<size_t> limit(g, tokens);
    flow::function_node<size_t, chunk_msg> encode(
        g, flow::unlimited, [&](size_t i) {
          chunk_msg m;
          m.index = i;
          if (stop()) return m;
          codec::chunk_entry const& e = chunks[i];
          err.guard("encode", [&] {
            // Read, not touched through the mapping: the choosing stage's
            // pages are dropped, and mapping them again cost more than the
            // copy (~1.7 us a 4 KiB page on a paravirtual machine's shadow
            // page tables, ~0.13 s a 300 MB file).
            m.source = std::make_shared<codec::scratch::buffer>(
                codec::scratch::take_buffer(e.length));
            copy->read(e.offset, e.length, m.source->data.get());
            if (e.is_ref) return;
            m.encoded = std::make_shared<codec::encoded_chunk>(writer->encode(
                i, codec::byte_view(m.source->data.get(), e.length)));
          });
          return m;
        });
    flow::sequencer_node<chunk_msg> order(
        g, [](chunk_msg const& m) { return m.index; });
    // The chunks tile the file in order (refs included).
    codec::xxh3_stream whole;
    uint64_t hashed = 0;
    flow::function_node<chunk_msg, chunk_msg> append(
        g, flow::serial, [&](chunk_msg m) {
          if (stop() || !m.source) return m;  // failed upstream
          codec::chunk_entry const& e = chunks[m.index];
          whole.update(codec::byte_view(m.source->data.get(), e.length));
          hashed += e.length;
          codec::scratch::give(std::move(*m.source));
          m.source.reset();
          if (!e.is_ref && !m.encoded) return m;  // failed upstream
          err.guard("append", [&] {
            uint64_t const prog =
                e.is_ref ? 0 : programs.at(m.encoded->program).first;
            codec::byte_view const payload =
                m.encoded ? codec::byte_view(m.encoded->payload)
                          : codec::byte_view();
            m.where = commit->add_chunk(e, prog, payload);
            m.appended = true;
          });
          return m;
        });
    flow::function_node<chunk_msg, flow::continue_msg> verify(
        g, flow::unlimited, [&](chunk_msg m) {
          codec::chunk_entry const& e = chunks[m.index];
          if (m.appended && m.encoded && !stop()) {
            err.guard("verify", [&] {
              // The read-back record and the decoded bytes go to buffers
              // this thread reuses: fresh ones cost a zero fill and page
              // faults per chunk.
              thread_local codec::bytes record;
              codec::byte_view stored = m.encoded->payload;
              if (m.where.written) {
                commit->read_back(m.where, record);
                stored = record;
              }
              codec::scratch::buffer back =
                  codec::scratch::take_buffer(e.length);
              try {
                codec::decode_chunk(writer->programs()[m.encoded->program],
                                    stored, e.length, back.data.get());
              } catch (codec::error const& x) {
                codec::scratch::give(std::move(back));
                store_fail(store_errc::corrupt,
                           "chunk at " + std::to_string(e.offset) +
                               " does not decode: " + x.what());
              }
              bool const same = codec::xxh3(codec::byte_view(
                                    back.data.get(), e.length)) == e.checksum;
              codec::scratch::give(std::move(back));
              if (record.capacity() > (8u << 20)) codec::bytes().swap(record);
              if (!same) {
                store_fail(store_errc::corrupt,
                           "chunk at " + std::to_string(e.offset) +
                               " does not decode to its bytes");
              }
            });
          }
          m.encoded.reset();
          return flow::continue_msg();
        });
    flow::make_edge(source, limit);
    flow::make_edge(limit, encode);
    flow::make_edge(encode, order);
    flow::make_edge(order, append);
    flow::make_edge(append, verify);
    flow::make_edge(verify, limit.decrementer());
    source.activate();
    g.wait_for_all();
    // A stop skips chunks; the commit below never runs then.
    if (hashed == copy->bytes().size()) file_checksum = whole.digest();
  }

  out.chunk_seconds =
      std::chrono::duration<double>(clock::now() - chosen).count();
  out.chunk_cpu_seconds = process_cpu_seconds() - cpu_chosen;
  if (writer) out.fallbacks = writer->fallbacks();
  if (!stop()) {
    err.guard("commit", [&] {
      staged_commit::file_info f;
      f.size = copy->bytes().size();
      f.mtime_ns = copy->mtime_ns();
      if (!file_checksum) {
        store_fail(store_errc::corrupt, "the chunks do not cover the file");
      }
      f.checksum = *file_checksum;
      f.programs = std::move(programs);
      f.cancelled = req.cancelled;
      job_record j;
      j.finished_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
      j.ino = req.ino;
      j.size = f.size;
      j.micros = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(clock::now() -
                                                                started)
              .count());
      j.name = req.name;
      f.job = j;
      out.result = commit->commit(f);
    });
  }
  err.guard("finish", [&] { commit.reset(); });  // releases the append lock
  out.seconds = std::chrono::duration<double>(clock::now() - started).count();
  if (out.result.ino == 0) {  // not committed
    out.code = err.failed() ? err.code() : store_errc::cancelled;
    out.error = err.failed() ? err.what() : "cancelled";
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace

compress_outcome compress_staged_file(store& s,
                                      codec::program_chooser const& chooser,
                                      compress_request const& req) noexcept {
  try {
    name_tbb_workers_of_this_thread();
  } catch (...) {  // unnamed workers work all the same
  }
  // Encoding without the encoder's own check decodes each chunk once (in
  // the verify stage) instead of twice. A chunk that fails it means a
  // faulty operator: run again carefully, so it falls back per chunk.
  compress_outcome out = run_job(s, chooser, req, false);
  if (!out.ok && out.code == store_errc::corrupt) {
    out = run_job(s, chooser, req, true);
  }
  return out;
}

}  // namespace brevis::fs
