// The mount's readahead: finding a mount's device in mountinfo text (the
// last mount on a path wins, escaped paths match), and raising the window
// of a path that is no mount point fails without touching anything.

#include "fs/fuse/readahead.h"

#include <gtest/gtest.h>

namespace brevis::fs {
namespace {

TEST(readahead, finds_the_device_of_a_mount) {
  std::string const info =
      "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
      "36 22 0:39 / /tmp/m rw,nosuid - fuse.brevis brevis rw\n"
      "37 22 0:40 / /tmp/with\\040space rw - fuse.brevis brevis rw\n"
      "38 36 0:41 / /tmp/m rw - fuse.brevis brevis rw\n"
      "39 22 0:42 / /tmp/back\\134slash rw - fuse.brevis brevis rw";
  EXPECT_EQ(mount_device(info, "/tmp/m"), "0:41");  // stacked: the top one
  EXPECT_EQ(mount_device(info, "/tmp/with space"), "0:40");
  EXPECT_EQ(mount_device(info, "/tmp/back\\slash"), "0:42");
  EXPECT_EQ(mount_device(info, "/"), "0:21");
  EXPECT_FALSE(mount_device(info, "/tmp"));
  EXPECT_FALSE(mount_device(info, "/tmp/with\\040space"));
  EXPECT_FALSE(mount_device("", "/tmp/m"));
  EXPECT_FALSE(mount_device("garbage\n\n1 2\n", "/tmp/m"));
}

TEST(readahead, not_a_mount_point) {
  EXPECT_FALSE(raise_mount_readahead("/no/such/mount/point", 1 << 20));
}

}  // namespace
}  // namespace brevis::fs
