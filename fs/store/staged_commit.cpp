#include "fs/store/staged_commit.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "fs/store/job_records.h"
#include "fs/store/pack_syncer.h"
#include "fs/store/store_impl.h"

namespace brevis::fs {

using namespace detail;

namespace {

bool is_staged_file(inode_rec const& r) {
  return S_ISREG(r.mode) && r.nlink > 0 &&
         r.state == static_cast<uint32_t>(file_state::staged);
}

}  // namespace

namespace {
// Writeback is started every this many bytes (sync_file_range, which does
// not wait), so the kernel's share of a sync is done early; the host's
// share needs fdatasync itself, every sync_step.
constexpr uint64_t writeback_step = 8u << 20;
// Synced behind the appends (pack_syncer.h) every this many bytes. The
// mount's job for ckpt-300m (185 MB appended), 8 runs each: 1.08-1.18 s
// with no steps (160 ms of it the commit's sync), 0.96-1.10 s with 32 MiB
// steps, 0.96-1.06 s with 64 MiB.
constexpr uint64_t sync_step = 32u << 20;
}  // namespace

struct staged_commit::state {
  explicit state(store::impl& st) : s(st), appending(st) {}

  store::impl& s;
  store::impl::append_guard appending;  // first in, last out
  uint64_t ino = 0;

  std::unique_ptr<pack_file> pack;
  std::unique_ptr<pack_syncer> syncer;  // from the first append
  std::string path;
  uint64_t pack_id = 0;
  bool fresh = false;
  uint64_t start = 0, pos = 0;
  uint64_t flushing = 0;    // writeback started up to here (0: from start)
  uint64_t live_added = 0;  // record bytes this job appended
  bool committing = false, done = false;

  /// Payloads the chunks name, with the references this job adds.
  struct use {
    placement where;
    uint64_t refs = 0;
    // The stored copy was damaged or missing: ours replaces it.
    bool heals = false;
  };
  std::unordered_map<payload_key, use, payload_key_hash> uses;
  std::unordered_map<uint64_t, chunk_rec> by_offset;   // for ref chunks
  std::vector<std::pair<uint64_t, chunk_rec>> chunks;  // offset, record
  uint64_t stored = 0, written = 0, dedup = 0;
};

staged_commit::staged_commit(store& st, uint64_t ino)
    : s_(std::make_unique<state>(*st.impl_)) {
  state& c = *s_;
  store::impl& s = c.s;
  c.ino = ino;
  std::optional<pack_rec> newest;
  uint64_t next_pack = 1;
  s.read_txn([&](txn& t) {
    auto v = t.get(s.inodes, inode_key(ino));
    if (!v || !is_staged_file(decode_inode(*v))) {
      store_fail(store_errc::not_found,
                 "inode " + std::to_string(ino) + " is no longer staged");
    }
    cursor k(t, s.packs);
    if (k.last() && k.key().size() == 8) {
      pack_rec r;
      c.pack = s.open_for_append(read_be64(k.key().data()), k.value(), r);
      if (c.pack) {
        c.pack_id = read_be64(k.key().data());
        newest = r;
      }
    }
    if (auto n = t.get(s.meta, as_bytes_view("next_pack"));
        n && n->size() == 8) {
      next_pack = std::max<uint64_t>(1, codec::load_le<uint64_t>(n->data()));
    }
    return 0;
  });
  // The append lock is held: no one else appends, so what the index says
  // about the newest pack stays true until our commit.
  if (newest) {
    c.path = s.pack_path(c.pack_id);
    c.start = c.pos = newest->end;
  } else {
    // Created at the first append: a job that writes nothing (an empty
    // file, all payloads stored already) leaves no empty pack behind.
    c.fresh = true;
    c.pack_id = next_pack;
    c.path = s.pack_path(c.pack_id);
    c.start = c.pos = pack_header_size;
  }
}

staged_commit::~staged_commit() {
  state& c = *s_;
  c.syncer.reset();  // before the pack is cut or removed
  if (c.done || c.committing || !c.pack) return;
  if (c.fresh) {
    ::unlink(c.path.c_str());
  } else if (c.pos != c.start) {
    try {
      c.pack->truncate(c.start);
    } catch (...) {
    }
  }
}

staged_commit::placement staged_commit::add_chunk(codec::chunk_entry const& e,
                                                  uint64_t program_hash,
                                                  codec::byte_view payload) {
  state& c = *s_;
  chunk_rec cr;
  if (e.is_ref) {
    cr = c.by_offset.at(e.ref_offset);
  } else {
    cr.length = e.length;
    cr.program = program_hash;
    cr.payload = hash_payload(payload);
    cr.checksum = e.checksum;
    c.by_offset[e.offset] = cr;
  }
  auto it = c.uses.find(cr.payload);
  if (it == c.uses.end()) {
    placement p;
    p.key = cr.payload;
    std::optional<payload_rec> known =
        c.s.read_txn([&](txn& t) -> std::optional<payload_rec> {
          auto v = t.get(c.s.payloads, cr.payload.b);
          if (!v) return std::nullopt;
          return decode_payload(*v);
        });
    // Named again only if it reads back: a damaged copy named by a new
    // file made it unreadable too, while its good bytes were at hand.
    bool heals = false;
    if (known && !c.s.payload_intact(*known, cr.payload)) {
      known.reset();
      heals = true;
    }
    if (known) {
      p.pack = known->pack;
      p.offset = known->offset;
      p.length = known->length;
    } else {
      p.pack = c.pack_id;
      p.offset = c.pos;
      p.length = payload.size();
      p.written = true;
      if (!c.pack) c.pack = c.s.create_pack(c.pack_id);
      c.pos = c.pack->write_record(c.pos, cr.payload, payload);
      // Start writing back what is appended as it goes, so the sync before
      // the commit waits for the last few MiB, not the whole file.
      uint64_t const from = std::max(c.flushing, c.start);
      if (c.pos - from >= writeback_step) {
        c.pack->start_writeback(from, c.pos);
        c.flushing = c.pos;
      }
      if (!c.syncer) {
        c.syncer = std::make_unique<pack_syncer>(*c.pack, sync_step);
      }
      c.syncer->appended(c.pos);
      c.live_added += record_size(payload.size());
      c.written += payload.size();
      c.s.hit("pack_write");
    }
    it = c.uses.emplace(cr.payload, state::use{p, 0, heals}).first;
  }
  if (it->second.refs > 0 || !it->second.where.written) ++c.dedup;
  // A payload the file names again (a repeated chunk) is stored once.
  if (it->second.refs == 0) c.stored += it->second.where.length;
  ++it->second.refs;
  c.chunks.emplace_back(e.offset, cr);
  return it->second.where;
}

void staged_commit::read_back(placement const& p, codec::bytes& out) const {
  s_->pack->read_record(p.offset, p.key, p.length, out);
}

add_result staged_commit::commit(file_info const& f) {
  state& c = *s_;
  store::impl& s = c.s;
  if (c.syncer) c.syncer->finish();  // throws what a step's sync met
  if (c.pack && c.pos != c.start) c.pack->sync();
  s.hit("pack_synced");
  add_result res;
  res.ino = c.ino;
  res.size = f.size;
  res.stored = c.stored;
  res.written = c.written;
  res.chunks = c.chunks.size();
  res.dedup_chunks = c.dedup;
  s.write_txn([&](txn& t) {
    inode_rec r = s.get_inode(t, c.ino);
    if (!is_staged_file(r)) {
      store_fail(store_errc::not_found,
                 "inode " + std::to_string(c.ino) + " is no longer staged");
    }
    if (f.cancelled && f.cancelled()) {
      store_fail(store_errc::cancelled, "compression cancelled");
    }
    for (auto const& [hash, bytes] : f.programs) {
      if (!t.get(s.programs, program_key(hash))) {
        t.put(s.programs, program_key(hash), bytes);
      }
    }
    uint64_t live = c.live_added;
    for (auto const& [key, u] : c.uses) {
      auto v = t.get(s.payloads, key.b);
      if (v) {
        payload_rec pr = decode_payload(*v);
        if (u.heals) {
          live -=
              std::min(live, s.repoint_payload(t, pr, c.pack_id, u.where.offset,
                                               u.where.length));
          ++res.healed;
        } else if (u.where.written) {
          // Stored meanwhile by no one (the append lock): only a payload
          // we did not write is found here. Ours would be a dead copy.
          live -= record_size(u.where.length);
        }
        pr.refs += u.refs;
        t.put(s.payloads, key.b, encode(pr));
      } else if (u.where.written) {
        payload_rec pr{c.pack_id, u.where.offset, u.where.length, u.refs};
        t.put(s.payloads, key.b, encode(pr));
      } else {
        // The last file naming it went while this job ran (a checkpoint
        // renamed over its older version shares most of its tensors). Its
        // bytes are still where they were: packs are moved or removed only
        // under the append lock, which this job holds. Named again if they
        // still read back, and live again in their pack.
        payload_rec pr{u.where.pack, u.where.offset, u.where.length, u.refs};
        if (!t.get(s.packs, pack_key(pr.pack)) || !s.payload_intact(pr, key)) {
          store_fail(store_errc::io,
                     "payload " + key.hex() +
                         " it shares was removed meanwhile; trying again "
                         "later");
        }
        s.add_live(t, pr.pack, static_cast<int64_t>(record_size(pr.length)));
        t.put(s.payloads, key.b, encode(pr));
      }
    }
    s.drop_chunks(t, c.ino);  // none for a staged file; tidy if any
    for (auto const& [off, cr] : c.chunks) {
      t.put(s.chunks, chunk_key(c.ino, off), encode(cr));
    }
    pack_rec prec;
    if (!c.pack) {
      // Nothing appended: no pack to record.
    } else if (auto v = t.get(s.packs, pack_key(c.pack_id))) {
      prec = decode_pack(*v);
      prec.live += live;
    } else {
      prec.live = live;
      codec::bytes nb;
      codec::put_le<uint64_t>(nb, c.pack_id + 1);
      t.put(s.meta, as_bytes_view("next_pack"), nb);
    }
    if (c.pack) {
      prec.end = c.pos;
      t.put(s.packs, pack_key(c.pack_id), encode(prec));
    }

    r.size = f.size;
    r.stored = c.stored;
    r.mtime_ns = f.mtime_ns;
    r.checksum = f.checksum;
    r.chunk_count = static_cast<uint32_t>(c.chunks.size());
    r.state = static_cast<uint32_t>(file_state::compressed);
    t.put(s.inodes, inode_key(c.ino), encode(r));
    if (f.job) {
      job_record j = *f.job;
      j.stored = c.stored;
      put_job(t, s.meta, s.extra, j);
    }
    c.committing = true;
    s.hit("commit");  // tests: a commit whose outcome is unknown
    s.commit(t);
    return 0;
  });
  c.done = true;
  s.hit("committed");
  return res;
}

}  // namespace brevis::fs
