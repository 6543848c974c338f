list(APPEND BREVIS_CODEC_SOURCES
  container/archive.cpp
  container/index.cpp)
# TODO(merge): remove parse_fallback.cpp once codec/parse lands; it only
# keeps this branch linking and is skipped as soon as parse/ has sources.
if(NOT EXISTS ${CMAKE_CURRENT_LIST_DIR}/../parse/sources.cmake)
  list(APPEND BREVIS_CODEC_SOURCES container/parse_fallback.cpp)
endif()
