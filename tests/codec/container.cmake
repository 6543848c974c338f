brevis_add_test(container_test codec/container_test.cpp)
