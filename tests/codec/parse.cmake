brevis_add_test(parse_test codec/parse_test.cpp codec/parse_gguf_test.cpp
                codec/parse_zip_test.cpp)
