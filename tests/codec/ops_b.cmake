brevis_add_test(ops_b_test codec/ops_b_test.cpp)
brevis_add_test(sparse_test codec/sparse_test.cpp)
brevis_add_test(bitfields_kernels_test codec/bitfields_kernels_test.cpp)
brevis_add_test(classes_test codec/classes_test.cpp)
