#pragma once
// Thin RAII over LMDB for the store (internal). Every LMDB failure becomes a
// store_error; MDB_MAP_FULL becomes map_full (a store_errc::no_space) so the
// store can grow the map and retry, and MDB_MAP_RESIZED becomes map_resized.

#include <lmdb.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fs/store/error.h"

namespace brevis::fs::detail {

struct map_full : store_error {
  explicit map_full(std::string const& m)
      : store_error(store_errc::no_space, m) {}
};
struct map_resized : store_error {
  explicit map_resized(std::string const& m) : store_error(store_errc::io, m) {}
};

/// Throws the store_error for LMDB return code rc (rc != 0).
[[noreturn]] void lmdb_fail(int rc, char const* what);
inline void lmdb_check(int rc, char const* what) {
  if (rc != 0) [[unlikely]]
    lmdb_fail(rc, what);
}

using key_bytes = std::span<uint8_t const>;

inline MDB_val to_val(key_bytes b) {
  return MDB_val{b.size(), const_cast<uint8_t*>(b.data())};
}
inline std::span<uint8_t const> from_val(MDB_val const& v) {
  return {static_cast<uint8_t const*>(v.mv_data), v.mv_size};
}

/// A transaction; aborted at scope exit unless committed.
class txn {
 public:
  txn(MDB_env* env, bool write);
  ~txn();
  txn(txn const&) = delete;
  txn& operator=(txn const&) = delete;

  MDB_txn* get() const { return txn_; }
  void commit();
  void abort() noexcept;

  /// The value under key, or nullopt; valid until the txn ends or writes.
  std::optional<std::span<uint8_t const>> get(MDB_dbi db, key_bytes key) const;
  void put(MDB_dbi db, key_bytes key, key_bytes value, unsigned flags = 0);
  /// True when the key existed.
  bool del(MDB_dbi db, key_bytes key);

 private:
  MDB_txn* txn_ = nullptr;
};

/// A cursor over one database of a txn.
class cursor {
 public:
  cursor(txn const& t, MDB_dbi db);
  ~cursor();
  cursor(cursor const&) = delete;
  cursor& operator=(cursor const&) = delete;

  /// Positions at the first key >= `key`; false past the end.
  bool seek(key_bytes key);
  bool first();
  bool last();
  bool next();
  bool prev();
  std::span<uint8_t const> key() const { return from_val(k_); }
  std::span<uint8_t const> value() const { return from_val(v_); }
  /// Deletes the current entry (write txns).
  void del();

 private:
  bool step(MDB_cursor_op op, key_bytes const* key = nullptr);
  MDB_cursor* cur_ = nullptr;
  MDB_val k_{}, v_{};
};

}  // namespace brevis::fs::detail
