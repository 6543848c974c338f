brevis_add_test(dsl_test codec/dsl_test.cpp)
