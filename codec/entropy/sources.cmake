list(APPEND BREVIS_CODEC_SOURCES
  entropy/histogram.cpp
  entropy/htscodecs_rans.cpp
  entropy/rans4x16_order0_decoder.cpp
  entropy/rans_static.cpp
  entropy/rans_static_simd.cpp)
