brevis_add_test(cli_test
  cli/roundtrip_test.cpp
  cli/bad_input_test.cpp
  cli/inspect_test.cpp)
# The tests run the real binary.
add_dependencies(cli_test brevis)
