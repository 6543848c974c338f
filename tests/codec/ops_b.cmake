brevis_add_test(ops_b_test codec/ops_b_test.cpp)
