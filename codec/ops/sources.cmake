list(APPEND BREVIS_CODEC_SOURCES
  ops/all_ops.cpp)
