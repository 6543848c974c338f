// The pack syncer (fs/store/pack_syncer.h): syncs follow the appends a step
// behind, never past what was appended, and stopping waits for the one in
// flight.

#include "fs/store/pack_syncer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fs/store/records.h"
#include "tests/cli/helpers.h"

namespace brevis::fs::detail {
namespace {

using cli_test::temp_dir;

// Appends `count` records of `size` bytes, telling the syncer after each;
// returns the end of the last.
uint64_t append(pack_file& pack, pack_syncer& syncer, size_t count, size_t size,
                uint64_t at) {
  for (size_t i = 0; i < count; ++i) {
    codec::bytes payload(size, static_cast<uint8_t>(i));
    at = pack.write_record(at, hash_payload(payload), payload);
    syncer.appended(at);
  }
  return at;
}

// Waits up to 10 s for the syncer to reach `end`.
bool reaches(pack_syncer const& syncer, uint64_t end) {
  auto const give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (syncer.synced() < end) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(pack_syncer, syncs_a_step_behind_the_appends) {
  temp_dir dir;
  pack_file pack((dir.path() / "a.pack").string(), true, true);
  uint64_t const step = 64u << 10;
  pack_syncer syncer(pack, step);
  // The first append sets where steps count from: nothing is due yet.
  uint64_t const first =
      append(pack, syncer, 1, 1000, detail::pack_header_size);
  uint64_t const end = append(pack, syncer, 40, 8000, first);
  ASSERT_GE(end, first + 4 * step);
  EXPECT_TRUE(reaches(syncer, first + step)) << syncer.synced();
  EXPECT_LE(syncer.synced(), end);
  EXPECT_NO_THROW(syncer.finish());
  EXPECT_LE(syncer.synced(), end);
  // The records are whole.
  codec::bytes back = pack.read_record(
      first, hash_payload(codec::bytes(8000, uint8_t{0})), 8000);
  EXPECT_EQ(back.size(), 8000u);
}

TEST(pack_syncer, less_than_a_step_is_left_to_the_commit) {
  temp_dir dir;
  pack_file pack((dir.path() / "b.pack").string(), true, true);
  size_t const threads = cli_test::thread_count();
  pack_syncer syncer(pack, 1u << 30);
  append(pack, syncer, 10, 4096, detail::pack_header_size);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(syncer.synced(), 0u);
  // Nor does it start a thread (a small file's job made one for nothing).
  // At most: a thread an earlier test joined may still have been listed.
  EXPECT_LE(cli_test::thread_count(), threads);
  EXPECT_NO_THROW(syncer.finish());
  EXPECT_EQ(syncer.synced(), 0u);
}

TEST(pack_syncer, stops_at_once_with_syncs_due) {
  temp_dir dir;
  pack_file pack((dir.path() / "c.pack").string(), true, true);
  auto syncer = std::make_unique<pack_syncer>(pack, 4096);
  append(pack, *syncer, 50, 4096, detail::pack_header_size);
  syncer.reset();  // joins: no hang, no error thrown
  SUCCEED();
}

}  // namespace
}  // namespace brevis::fs::detail
