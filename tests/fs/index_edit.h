#pragma once
// Tests that damage a store's index as a disk fault (or another brevis)
// would: through the LMDB API itself, not the store's code.

#include <gtest/gtest.h>
#include <lmdb.h>

#include <filesystem>
#include <functional>
#include <utility>
#include <vector>

#include "codec/core/bytes.h"

namespace brevis::fs::index_edit {

// Runs `edit` in one write transaction on the index of the store in `dir`
// (the LMDB API itself, as a disk fault or another brevis would change it).
inline void edit_index(std::filesystem::path const& dir,
                       std::function<void(MDB_txn*)> const& edit) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 8), 0);
  ASSERT_EQ(mdb_env_open(env, (dir / "index").c_str(), MDB_NOTLS, 0644), 0);
  MDB_txn* t = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &t), 0);
  edit(t);
  ASSERT_EQ(mdb_txn_commit(t), 0);
  mdb_env_close(env);
}

inline MDB_dbi open_db(MDB_txn* t, char const* name) {
  MDB_dbi db = 0;
  EXPECT_EQ(mdb_dbi_open(t, name, 0, &db), 0) << name;
  return db;
}

using record = std::pair<codec::bytes, codec::bytes>;  // key, value

inline codec::bytes copy_of(MDB_val const& v) {
  auto const* p = static_cast<uint8_t const*>(v.mv_data);
  return {p, p + v.mv_size};
}

// Every record of `db` in key order, copied out of the map.
inline std::vector<record> records_of(MDB_txn* t, MDB_dbi db) {
  std::vector<record> out;
  MDB_cursor* c = nullptr;
  EXPECT_EQ(mdb_cursor_open(t, db, &c), 0);
  MDB_val k;
  MDB_val v;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    out.emplace_back(copy_of(k), copy_of(v));
  }
  mdb_cursor_close(c);
  return out;
}

inline void put_all(MDB_txn* t, MDB_dbi db, std::vector<record> records) {
  for (auto& [key, value] : records) {
    MDB_val k{key.size(), key.data()};
    MDB_val v{value.size(), value.data()};
    ASSERT_EQ(mdb_put(t, db, &k, &v, 0), 0);
  }
}

// Rewrites table `db` of the store in `dir` in one write transaction:
// `change` gets its records in key order, and what it leaves in the vector
// is put back (records it takes out stay as they were: deleting takes
// mdb_del).
inline void edit_records(
    std::filesystem::path const& dir, char const* db,
    std::function<void(std::vector<record>&)> const& change) {
  edit_index(dir, [&](MDB_txn* t) {
    MDB_dbi const d = open_db(t, db);
    std::vector<record> records = records_of(t, d);
    change(records);
    put_all(t, d, std::move(records));
  });
}

}  // namespace brevis::fs::index_edit
