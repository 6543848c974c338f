#include "fs/store/lmdb_util.h"

namespace brevis::fs::detail {

void lmdb_fail(int rc, char const* what) {
  std::string m = std::string("index: ") + what + ": " + mdb_strerror(rc);
  if (rc == MDB_MAP_FULL) throw map_full(m);
  if (rc == MDB_MAP_RESIZED) throw map_resized(m);
  if (rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID ||
      rc == MDB_VERSION_MISMATCH) {
    store_fail(store_errc::bad_store, m);
  }
  if (rc > 0) store_fail_errno(rc, std::string("index: ") + what);
  store_fail(store_errc::io, m);
}

txn::txn(MDB_env* env, bool write) {
  lmdb_check(mdb_txn_begin(env, nullptr, write ? 0 : MDB_RDONLY, &txn_),
             "begin transaction");
}

txn::~txn() { abort(); }

void txn::commit() {
  MDB_txn* t = txn_;
  txn_ = nullptr;  // mdb_txn_commit frees the txn even when it fails
  lmdb_check(mdb_txn_commit(t), "commit");
}

void txn::abort() noexcept {
  if (txn_) mdb_txn_abort(txn_);
  txn_ = nullptr;
}

std::optional<std::span<uint8_t const>> txn::get(MDB_dbi db,
                                                 key_bytes key) const {
  MDB_val k = to_val(key), v{};
  int rc = mdb_get(txn_, db, &k, &v);
  if (rc == MDB_NOTFOUND) return std::nullopt;
  lmdb_check(rc, "get");
  return from_val(v);
}

void txn::put(MDB_dbi db, key_bytes key, key_bytes value, unsigned flags) {
  MDB_val k = to_val(key), v = to_val(value);
  lmdb_check(mdb_put(txn_, db, &k, &v, flags), "put");
}

bool txn::del(MDB_dbi db, key_bytes key) {
  MDB_val k = to_val(key);
  int rc = mdb_del(txn_, db, &k, nullptr);
  if (rc == MDB_NOTFOUND) return false;
  lmdb_check(rc, "delete");
  return true;
}

cursor::cursor(txn const& t, MDB_dbi db) {
  lmdb_check(mdb_cursor_open(t.get(), db, &cur_), "open cursor");
}

cursor::~cursor() { mdb_cursor_close(cur_); }

bool cursor::step(MDB_cursor_op op, key_bytes const* key) {
  if (key) k_ = to_val(*key);
  int rc = mdb_cursor_get(cur_, &k_, &v_, op);
  if (rc == MDB_NOTFOUND) return false;
  lmdb_check(rc, "cursor");
  return true;
}

bool cursor::seek(key_bytes key) { return step(MDB_SET_RANGE, &key); }
bool cursor::first() { return step(MDB_FIRST); }
bool cursor::last() { return step(MDB_LAST); }
bool cursor::next() { return step(MDB_NEXT); }
bool cursor::prev() { return step(MDB_PREV); }

void cursor::del() { lmdb_check(mdb_cursor_del(cur_, 0), "cursor delete"); }

}  // namespace brevis::fs::detail
