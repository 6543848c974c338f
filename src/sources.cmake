list(APPEND BREVIS_CLI_SOURCES
  archive_io.cpp
  cli.cpp
  cmd_compress.cpp
  cmd_decompress.cpp
  cmd_inspect.cpp
  cmd_mount.cpp
  cmd_store.cpp
  cmd_verify.cpp
  decode_workers.cpp
  fatal_signals.cpp
  huge_heap.cpp
  input.cpp
  mapped_file.cpp
  output_file.cpp
  progress.cpp
  report.cpp
  size_arg.cpp)
