brevis_add_test(cli_test
  cli/roundtrip_test.cpp
  cli/bad_input_test.cpp
  cli/input_change_test.cpp
  cli/inspect_test.cpp)
# The tests run the real binary.
add_dependencies(cli_test brevis)
# The CLI's output file, compiled in.
brevis_add_test(output_file_test cli/output_file_test.cpp
  ${PROJECT_SOURCE_DIR}/src/output_file.cpp
  ${PROJECT_SOURCE_DIR}/src/fatal_signals.cpp)
# The CLI's input reading, compiled in.
brevis_add_test(input_test cli/input_test.cpp
  ${PROJECT_SOURCE_DIR}/src/input.cpp
  ${PROJECT_SOURCE_DIR}/src/mapped_file.cpp
  ${PROJECT_SOURCE_DIR}/src/fatal_signals.cpp)
# How many chunks the CLI decodes at once, compiled in.
brevis_add_test(decode_workers_test cli/decode_workers_test.cpp
  ${PROJECT_SOURCE_DIR}/src/decode_workers.cpp)
