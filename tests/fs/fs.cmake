brevis_add_test(store_test
  fs/store_test.cpp
  fs/store_cli_test.cpp
  fs/read_at_test.cpp)
# (LMDB itself too: a test damages the index as a disk fault would.)
target_link_libraries(store_test PRIVATE brevis_store PkgConfig::LMDB)
add_dependencies(store_test brevis)
# The index's deferred sync of unsynced commits.
brevis_add_test(deferred_sync_test fs/deferred_sync_test.cpp)
target_link_libraries(deferred_sync_test PRIVATE brevis_store)
brevis_add_test(chunk_cache_test fs/chunk_cache_test.cpp)
target_link_libraries(chunk_cache_test PRIVATE brevis_cache)
brevis_add_test(resident_memory_test fs/resident_memory_test.cpp)
target_link_libraries(resident_memory_test PRIVATE brevis_pipeline)
# The compression pipeline, its store side and the event log (real LMDB).
brevis_add_test(pipeline_test fs/pipeline_test.cpp fs/store_leftovers_test.cpp
  fs/mount_stats_test.cpp fs/pack_syncer_test.cpp)
target_link_libraries(pipeline_test PRIVATE brevis_fuse brevis_pipeline brevis_store
  PkgConfig::LMDB)
add_dependencies(pipeline_test brevis)
# oneTBB loaded on first use, linked as brevis is (its C++ runtime too).
if(BREVIS_TBB_ON_DEMAND)
  brevis_add_test(tbb_on_demand_test fs/tbb_on_demand_test.cpp)
  target_link_libraries(tbb_on_demand_test PRIVATE brevis_tbb)
  brevis_static_cxx_runtime(tbb_on_demand_test)
endif()
# oneTBB's workers named as they join a job's arena.
brevis_add_test(tbb_worker_names_test fs/tbb_worker_names_test.cpp)
target_link_libraries(tbb_worker_names_test PRIVATE brevis_pipeline brevis_tbb)
# The SIGBUS guard of the compression job's file mappings.
brevis_add_test(mapping_guard_test fs/mapping_guard_test.cpp)
target_link_libraries(mapping_guard_test PRIVATE brevis_pipeline)
