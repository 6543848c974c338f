#include "fs/store/job_records.h"

#include <algorithm>
#include <cstring>

#include "fs/store/store_impl.h"

namespace brevis::fs::detail {

namespace {

bytes extra0(char kind) {
  bytes k(9);
  auto p = be64(0);
  std::memcpy(k.data(), p.data(), 8);
  k[8] = static_cast<uint8_t>(kind);
  return k;
}

constexpr size_t job_fixed = 40;     // five u64/i64 fields, then the name
constexpr size_t status_fixed = 40;  // five u64/i64 fields, then the name

}  // namespace

bytes job_key(uint64_t slot) {
  bytes k = extra0('J');
  k.push_back(static_cast<uint8_t>(slot % job_ring_size));
  return k;
}

bytes status_key() { return extra0('Q'); }

bytes encode(job_record const& r) {
  bytes b;
  codec::put_le<uint64_t>(b, static_cast<uint64_t>(r.finished_ns));
  codec::put_le<uint64_t>(b, r.ino);
  codec::put_le<uint64_t>(b, r.size);
  codec::put_le<uint64_t>(b, r.stored);
  codec::put_le<uint64_t>(b, r.micros);
  b.insert(b.end(), r.name.begin(), r.name.end());
  return b;
}

std::optional<job_record> decode_job(byte_view v) {
  if (v.size() < job_fixed || v.size() > job_fixed + 255) return std::nullopt;
  job_record r;
  r.finished_ns = static_cast<int64_t>(codec::load_le<uint64_t>(v.data()));
  r.ino = codec::load_le<uint64_t>(v.data() + 8);
  r.size = codec::load_le<uint64_t>(v.data() + 16);
  r.stored = codec::load_le<uint64_t>(v.data() + 24);
  r.micros = codec::load_le<uint64_t>(v.data() + 32);
  r.name.assign(reinterpret_cast<char const*>(v.data() + job_fixed),
                v.size() - job_fixed);
  return r;
}

bytes encode(pipeline_status const& st) {
  bytes b;
  codec::put_le<uint64_t>(b, static_cast<uint64_t>(st.updated_ns));
  codec::put_le<uint64_t>(b, st.queued);
  codec::put_le<uint64_t>(b, st.running);
  codec::put_le<uint64_t>(b, st.running_size);
  codec::put_le<uint64_t>(b, static_cast<uint64_t>(st.running_since_ns));
  b.insert(b.end(), st.running_name.begin(), st.running_name.end());
  return b;
}

std::optional<pipeline_status> decode_status(byte_view v) {
  if (v.size() < status_fixed || v.size() > status_fixed + 255) {
    return std::nullopt;
  }
  pipeline_status st;
  st.updated_ns = static_cast<int64_t>(codec::load_le<uint64_t>(v.data()));
  st.queued = codec::load_le<uint64_t>(v.data() + 8);
  st.running = codec::load_le<uint64_t>(v.data() + 16);
  st.running_size = codec::load_le<uint64_t>(v.data() + 24);
  st.running_since_ns =
      static_cast<int64_t>(codec::load_le<uint64_t>(v.data() + 32));
  st.running_name.assign(reinterpret_cast<char const*>(v.data() + status_fixed),
                         v.size() - status_fixed);
  return st;
}

void put_job(txn& t, MDB_dbi meta, MDB_dbi extra, job_record const& r) {
  auto const key = as_bytes_view("next_job");
  uint64_t n = 0;
  if (auto cur = t.get(meta, key); cur && cur->size() == 8) {
    n = codec::load_le<uint64_t>(cur->data());
  }
  job_record kept = r;
  if (kept.name.size() > 255) kept.name.resize(255);
  t.put(extra, job_key(n), encode(kept));
  bytes nb;
  codec::put_le<uint64_t>(nb, n + 1);
  t.put(meta, key, nb);
}

}  // namespace brevis::fs::detail

namespace brevis::fs {

using namespace detail;

std::vector<job_record> store::recent_jobs() const {
  impl const& s = *impl_;
  return s.read_txn([&](txn& t) {
    std::vector<job_record> out;
    uint64_t n = 0;
    if (auto cur = t.get(s.meta, as_bytes_view("next_job"));
        cur && cur->size() == 8) {
      n = codec::load_le<uint64_t>(cur->data());
    }
    uint64_t const first = n > job_ring_size ? n - job_ring_size : 0;
    for (uint64_t i = first; i < n; ++i) {
      if (auto v = t.get(s.extra, job_key(i))) {
        if (auto r = decode_job(*v)) out.push_back(std::move(*r));
      }
    }
    return out;
  });
}

std::optional<pipeline_status> store::get_pipeline_status() const {
  impl const& s = *impl_;
  return s.read_txn([&](txn& t) -> std::optional<pipeline_status> {
    auto v = t.get(s.extra, status_key());
    if (!v) return std::nullopt;
    return decode_status(*v);
  });
}

void store::set_pipeline_status(pipeline_status const& st) {
  impl& s = *impl_;
  pipeline_status kept = st;
  if (kept.running_name.size() > 255) kept.running_name.resize(255);
  s.unsynced_write_txn([&](txn& t) {
    t.put(s.extra, status_key(), encode(kept));
    return 0;
  });
}

}  // namespace brevis::fs
