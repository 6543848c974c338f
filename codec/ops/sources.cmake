list(APPEND BREVIS_CODEC_SOURCES
  ops/all_ops.cpp
  ops/view.cpp
  ops/fields.cpp
  ops/planes.cpp
  ops/delta.cpp
  ops/xor_prev.cpp
  ops/xor_row.cpp
  ops/transpose.cpp
  ops/map.cpp
  ops/palette.cpp
  ops/runs.cpp
  ops/low_zero.cpp
  ops/split.cpp
  ops/bitfields.cpp
  ops/bitplanes.cpp
  ops/repeat.cpp
  ops/sparse.cpp)
