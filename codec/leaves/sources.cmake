list(APPEND BREVIS_CODEC_SOURCES
  leaves/all_leaves.cpp
  leaves/raw.cpp
  leaves/zero.cpp
  leaves/constant.cpp
  leaves/rans0.cpp
  leaves/rans1.cpp
  leaves/zstd.cpp
  leaves/rans_static.cpp
  leaves/literal.cpp
  leaves/bits.cpp
  leaves/bits_kernels.cpp)
