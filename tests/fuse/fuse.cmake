# The mount end to end through the real binary (skipped without /dev/fuse).
brevis_add_test(mount_test fuse/mount_test.cpp)
add_dependencies(mount_test brevis)
