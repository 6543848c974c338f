brevis_add_test(store_test
  fs/store_test.cpp
  fs/store_cli_test.cpp)
target_link_libraries(store_test PRIVATE brevis_store)
add_dependencies(store_test brevis)
