list(APPEND BREVIS_CODEC_SOURCES
  choose/fallback.cpp
  choose/candidates.cpp)
