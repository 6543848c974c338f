# The mount end to end through the real binary (skipped without /dev/fuse).
brevis_add_test(mount_test fuse/mount_test.cpp)
add_dependencies(mount_test brevis)
# mount_fs in process (no /dev/fuse): the read path's cache and prefetch.
brevis_add_test(mount_fs_test fuse/mount_fs_test.cpp)
target_link_libraries(mount_fs_test PRIVATE brevis_fuse)
# mount_fs in process with compression on: changes while a file is queued
# or being compressed, and the lock order (a watchdog fails a deadlock).
brevis_add_test(mount_race_test fuse/mount_race_test.cpp)
target_link_libraries(mount_race_test PRIVATE brevis_fuse)
# Nothing lost: SIGKILL of the daemon at many points, remount, fsck.
brevis_add_test(mount_crash_test fuse/mount_crash_test.cpp)
add_dependencies(mount_crash_test brevis)
# Concurrent writers, readers, renames and deletes on a real mount.
brevis_add_test(mount_stress_test fuse/mount_stress_test.cpp)
add_dependencies(mount_stress_test brevis)
# Edge cases: unparsed and empty files, 5 GiB sparse, deep and wide trees,
# mmap, fallocate, locks, permissions.
brevis_add_test(mount_edge_test fuse/mount_edge_test.cpp)
add_dependencies(mount_edge_test brevis)
# Stop signals end the daemon whichever thread takes them.
brevis_add_test(mount_signal_test fuse/mount_signal_test.cpp)
add_dependencies(mount_signal_test brevis)
# The read path on a real mount: kept pages never serve an old version.
brevis_add_test(mount_read_test fuse/mount_read_test.cpp)
add_dependencies(mount_read_test brevis)
target_link_libraries(mount_read_test PRIVATE brevis_fuse)
# The mount's kernel readahead: finding the mount's device.
brevis_add_test(readahead_test fuse/readahead_test.cpp)
target_link_libraries(readahead_test PRIVATE brevis_fuse)
# One mount per store: a holder that is exiting is waited for.
brevis_add_test(mount_lock_test fuse/mount_lock_test.cpp)
target_link_libraries(mount_lock_test PRIVATE brevis_fuse)
# A full disk under the store: writers are told, rm still frees space.
brevis_add_test(mount_full_disk_test fuse/mount_full_disk_test.cpp)
add_dependencies(mount_full_disk_test brevis)
# Reads against truncates until their replies are written.
brevis_add_test(resize_gate_test fuse/resize_gate_test.cpp)
