list(APPEND BREVIS_CODEC_SOURCES
  container/archive.cpp
  container/index.cpp)
