brevis_add_test(leaves_test codec/leaves_test.cpp)
brevis_add_test(rans_static_test codec/rans_static_test.cpp)
brevis_add_test(literal_test codec/literal_test.cpp)
brevis_add_test(histogram_test codec/histogram_test.cpp)
