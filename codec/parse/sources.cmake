list(APPEND BREVIS_CODEC_SOURCES
  parse/dtype.cpp
  parse/gguf.cpp
  parse/npy.cpp
  parse/parse.cpp
  parse/pytorch_zip.cpp
  parse/safetensors.cpp)
