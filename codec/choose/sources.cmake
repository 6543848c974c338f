list(APPEND BREVIS_CODEC_SOURCES
  choose/fallback.cpp
  choose/literals.cpp
  choose/entropy_terms.cpp
  choose/histogram.cpp
  choose/sample.cpp
  choose/shared_tables.cpp
  choose/small_tensors.cpp
  choose/unseen_entropy.cpp)
