list(APPEND BREVIS_CODEC_SOURCES
  leaves/all_leaves.cpp
  leaves/raw.cpp)
