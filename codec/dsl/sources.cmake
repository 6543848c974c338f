list(APPEND BREVIS_CODEC_SOURCES
  dsl/types.cpp
  dsl/program.cpp
  dsl/registry.cpp
  dsl/interpreter.cpp
  dsl/scratch.cpp)
