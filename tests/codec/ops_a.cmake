brevis_add_test(ops_a_test codec/ops_a_test.cpp)
