brevis_add_test(core_test codec/core_test.cpp)
