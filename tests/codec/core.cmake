brevis_add_test(core_test codec/core_test.cpp codec/huge_pages_test.cpp
                codec/init_once_test.cpp codec/zstd_context_test.cpp)
