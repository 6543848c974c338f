list(APPEND BREVIS_CODEC_SOURCES
  ops/all_ops.cpp
  # ops B
  ops/palette.cpp
  ops/runs.cpp
  ops/low_zero.cpp
  ops/split.cpp
  ops/bitfields.cpp
  ops/bitplanes.cpp
  ops/repeat.cpp)
