// The store's filesystem operations: directories, names, links, symlinks,
// attributes, extended attributes and staged files (what the mount needs
// beyond add/read/unlink).

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "fs/store/store_impl.h"

namespace brevis::fs {

using namespace detail;

namespace {

// Keys of `extra`: u64 inode (big-endian), a kind byte, then a name.
enum class extra_kind : uint8_t {
  link_target = 'L',  // symlink target bytes
  parent = 'P',       // a directory's parent (u64 little-endian)
  xattr = 'X',        // one extended attribute; name after the kind
};

codec::bytes extra_key(uint64_t ino, extra_kind kind,
                       std::string_view name = {}) {
  codec::bytes k(9 + name.size());
  auto p = be64(ino);
  std::memcpy(k.data(), p.data(), 8);
  k[8] = static_cast<uint8_t>(kind);
  if (!name.empty()) std::memcpy(k.data() + 9, name.data(), name.size());
  return k;
}

// The attributes of inode `ino` (record `r`) as its last name goes at `now`.
inode_attr gone(uint64_t ino, inode_rec r, int64_t now) {
  r.nlink = 0;
  r.ctime_ns = now;
  return to_attr(ino, r);
}

codec::bytes le64(uint64_t v) {
  codec::bytes b;
  codec::put_le<uint64_t>(b, v);
  return b;
}

}  // namespace

void store::impl::drop_extra(txn& t, uint64_t ino) {
  std::vector<codec::bytes> keys;
  {
    cursor c(t, extra);
    auto const prefix = inode_key(ino);
    for (bool ok = c.seek(prefix); ok; ok = c.next()) {
      if (c.key().size() < 9 || key_u64(c.key()) != ino) break;
      keys.emplace_back(c.key().begin(), c.key().end());
    }
  }
  for (auto const& k : keys) t.del(extra, k);
}

namespace {

using detail::txn;

struct ns {
  store::impl& s;
  txn& t;

  inode_rec dir(uint64_t ino) const {
    inode_rec r = s.get_inode(t, ino);
    if (!S_ISDIR(r.mode)) {
      store_fail(store_errc::not_dir,
                 "inode " + std::to_string(ino) + " is not a directory");
    }
    return r;
  }
  void put(uint64_t ino, inode_rec const& r) const {
    t.put(s.inodes, inode_key(ino), encode(r));
  }
  /// A directory's entries changed: its mtime and ctime move, its link
  /// count by `links`.
  void touch_dir(uint64_t ino, int64_t now, int links = 0) const {
    inode_rec r = s.get_inode(t, ino);
    r.mtime_ns = r.ctime_ns = now;
    r.nlink = static_cast<uint32_t>(static_cast<int64_t>(r.nlink) + links);
    put(ino, r);
  }
  bool empty_dir(uint64_t ino) const {
    cursor c(t, s.dirents);
    auto const prefix = inode_key(ino);
    return !c.seek(prefix) || c.key().size() < 8 || key_u64(c.key()) != ino;
  }
  uint64_t parent_of(uint64_t ino) const {
    auto v = t.get(s.extra, extra_key(ino, extra_kind::parent));
    if (!v || v->size() != 8) return root_inode;
    return codec::load_le<uint64_t>(v->data());
  }
  /// One name of non-directory `ino` went away.
  store::unlink_result drop_name(uint64_t ino, inode_rec r,
                                 store::keep_fn const& keep,
                                 int64_t now) const {
    store::unlink_result res;
    res.ino = ino;
    res.state = static_cast<file_state>(r.state);
    if (r.nlink > 1) {
      --r.nlink;
      r.ctime_ns = now;
      put(ino, r);
    } else if (keep && keep(ino)) {
      r.nlink = 0;
      r.ctime_ns = now;
      put(ino, r);
    } else {
      s.drop_inode(t, ino);
      res.dropped = true;
      res.attr = gone(ino, r, now);
      s.hit("unlink_drop");  // tests: decided, not committed yet
    }
    res.nlink = res.dropped ? 0 : r.nlink;
    return res;
  }
};

}  // namespace

// ------------------------------------------------------------------ names

namespace {

/// An empty staged copy at `path`, dated `time_ns` (a copy left there by a
/// create that did not commit is emptied).
void make_empty_copy(std::string const& path, int64_t time_ns) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int const fd =
      ::open(path.c_str(),
             O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) store_fail_errno(errno, "create the staged copy " + path);
  timespec const t{static_cast<time_t>(time_ns / 1'000'000'000),
                   static_cast<long>(time_ns % 1'000'000'000)};
  std::array<timespec, 2> const times = {t, t};
  ::futimens(fd, times.data());  // the mount dates it again if this fails
  ::close(fd);
}

}  // namespace

inode_attr store::make_node(uint64_t parent, std::string_view name,
                            node_spec const& spec) {
  check_name(name);
  uint32_t const type = spec.mode & S_IFMT;
  if (type != S_IFDIR && type != S_IFREG && type != S_IFLNK &&
      type != S_IFIFO && type != S_IFSOCK) {
    store_fail(store_errc::invalid, "unsupported file type");
  }
  impl& s = *impl_;
  return s.unsynced_write_txn([&](txn& t) {
    ns n{s, t};
    n.dir(parent);
    codec::bytes const dk = dirent_key(parent, name);
    if (t.get(s.dirents, dk)) {
      store_fail(store_errc::exists, std::string(name) + " exists");
    }
    uint64_t const ino = s.next_counter(t, "next_ino", root_inode + 1);
    inode_rec r;
    r.mode = type | (type == S_IFLNK ? 0777 : (spec.mode & 07777));
    r.uid = spec.uid;
    r.gid = spec.gid;
    r.mtime_ns = r.ctime_ns = spec.time_ns;
    r.nlink = 1;
    if (type == S_IFDIR) {
      r.nlink = 2;
      t.put(s.extra, extra_key(ino, extra_kind::parent), le64(parent));
    } else if (type == S_IFREG) {
      r.state = static_cast<uint32_t>(file_state::staged);
      // Its empty copy is made before the inode commits: a crash between
      // the two leaves a stray copy (tidy() removes it), never a staged
      // inode without one (a daemon killed inside a create did: fsck then
      // found the copy missing). A failed commit leaves it too, for the
      // next node to take this number, or for tidy(); unlinking it here
      // could race that next node's copy.
      make_empty_copy(s.staging_dir() + "/" + std::to_string(ino),
                      spec.time_ns);
      s.hit("create_copied");  // tests: a create stopped before its commit
    } else if (type == S_IFLNK) {
      if (spec.link_target.empty() || spec.link_target.size() > 4095) {
        store_fail(store_errc::invalid, "bad symlink target");
      }
      r.size = spec.link_target.size();
      t.put(s.extra, extra_key(ino, extra_kind::link_target),
            as_bytes_view(spec.link_target));
    }
    n.put(ino, r);
    t.put(s.dirents, dk, le64(ino));
    n.touch_dir(parent, spec.time_ns, type == S_IFDIR ? 1 : 0);
    return to_attr(ino, r);
  });
}

inode_attr store::link(uint64_t ino, uint64_t parent, std::string_view name,
                       int64_t time_ns) {
  check_name(name);
  impl& s = *impl_;
  return s.unsynced_write_txn([&](txn& t) {
    ns n{s, t};
    n.dir(parent);
    inode_rec r = s.get_inode(t, ino);
    if (S_ISDIR(r.mode)) {
      store_fail(store_errc::is_dir, "cannot link a directory");
    }
    if (r.nlink == 0) store_fail(store_errc::not_found, "inode was removed");
    codec::bytes const dk = dirent_key(parent, name);
    if (t.get(s.dirents, dk)) {
      store_fail(store_errc::exists, std::string(name) + " exists");
    }
    ++r.nlink;
    r.ctime_ns = time_ns;
    n.put(ino, r);
    t.put(s.dirents, dk, le64(ino));
    n.touch_dir(parent, time_ns);
    return to_attr(ino, r);
  });
}

store::unlink_result store::remove(uint64_t parent, std::string_view name,
                                   bool dir, keep_fn const& keep,
                                   int64_t time_ns) {
  impl& s = *impl_;
  return s.freeing_txn([&](txn& t) {
    ns n{s, t};
    codec::bytes const dk = dirent_key(parent, name);
    auto v = t.get(s.dirents, dk);
    if (!v) {
      store_fail(store_errc::not_found, "no '" + std::string(name) + "'");
    }
    uint64_t const ino = dirent_ino(*v);
    inode_rec const r = s.get_inode(t, ino);
    unlink_result res;
    if (dir) {
      if (!S_ISDIR(r.mode)) {
        store_fail(store_errc::not_dir, std::string(name) + " is no dir");
      }
      if (!n.empty_dir(ino)) {
        store_fail(store_errc::not_empty, std::string(name) + " not empty");
      }
      t.del(s.dirents, dk);
      s.drop_inode(t, ino);
      res.ino = ino;
      res.dropped = true;
      res.attr = gone(ino, r, time_ns);
      n.touch_dir(parent, time_ns, -1);
    } else {
      if (S_ISDIR(r.mode)) {
        store_fail(store_errc::is_dir, std::string(name) + " is a directory");
      }
      t.del(s.dirents, dk);
      res = n.drop_name(ino, r, keep, time_ns);
      n.touch_dir(parent, time_ns);
    }
    return res;
  });
}

store::unlink_result store::rename(uint64_t parent, std::string_view name,
                                   uint64_t new_parent,
                                   std::string_view new_name, unsigned flags,
                                   keep_fn const& keep, int64_t time_ns) {
  check_name(new_name);
  if ((flags & rename_noreplace) && (flags & rename_exchange)) {
    store_fail(store_errc::invalid, "rename: conflicting flags");
  }
  impl& s = *impl_;
  return s.freeing_txn([&](txn& t) {
    ns n{s, t};
    unlink_result res;
    codec::bytes const dk = dirent_key(parent, name);
    codec::bytes const nk = dirent_key(new_parent, new_name);
    auto v = t.get(s.dirents, dk);
    if (!v) {
      store_fail(store_errc::not_found, "no '" + std::string(name) + "'");
    }
    uint64_t const ino = dirent_ino(*v);
    inode_rec r = s.get_inode(t, ino);
    n.dir(new_parent);
    bool const is_dir = S_ISDIR(r.mode);
    // A directory may not move into itself or anything below it.
    auto check_not_below = [&](uint64_t d, uint64_t under) {
      for (uint64_t x = under, depth = 0;; x = n.parent_of(x), ++depth) {
        if (x == d) {
          store_fail(store_errc::invalid,
                     "cannot move a directory into "
                     "itself");
        }
        if (x == root_inode || depth > (1u << 20)) break;
      }
    };
    if (is_dir) check_not_below(ino, new_parent);

    std::optional<uint64_t> target;
    if (auto tv = t.get(s.dirents, nk)) target = dirent_ino(*tv);
    if (dk == nk) return res;
    if (flags & rename_exchange) {
      if (!target) {
        store_fail(store_errc::not_found, "no '" + std::string(new_name) + "'");
      }
      inode_rec tr = s.get_inode(t, *target);
      if (S_ISDIR(tr.mode)) check_not_below(*target, parent);
      t.put(s.dirents, dk, le64(*target));
      t.put(s.dirents, nk, le64(ino));
      if (parent != new_parent) {
        int const moved = (is_dir ? 1 : 0) - (S_ISDIR(tr.mode) ? 1 : 0);
        if (is_dir) {
          t.put(s.extra, extra_key(ino, extra_kind::parent), le64(new_parent));
        }
        if (S_ISDIR(tr.mode)) {
          t.put(s.extra, extra_key(*target, extra_kind::parent), le64(parent));
        }
        n.touch_dir(parent, time_ns, -moved);
        n.touch_dir(new_parent, time_ns, moved);
      } else {
        n.touch_dir(parent, time_ns);
      }
      r.ctime_ns = time_ns;
      n.put(ino, r);
      tr = s.get_inode(t, *target);
      tr.ctime_ns = time_ns;
      n.put(*target, tr);
      return res;
    }
    int new_parent_links = 0;
    if (target) {
      if (flags & rename_noreplace) {
        store_fail(store_errc::exists, std::string(new_name) + " exists");
      }
      if (*target == ino) return res;  // two names of one inode: no-op
      inode_rec const tr = s.get_inode(t, *target);
      if (is_dir) {
        if (!S_ISDIR(tr.mode)) {
          store_fail(store_errc::not_dir, std::string(new_name) + " no dir");
        }
        if (!n.empty_dir(*target)) {
          store_fail(store_errc::not_empty,
                     std::string(new_name) + " is not empty");
        }
        s.drop_inode(t, *target);
        res.ino = *target;
        res.dropped = true;
        res.attr = gone(*target, tr, time_ns);
        new_parent_links -= 1;
      } else {
        if (S_ISDIR(tr.mode)) {
          store_fail(store_errc::is_dir,
                     std::string(new_name) + " is a directory");
        }
        res = n.drop_name(*target, tr, keep, time_ns);
      }
    }
    t.del(s.dirents, dk);
    t.put(s.dirents, nk, le64(ino));
    if (is_dir && parent != new_parent) {
      t.put(s.extra, extra_key(ino, extra_kind::parent), le64(new_parent));
      n.touch_dir(parent, time_ns, -1);
      new_parent_links += 1;
    } else if (parent != new_parent) {
      n.touch_dir(parent, time_ns);
    }
    n.touch_dir(new_parent, time_ns, new_parent_links);
    r = s.get_inode(t, ino);
    r.ctime_ns = time_ns;
    n.put(ino, r);
    return res;
  });
}

void store::drop_orphan(uint64_t ino) {
  impl& s = *impl_;
  s.freeing_txn([&](txn& t) {
    auto v = t.get(s.inodes, inode_key(ino));
    if (v && decode_inode(*v).nlink == 0) s.drop_inode(t, ino);
    return 0;
  });
}

uint64_t store::parent_of(uint64_t dir) const {
  return impl_->read_txn([&](txn& t) { return ns{*impl_, t}.parent_of(dir); });
}

// ------------------------------------------------------------- attributes

inode_attr store::set_attr(uint64_t ino, attr_update const& u) {
  impl& s = *impl_;
  return s.unsynced_write_txn([&](txn& t) {
    inode_rec r = s.get_inode(t, ino);
    if (u.mode) r.mode = (r.mode & S_IFMT) | (*u.mode & 07777);
    if (u.uid) r.uid = *u.uid;
    if (u.gid) r.gid = *u.gid;
    if (u.size) {
      if (r.state != static_cast<uint32_t>(file_state::staged) ||
          !S_ISREG(r.mode)) {
        store_fail(store_errc::invalid, "size of a file that is not staged");
      }
      r.size = *u.size;
    }
    if (u.mtime_ns) r.mtime_ns = *u.mtime_ns;
    if (u.ctime_ns) r.ctime_ns = *u.ctime_ns;
    t.put(s.inodes, inode_key(ino), encode(r));
    return to_attr(ino, r);
  });
}

std::string store::read_link(uint64_t ino) const {
  impl const& s = *impl_;
  return s.read_txn([&](txn& t) {
    inode_rec const r = s.get_inode(t, ino);
    auto v = t.get(s.extra, extra_key(ino, extra_kind::link_target));
    if (!S_ISLNK(r.mode) || !v) {
      store_fail(store_errc::invalid, "not a symlink");
    }
    return std::string(v->begin(), v->end());
  });
}

std::optional<std::string> store::get_xattr(uint64_t ino,
                                            std::string_view name) const {
  impl const& s = *impl_;
  return s.read_txn([&](txn& t) -> std::optional<std::string> {
    s.get_inode(t, ino);
    auto v = t.get(s.extra, extra_key(ino, extra_kind::xattr, name));
    if (!v) return std::nullopt;
    return std::string(v->begin(), v->end());
  });
}

void store::set_xattr(uint64_t ino, std::string_view name,
                      std::string_view value, int flags) {
  if (name.empty() || name.size() > 255) {
    store_fail(store_errc::invalid, "bad attribute name");
  }
  impl& s = *impl_;
  s.write_txn([&](txn& t) {
    s.get_inode(t, ino);
    codec::bytes const k = extra_key(ino, extra_kind::xattr, name);
    bool const has = t.get(s.extra, k).has_value();
    if ((flags & xattr_create) && has) {
      store_fail(store_errc::exists, "attribute exists");
    }
    if ((flags & xattr_replace) && !has) {
      store_fail(store_errc::no_attr, "no such attribute");
    }
    // The file's other attributes, as ext4 limits them (ENOSPC): a file
    // whose names overflow listxattr could not be listed or copied.
    size_t names = name.size() + 1;
    size_t values = value.size();
    codec::bytes const prefix = extra_key(ino, extra_kind::xattr);
    cursor c(t, s.extra);
    for (bool ok = c.seek(prefix); ok; ok = c.next()) {
      auto const ck = c.key();
      if (ck.size() < prefix.size() ||
          !std::equal(prefix.begin(), prefix.end(), ck.begin())) {
        break;
      }
      if (std::equal(ck.begin(), ck.end(), k.begin(), k.end())) continue;
      names += ck.size() - prefix.size() + 1;
      values += c.value().size();
    }
    if (names > xattr_names_max || values > xattr_values_max) {
      store_fail(store_errc::no_space, "no room for more attributes");
    }
    t.put(s.extra, k, as_bytes_view(value));
    return 0;
  });
}

std::vector<std::string> store::list_xattr(uint64_t ino) const {
  impl const& s = *impl_;
  return s.read_txn([&](txn& t) {
    std::vector<std::string> out;
    codec::bytes const prefix = extra_key(ino, extra_kind::xattr);
    cursor c(t, s.extra);
    for (bool ok = c.seek(prefix); ok; ok = c.next()) {
      auto k = c.key();
      if (k.size() < 9 || !std::equal(prefix.begin(), prefix.end(), k.begin()))
        break;
      out.emplace_back(reinterpret_cast<char const*>(k.data() + 9),
                       k.size() - 9);
    }
    return out;
  });
}

void store::remove_xattr(uint64_t ino, std::string_view name) {
  impl& s = *impl_;
  s.write_txn([&](txn& t) {
    if (!t.del(s.extra, extra_key(ino, extra_kind::xattr, name))) {
      store_fail(store_errc::no_attr, "no such attribute");
    }
    return 0;
  });
}

// ----------------------------------------------------------- staged files

std::string store::staging_path(uint64_t ino) const {
  return impl_->staging_dir() + "/" + std::to_string(ino);
}

add_result store::compress_staged(uint64_t ino, std::string_view name,
                                  codec::byte_view data,
                                  codec::program_chooser const& chooser,
                                  int64_t mtime_ns,
                                  std::function<bool()> const& cancelled) {
  impl& s = *impl_;
  impl::encode_plan plan(data, name, chooser, s.opt.chunk_size, cancelled);
  impl::append_guard appending(s);
  return s.write_txn([&](txn& t) {
    inode_rec r = s.get_inode(t, ino);
    if (r.state != static_cast<uint32_t>(file_state::staged) || r.nlink == 0 ||
        !S_ISREG(r.mode)) {
      store_fail(store_errc::not_found,
                 "inode " + std::to_string(ino) + " is no longer staged");
    }
    add_result res;
    res.ino = ino;
    res.size = data.size();
    res.chunks = plan.w.chunk_count();
    impl::pack_append pa(s, t);
    s.write_chunks(t, plan, ino, pa, res, cancelled);
    pa.record(s, t);
    r.size = data.size();
    r.stored = res.stored;
    r.mtime_ns = mtime_ns;
    r.checksum = plan.whole;
    r.chunk_count = static_cast<uint32_t>(res.chunks);
    r.state = static_cast<uint32_t>(file_state::compressed);
    t.put(s.inodes, inode_key(ino), encode(r));
    if (cancelled && cancelled()) {
      store_fail(store_errc::cancelled, "compression cancelled");
    }
    pa.sync();
    s.hit("pack_synced");
    pa.committing = true;
    s.hit("commit");  // tests: a commit whose outcome is unknown
    s.commit(t);
    pa.done = true;
    s.hit("committed");
    return res;
  });
}

void store::unstage(uint64_t ino, uint64_t size) {
  impl& s = *impl_;
  s.write_txn([&](txn& t) {
    inode_rec r = s.get_inode(t, ino);
    if (!S_ISREG(r.mode)) store_fail(store_errc::invalid, "not a file");
    s.drop_chunks(t, ino);
    r.state = static_cast<uint32_t>(file_state::staged);
    r.size = size;
    r.stored = 0;
    r.chunk_count = 0;
    r.checksum = 0;
    t.put(s.inodes, inode_key(ino), encode(r));
    return 0;
  });
}

std::vector<uint64_t> store::staged_inodes() const {
  impl const& s = *impl_;
  return s.read_txn([&](txn& t) {
    std::vector<uint64_t> out;
    cursor c(t, s.inodes);
    for (bool ok = c.first(); ok; ok = c.next()) {
      inode_rec const r = decode_inode(c.value());
      if (S_ISREG(r.mode) && r.nlink > 0 &&
          r.state == static_cast<uint32_t>(file_state::staged)) {
        out.push_back(key_u64(c.key()));
      }
    }
    return out;
  });
}

size_t store::tidy() {
  impl& s = *impl_;
  size_t removed = s.write_txn([&](txn& t) {
    std::vector<uint64_t> orphans;
    {
      cursor c(t, s.inodes);
      for (bool ok = c.first(); ok; ok = c.next()) {
        uint64_t const ino = key_u64(c.key());
        if (ino != root_inode && decode_inode(c.value()).nlink == 0) {
          orphans.push_back(ino);
        }
      }
    }
    for (uint64_t ino : orphans) s.drop_inode(t, ino);
    return orphans.size();
  });
  DIR* d = ::opendir(s.staging_dir().c_str());
  if (!d) store_fail_errno(errno, "opendir " + s.staging_dir());
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  for (std::string const& n : names) {
    char* end = nullptr;
    uint64_t const ino = std::strtoull(n.c_str(), &end, 10);
    bool const keep = end && *end == '\0' && s.read_txn([&](txn& t) {
      auto v = t.get(s.inodes, inode_key(ino));
      return v && decode_inode(*v).state ==
                      static_cast<uint32_t>(file_state::staged);
    });
    if (keep) continue;
    std::string const path = s.staging_dir() + "/" + n;
    if (::unlink(path.c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace brevis::fs
