# The mount end to end through the real binary (skipped without /dev/fuse).
brevis_add_test(mount_test fuse/mount_test.cpp)
add_dependencies(mount_test brevis)
# mount_fs in process (no /dev/fuse): the read path's cache and prefetch.
brevis_add_test(mount_fs_test fuse/mount_fs_test.cpp)
target_link_libraries(mount_fs_test PRIVATE brevis_fuse)
