// fsck and gc: the store's maintenance passes.

#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codec/core/checksum.h"
#include "codec/dsl/interpreter.h"
#include "fs/store/store_impl.h"

namespace brevis::fs {

using namespace detail;

namespace {

struct record_info {
  payload_key key;
  uint64_t length = 0;
  bool ok = false;
};

struct inode_check {
  inode_rec rec;
  uint64_t covered = 0;  // contiguous bytes from 0 seen so far
  uint64_t chunks = 0;
  uint64_t links = 0;  // directory entries naming it
  bool gap = false;
  std::string bad;  // why it cannot be read, empty when it can
  // Some of it is damaged. Else a `bad` file is unreadable only by this
  // brevis (a program of a later format version, intact): --repair keeps it.
  bool damaged = false;

  // Records why it cannot be read: the first damage is the reason given,
  // else the first failure.
  void fail(std::string why, bool damage = true) {
    if (bad.empty() || (damage && !damaged)) bad = std::move(why);
    damaged |= damage;
  }
};

std::string ino_name(uint64_t ino) { return "inode " + std::to_string(ino); }

// A directory entry's key is the parent's 8-byte inode number, then the name;
// a damaged store may hold a shorter key, which has no name.
std::string dirent_name(std::span<uint8_t const> key) {
  if (key.size() <= 8) return {};
  return {key.begin() + 8, key.end()};
}

}  // namespace

namespace {
// index/check.lock held shared for a plain check's run (impl::open_check_lock).
class shared_check_lock {
 public:
  explicit shared_check_lock(int fd) : fd_(fd) {
    while (fd_ >= 0 && ::flock(fd_, LOCK_SH) != 0 && errno == EINTR) {
    }
  }
  ~shared_check_lock() {
    if (fd_ >= 0) ::close(fd_);
  }
  shared_check_lock(shared_check_lock const&) = delete;
  shared_check_lock& operator=(shared_check_lock const&) = delete;
  shared_check_lock(shared_check_lock&&) = delete;
  shared_check_lock& operator=(shared_check_lock&&) = delete;

 private:
  int fd_;
};
}  // namespace

namespace {
uint64_t allocated_bytes(std::string const& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0
             ? static_cast<uint64_t>(st.st_blocks) * 512
             : 0;
}
}  // namespace

// The dead records of the packs gc keeps are punched out (FORMAT.md S.2.1):
// those of files removed before brevis punched, or while a mount could not.
// With the append and writer locks held (gc's), and index/check.lock taken
// at once or not at all: a plain fsck reading leaves them whole.
void store::impl::punch_kept_packs(gc_report& rep) const {
  switch (may_punch()) {
    case punch_permit::granted:
      break;
    case punch_permit::checking:
      rep.punching_deferred = true;
      return;
    case punch_permit::no_lock_file:
      return;
  }
  // The End of each pack kept that holds dead bytes: a pack whose records
  // are all live (Live = End - 16) has nothing to punch, and its headers
  // are not read (one pread a record).
  std::map<uint64_t, uint64_t> ends;
  // Per pack, the records payloads name: offset -> (key, length).
  std::unordered_map<uint64_t,
                     std::map<uint64_t, std::pair<payload_key, uint64_t>>>
      live;
  read_txn([&](txn& t) {
    {
      cursor c(t, packs);
      for (bool ok = c.first(); ok; ok = c.next()) {
        if (c.value().size() != pack_rec_size) continue;  // fsck's to mend
        pack_rec const pr = decode_pack(c.value());
        if (pr.live + pack_header_size >= pr.end) continue;
        ends[key_u64(c.key())] = pr.end;
      }
    }
    cursor c(t, payloads);
    for (bool ok = c.first(); ok; ok = c.next()) {
      if (c.key().size() != 16) continue;  // fsck's to mend
      payload_rec const r = decode_payload(c.value());
      payload_key k;
      std::memcpy(k.b.data(), c.key().data(), 16);
      live[r.pack][r.offset] = {k, r.length};
    }
    return 0;
  });
  for (auto const& [id, end] : ends) {
    std::string const path = pack_path(id);
    std::unique_ptr<pack_file> p;
    try {
      p = std::make_unique<pack_file>(path, false, true);
    } catch (store_error const&) {
      continue;  // fsck reports it
    }
    uint64_t const before = allocated_bytes(path);
    auto const& named = live[id];
    // The headers walked first: the records must tile [16, End) exactly,
    // and every record a payload names must be one of them, with its key
    // and length. Otherwise the pack's framing is damaged, and nothing in
    // it is punched: a damaged length could reach over live records.
    std::vector<std::pair<uint64_t, std::pair<payload_key, uint64_t>>> dead;
    size_t matched = 0;
    uint64_t at = pack_header_size;
    bool framed = true;
    while (framed && at < end) {
      auto const h = p->header_at(at);
      framed = h && at + record_size(h->second) <= end;
      if (!framed) break;
      if (auto const it = named.find(at); it != named.end()) {
        framed = it->second.first == h->first && it->second.second == h->second;
        ++matched;
      } else {
        dead.emplace_back(at, *h);
      }
      at += record_size(h->second);
    }
    if (!framed || at != end || matched != named.size()) {
      rep.damaged.push_back(pack_name(id) +
                            ": its record headers do not match the index "
                            "(none of its dead records was punched)");
      continue;
    }
    for (auto const& [off, h] : dead) {
      if (p->punch_record(off, h.first, h.second)) ++rep.records_punched;
    }
    rep.bytes_punched += before - std::min(before, allocated_bytes(path));
  }
}

fsck_report store::fsck(fsck_options const& opt) {
  impl& s = *impl_;
  fsck_report rep;
  std::optional<impl::append_guard> appending;
  std::optional<impl::writer_guard> guard;
  std::optional<shared_check_lock> checking;
  if (opt.repair) {
    appending.emplace(s);  // which the puncher needs too
    guard.emplace(s);
  } else {
    // Before the snapshot: dead records this check may read stay whole.
    checking.emplace(s.open_check_lock());
  }

  std::map<uint64_t, pack_rec> packs;
  std::set<uint64_t> bad_pack_records;     // of another size: end unknown
  std::map<uint64_t, uint64_t> pack_size;  // of the files that opened
  std::map<std::pair<uint64_t, uint64_t>, record_info> records;
  std::map<uint64_t, inode_check> inodes;
  std::vector<std::array<uint8_t, 16>> dangling_chunks;
  std::unordered_map<payload_key, payload_rec, payload_key_hash> payloads;
  std::unordered_map<payload_key, uint64_t, payload_key_hash> refs;
  std::unordered_set<payload_key, payload_key_hash> bad_payloads;

  s.read_txn([&](txn& t) {
    {
      cursor c(t, s.packs);
      for (bool ok = c.first(); ok; ok = c.next()) {
        uint64_t const id = key_u64(c.key());
        if (c.value().size() == pack_rec_size) {
          packs[id] = decode_pack(c.value());
          continue;
        }
        // Scanned to the file's end below; --repair rebuilds the record.
        bad_pack_records.insert(id);
        packs[id] = {};
        rep.problems.push_back(pack_name(id) + ": its index record has " +
                               std::to_string(c.value().size()) +
                               " bytes, not " + std::to_string(pack_rec_size));
      }
    }
    // A pack without a record that payloads point into lost its record
    // (recovery kept it): scanned like a damaged record's. Others are an
    // append not committed yet (a live mount's) or a leftover the next
    // open removes.
    std::optional<std::unordered_map<uint64_t, uint64_t>> in_use;
    for (uint64_t const id : s.pack_files()) {
      if (packs.contains(id)) continue;
      if (!in_use) in_use = s.payload_pack_ends(t);
      if (!in_use->contains(id)) continue;
      bad_pack_records.insert(id);
      packs[id] = {};
      rep.problems.push_back(pack_name(id) +
                             ": no index record, though payloads are in it");
    }
    for (auto& entry : packs) {
      uint64_t const id = entry.first;  // captured below: not a binding
      pack_rec& pr = entry.second;
      std::string const name = pack_name(id);
      std::unique_ptr<pack_file> p;
      try {
        p = std::make_unique<pack_file>(s.pack_path(id), false, false);
      } catch (store_error const& e) {
        rep.problems.push_back(name + ": " + e.what());
        continue;
      }
      uint64_t const size = p->file_size();
      pack_size[id] = size;
      if (bad_pack_records.contains(id)) pr.end = size;
      if (size < pr.end) {
        rep.problems.push_back(name + ": " + std::to_string(pr.end - size) +
                               " committed bytes are missing");
      }
      uint64_t const stop = p->scan(
          pr.end,
          [&](uint64_t off, payload_key const& k, uint64_t len, bool ok) {
            // A damaged record no payload points at is garbage gc drops;
            // damaged live ones are reported through their payload below.
            ++rep.records;
            records[{id, off}] = {k, len, ok};
          });
      if (stop < std::min(pr.end, size)) {
        rep.problems.push_back(name + ": unreadable record header at " +
                               std::to_string(stop) +
                               "; later records are not checked");
      }
    }
    {
      cursor c(t, s.payloads);
      for (bool ok = c.first(); ok; ok = c.next()) {
        payload_key k;
        std::memcpy(k.b.data(), c.key().data(),
                    std::min<size_t>(16, c.key().size()));
        payload_rec pr = decode_payload(c.value());
        payloads[k] = pr;
        auto it = records.find({pr.pack, pr.offset});
        bool good = it != records.end() && it->second.key == k &&
                    it->second.length == pr.length && it->second.ok;
        if (it == records.end()) {
          // Past a header the scan could not read: try the record itself.
          try {
            s.pack_for_read(pr.pack)->read_record(pr.offset, k, pr.length);
            good = true;
          } catch (store_error const&) {
          }
        }
        if (!good) {
          bad_payloads.insert(k);
          rep.problems.push_back(
              "payload " + k.hex() + " (" + pack_name(pr.pack) + " at " +
              std::to_string(pr.offset) + "): no valid record there");
        }
      }
    }
    {
      cursor c(t, s.inodes);
      for (bool ok = c.first(); ok; ok = c.next()) {
        inodes[key_u64(c.key())].rec = decode_inode(c.value());
      }
    }
    {
      cursor c(t, s.dirents);
      for (bool ok = c.first(); ok; ok = c.next()) {
        uint64_t const target = c.value().size() == 8
                                    ? codec::load_le<uint64_t>(c.value().data())
                                    : 0;
        auto it = inodes.find(target);
        if (it == inodes.end()) {
          std::string problem = "directory entry '";
          problem += dirent_name(c.key());
          problem += "' names missing " + ino_name(target);
          rep.problems.push_back(std::move(problem));
        } else {
          ++it->second.links;
        }
      }
    }
    cursor c(t, s.chunks);
    codec::bytes out;
    for (bool ok = c.first(); ok; ok = c.next()) {
      ++rep.chunks;
      uint64_t const ino = key_u64(c.key());
      uint64_t const off = key_u64(c.key(), 8);
      auto it = inodes.find(ino);
      chunk_rec cr;
      try {
        cr = decode_chunk(c.value());
      } catch (store_error const& e) {
        // Its file is damaged (the gap it leaves shows too); a record of
        // no file is dropped with the others by --repair.
        if (it == inodes.end()) {
          std::memcpy(dangling_chunks.emplace_back().data(), c.key().data(),
                      16);
          rep.problems.push_back("chunk record of missing " + ino_name(ino) +
                                 ": " + e.what());
        } else {
          it->second.fail("bytes " + std::to_string(off) + ": " + e.what(),
                          true);
        }
        continue;
      }
      if (it == inodes.end()) {
        std::memcpy(dangling_chunks.emplace_back().data(), c.key().data(), 16);
        rep.problems.push_back("chunk record of missing " + ino_name(ino));
        continue;
      }
      inode_check& ic = it->second;
      ++refs[cr.payload];
      ++ic.chunks;
      if (off != ic.covered) ic.gap = true;
      ic.covered = off + cr.length;
      auto set_bad = [&](std::string const& why, bool damage = true) {
        ic.fail("bytes " + std::to_string(off) + ": " + why, damage);
      };
      auto pit = payloads.find(cr.payload);
      if (pit == payloads.end()) {
        set_bad("payload " + cr.payload.hex() + " is missing");
        continue;
      }
      if (bad_payloads.count(cr.payload)) {
        set_bad("payload " + cr.payload.hex() + " is damaged");
        continue;
      }
      std::shared_ptr<codec::node const> prog;
      try {
        prog = s.program(t, cr.program);
      } catch (store_error const& e) {
        set_bad(e.what(), e.code() != store_errc::too_new);
        continue;
      }
      if (!opt.decode) continue;
      try {
        codec::bytes payload = s.pack_for_read(pit->second.pack)
                                   ->read_record(pit->second.offset, cr.payload,
                                                 pit->second.length);
        out.resize(cr.length);
        codec::decode_chunk(*prog, payload, cr.length, out.data());
        if (codec::xxh3(out) != cr.checksum) set_bad("checksum mismatch");
      } catch (std::exception const& e) {
        set_bad(e.what());
      }
    }
    return 0;
  });

  for (auto& [ino, ic] : inodes) {
    if (S_ISDIR(ic.rec.mode)) continue;
    ++rep.files;
    // Staged files keep their bytes in staging/, symlinks in `extra`.
    bool const chunked =
        S_ISREG(ic.rec.mode) &&
        ic.rec.state == static_cast<uint32_t>(file_state::compressed);
    if (chunked && (ic.gap || ic.covered != ic.rec.size)) {
      ic.fail("chunk records do not cover the file");
    }
    // A staged file's bytes are all in its staged copy: without it they are
    // lost (a live mount may be between making an inode and its copy).
    bool const staged =
        S_ISREG(ic.rec.mode) &&
        ic.rec.state == static_cast<uint32_t>(file_state::staged);
    struct stat copy {};
    bool const have_copy =
        staged && ::stat(staging_path(ino).c_str(), &copy) == 0;
    bool const no_copy = staged && !have_copy && errno == ENOENT;
    if (no_copy && !opt.mounted) {
      ic.fail("its staged copy " + staging_path(ino) + " is missing");
    } else if (have_copy && (copy.st_mode & S_ISVTX) != 0) {
      // The mount's mark (FORMAT.md S.1): its writer was told at close.
      ic.fail("a write of its staged copy was lost (a full disk?)");
    }
    if (chunked && ic.chunks != ic.rec.chunk_count) {
      ic.fail("chunk count " + std::to_string(ic.chunks) + ", inode says " +
              std::to_string(ic.rec.chunk_count));
    }
    if (ic.damaged) {
      rep.problems.push_back(ino_name(ino) + " cannot be read: " + ic.bad);
      continue;
    }
    if (!ic.bad.empty()) {
      rep.too_new.push_back(ino_name(ino) + ": " + ic.bad);
    }
    if (ic.links == 0 && opt.mounted && ic.rec.nlink == 0) {
      rep.open_orphans.push_back(ino_name(ino));
    } else if (ic.links == 0) {
      rep.problems.push_back(ino_name(ino) + " has no directory entry");
    } else if (ic.links != ic.rec.nlink) {
      rep.problems.push_back(ino_name(ino) + " link count " +
                             std::to_string(ic.rec.nlink) + ", entries " +
                             std::to_string(ic.links));
    }
  }
  std::map<uint64_t, uint64_t> live;
  std::map<uint64_t, uint64_t> payload_end;  // of the last record named
  for (auto const& [k, pr] : payloads) {
    uint64_t& e = payload_end[pr.pack];
    e = std::max(e, pr.offset + record_size(pr.length));
    uint64_t const want = refs.count(k) ? refs[k] : 0;
    if (pr.refs != want) {
      rep.problems.push_back("payload " + k.hex() + " reference count " +
                             std::to_string(pr.refs) + ", expected " +
                             std::to_string(want));
    }
    live[pr.pack] += record_size(pr.length);
  }
  for (auto const& [id, pr] : packs) {
    if (!bad_pack_records.contains(id) && pr.end < payload_end[id]) {
      // Damage: an open would cut those payloads off and an append would
      // write over them (both refused: truncate_interrupted_appends and
      // open_for_append).
      rep.problems.push_back(pack_name(id) + ": committed end " +
                             std::to_string(pr.end) +
                             ", before payloads it holds (up to " +
                             std::to_string(payload_end[id]) + ")");
    }
    if (!bad_pack_records.contains(id) && pr.live != live[id]) {
      rep.problems.push_back(pack_name(id) + ": live bytes " +
                             std::to_string(pr.live) + ", expected " +
                             std::to_string(live[id]));
    }
  }
  if (!opt.repair || rep.problems.empty()) return rep;

  // Repair: drop what cannot be read, then recount from what is left.
  s.write_txn_locked([&](txn& t) {
    std::vector<std::string> repairs;
    std::unordered_set<uint64_t> drop;
    for (auto const& [ino, ic] : inodes) {
      if (S_ISDIR(ic.rec.mode)) continue;
      bool const open_orphan =
          ic.links == 0 && opt.mounted && ic.rec.nlink == 0;
      if (ic.damaged || (ic.links == 0 && !open_orphan)) drop.insert(ino);
    }
    {
      std::vector<codec::bytes> del;
      cursor c(t, s.dirents);
      for (bool ok = c.first(); ok; ok = c.next()) {
        uint64_t const target = c.value().size() == 8
                                    ? codec::load_le<uint64_t>(c.value().data())
                                    : 0;
        if (drop.count(target) || !inodes.count(target)) {
          del.emplace_back(c.key().begin(), c.key().end());
        }
      }
      for (auto const& k : del) {
        t.del(s.dirents, k);
        repairs.push_back("removed directory entry '" + dirent_name(k) + "'");
      }
    }
    for (uint64_t ino : drop) {
      std::vector<std::array<uint8_t, 16>> keys;
      cursor c(t, s.chunks);
      for (bool ok = c.seek(chunk_key(ino, 0)); ok; ok = c.next()) {
        if (c.key().size() != 16 || key_u64(c.key()) != ino) break;
        std::memcpy(keys.emplace_back().data(), c.key().data(), 16);
      }
      for (auto const& k : keys) t.del(s.chunks, k);
      t.del(s.inodes, inode_key(ino));
      repairs.push_back("removed unreadable " + ino_name(ino));
    }
    for (auto const& k : dangling_chunks) t.del(s.chunks, k);
    if (!dangling_chunks.empty()) {
      repairs.push_back("removed " + std::to_string(dangling_chunks.size()) +
                        " chunk records of missing inodes");
    }
    // (Nothing captured is changed here: a full map runs this again.)
    for (auto const& [ino, ic] : inodes) {
      if (drop.count(ino) || S_ISDIR(ic.rec.mode)) continue;
      if (ic.rec.nlink != ic.links) {
        inode_rec fixed_rec = ic.rec;
        fixed_rec.nlink = static_cast<uint32_t>(ic.links);
        t.put(s.inodes, inode_key(ino), encode(fixed_rec));
        repairs.push_back("fixed the link count of " + ino_name(ino));
      }
    }
    // Recount references from the chunk records that remain.
    std::unordered_map<payload_key, uint64_t, payload_key_hash> count;
    {
      cursor c(t, s.chunks);
      for (bool ok = c.first(); ok; ok = c.next()) {
        ++count[decode_chunk(c.value()).payload];
      }
    }
    std::map<uint64_t, uint64_t> new_live;
    std::map<uint64_t, uint64_t> kept_end;  // of the last payload kept
    uint64_t fixed = 0, removed = 0;
    for (auto const& [k, pr0] : payloads) {
      payload_rec pr = pr0;
      uint64_t const n = count.count(k) ? count[k] : 0;
      if (n == 0 || bad_payloads.count(k)) {
        t.del(s.payloads, k.b);
        ++removed;
        continue;
      }
      if (pr.refs != n) {
        pr.refs = n;
        t.put(s.payloads, k.b, encode(pr));
        ++fixed;
      }
      new_live[pr.pack] += record_size(pr.length);
      uint64_t& e = kept_end[pr.pack];
      e = std::max(e, pr.offset + record_size(pr.length));
    }
    if (fixed) {
      repairs.push_back("fixed " + std::to_string(fixed) + " reference counts");
    }
    if (removed) {
      repairs.push_back("removed " + std::to_string(removed) +
                        " unreferenced or damaged payload records");
    }
    for (auto const& [id, pr0] : packs) {
      pack_rec pr = pr0;
      bool const rebuilt = bad_pack_records.contains(id);
      // A rebuilt or short end reaches the last payload kept: what lies
      // past it is no commit's (the next writer's open truncates it). One
      // past the file's end comes back to it: those bytes are lost, and
      // appends there would leave a hole.
      uint64_t const kept = std::max(pack_header_size, kept_end[id]);
      uint64_t end = rebuilt ? kept : std::max(kept, pr.end);
      if (auto sz = pack_size.find(id); sz != pack_size.end()) {
        end = std::min(end, std::max(kept, sz->second));
      }
      if (rebuilt || pr.end != end || pr.live != new_live[id]) {
        pr.end = end;
        pr.live = new_live[id];
        t.put(s.packs, pack_key(id), encode(pr));
        if (rebuilt) {
          // Its id is taken: a pack made later under it would replace it
          // (a record lost with next_pack's bump may leave it that low).
          uint64_t next = 1;
          if (auto v = t.get(s.meta, as_bytes_view("next_pack"));
              v && v->size() == 8) {
            next = codec::load_le<uint64_t>(v->data());
          }
          if (next <= id) {
            codec::bytes nb;
            codec::put_le<uint64_t>(nb, id + 1);
            t.put(s.meta, as_bytes_view("next_pack"), nb);
          }
        }
        repairs.push_back(pack_name(id) + (rebuilt ? ": rebuilt its record"
                                                   : ": fixed its record"));
      }
    }
    rep.repairs = std::move(repairs);
    return 0;
  });
  return rep;
}

gc_report store::gc(double threshold) {
  impl& s = *impl_;
  gc_report rep;
  impl::append_guard appending(s);
  impl::writer_guard guard(s);

  std::map<uint64_t, pack_rec> packs = s.read_txn([&](txn& t) {
    std::map<uint64_t, pack_rec> m;
    cursor c(t, s.packs);
    for (bool ok = c.first(); ok; ok = c.next()) {
      // A damaged record is left for fsck --repair to rebuild.
      if (c.value().size() != pack_rec_size) continue;
      m[key_u64(c.key())] = decode_pack(c.value());
    }
    return m;
  });

  // The packs to rewrite or remove: mostly dead, or recorded as empty.
  std::erase_if(packs, [&](auto const& p) {
    pack_rec const& pr = p.second;
    uint64_t const body =
        pr.end > pack_header_size ? pr.end - pack_header_size : 0;
    return pr.live != 0 && static_cast<double>(pr.live) >=
                               threshold * static_cast<double>(body);
  });
  // Their live records, verified as they are copied, from one scan of the
  // payloads (a scan per pack made gc quadratic in the store's size). Looked
  // up for an "empty" pack too: a damaged Live must not delete payloads.
  // The locks held keep payloads from moving into these packs meanwhile; a
  // payload removed meanwhile is copied and then skipped by the commit.
  using live_records = std::vector<std::pair<payload_key, payload_rec>>;
  std::map<uint64_t, live_records> const live_of = s.read_txn([&](txn& t) {
    std::map<uint64_t, live_records> m;
    cursor c(t, s.payloads);
    for (bool ok = c.first(); ok; ok = c.next()) {
      payload_rec const r = decode_payload(c.value());
      if (!packs.contains(r.pack)) continue;
      if (c.key().size() != 16) {
        store_fail(store_errc::bad_store, "index: bad payload key");
      }
      payload_key k;
      std::memcpy(k.b.data(), c.key().data(), 16);
      m[r.pack].emplace_back(k, r);
    }
    return m;
  });

  std::unique_ptr<pack_file> dest;
  uint64_t dest_id = 0;
  pack_rec dest_rec;
  for (auto const& candidate : packs) {
    // A plain variable: lambdas below capture it (clang before 16 rejects
    // capturing a structured binding).
    uint64_t const id = candidate.first;
    if (id == dest_id) continue;
    auto const found = live_of.find(id);
    live_records const no_records;
    live_records const& live =
        found != live_of.end() ? found->second : no_records;
    std::vector<std::pair<payload_key, uint64_t>> moved;  // key, new offset
    bool unreadable = false;
    uint64_t copied = 0;  // counted as moved once committed
    if (!live.empty()) {
      pack_file src(s.pack_path(id), false, false);
      if (!dest) {
        dest_id = s.write_txn_locked(
            [&](txn& t) { return s.next_counter(t, "next_pack", 1); });
        dest = s.create_pack(dest_id);
        dest_rec = {pack_header_size, 0};
      }
      uint64_t pos = dest_rec.end;
      for (auto const& [k, r] : live) {
        codec::bytes payload;
        try {
          payload = src.read_record(r.offset, k, r.length);
        } catch (store_error const& e) {
          if (e.code() != store_errc::corrupt) throw;
          unreadable = true;  // fsck --repair decides about it
          rep.damaged.emplace_back(e.what());
          break;
        }
        moved.emplace_back(k, pos);
        pos = dest->write_record(pos, k, payload);
        copied += payload.size();
      }
      if (unreadable) {
        dest->truncate(dest_rec.end);
        continue;
      }
      dest->sync();
      s.hit("gc_copied");
      // The destination's record as committed: built afresh in each run of
      // the transaction (a full map runs it again, and a count kept outside
      // it counted the moved bytes twice).
      dest_rec = s.write_txn_locked([&](txn& t) {
        pack_rec next = dest_rec;
        for (auto const& [k, off] : moved) {
          auto v = t.get(s.payloads, k.b);
          if (!v) continue;
          payload_rec r = decode_payload(*v);
          r.pack = dest_id;
          r.offset = off;
          t.put(s.payloads, k.b, encode(r));
          next.live += record_size(r.length);
        }
        next.end = pos;
        t.put(s.packs, pack_key(dest_id), encode(next));
        t.del(s.packs, pack_key(id));
        return next;
      });
      rep.records_moved += moved.size();
      rep.bytes_moved += copied;
      ++rep.packs_rewritten;
    } else {
      s.write_txn_locked([&](txn& t) { return t.del(s.packs, pack_key(id)); });
      ++rep.packs_removed;
    }
    s.hit("gc_committed");
    s.forget_pack(id);
    std::string const path = s.pack_path(id);
    struct stat st;
    uint64_t const size =
        ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      store_fail_errno(errno, "unlink " + path);
    }
    rep.bytes_reclaimed += size;
  }
  if (dest) rep.bytes_reclaimed -= std::min(rep.bytes_reclaimed, dest_rec.end);
  if (dest && dest_rec.end == pack_header_size) {
    // Made for records it never got (their pack was damaged): no commit
    // names it.
    ::unlink(s.pack_path(dest_id).c_str());
  }

  s.punch_kept_packs(rep);

  // Programs no chunk uses any more.
  rep.programs_removed = s.write_txn_locked([&](txn& t) {
    std::unordered_set<uint64_t> used;
    {
      cursor c(t, s.chunks);
      for (bool ok = c.first(); ok; ok = c.next()) {
        try {
          used.insert(decode_chunk(c.value()).program);
        } catch (store_error const&) {
          // A damaged record's program is unknown: none is dropped.
          return uint64_t{0};
        }
      }
    }
    std::vector<uint64_t> drop;
    {
      cursor c(t, s.programs);
      for (bool ok = c.first(); ok; ok = c.next()) {
        uint64_t h = key_u64(c.key());
        if (!used.count(h)) drop.push_back(h);
      }
    }
    for (uint64_t h : drop) t.del(s.programs, program_key(h));
    return static_cast<uint64_t>(drop.size());
  });
  return rep;
}

}  // namespace brevis::fs
