#pragma once
// The mount's bookkeeping in the store's `extra` database, under inode 0
// (which no file has), FORMAT.md S.3: kind 'J' then a u8 slot holds one
// job_record of a ring of job_ring_size; kind 'Q' the pipeline_status.

#include "fs/store/lmdb_util.h"
#include "fs/store/records.h"
#include "fs/store/store.h"

namespace brevis::fs::detail {

bytes job_key(uint64_t slot);
bytes status_key();

bytes encode(job_record const& r);
/// nullopt for a value of the wrong shape (a record of a newer layout).
std::optional<job_record> decode_job(byte_view v);
bytes encode(pipeline_status const& st);
std::optional<pipeline_status> decode_status(byte_view v);

/// Puts `r` into the ring (the slot after the last one written), in `t`.
void put_job(txn& t, MDB_dbi meta, MDB_dbi extra, job_record const& r);

}  // namespace brevis::fs::detail
