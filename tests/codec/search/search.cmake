brevis_add_test(search_test codec/search/search_test.cpp)
