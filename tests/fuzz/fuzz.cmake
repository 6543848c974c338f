# Fuzz targets. The replay driver always builds and ctest runs the committed
# corpus through it; with clang and -DBREVIS_FUZZ=ON the libFuzzer binary
# builds too (fuzz_decode CORPUS_DIR).
add_executable(fuzz_decode_replay fuzz/fuzz_decode.cpp fuzz/replay_main.cpp)
target_link_libraries(fuzz_decode_replay PRIVATE brevis_codec)
add_test(NAME fuzz_decode_corpus
         COMMAND fuzz_decode_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/decode
                 ${CMAKE_CURRENT_SOURCE_DIR}/data/bad)

if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  option(BREVIS_FUZZ "Build the libFuzzer targets (clang only)" OFF)
  if(BREVIS_FUZZ)
    set(BREVIS_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined
                          -fno-omit-frame-pointer)
    # Coverage for the library, and no checksum verdicts (they would stop
    # almost every mutation at the index checksum).
    target_compile_options(brevis_codec PRIVATE ${BREVIS_FUZZ_FLAGS})
    target_compile_definitions(brevis_codec PRIVATE
                               FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
    add_executable(fuzz_decode fuzz/fuzz_decode.cpp)
    target_compile_options(fuzz_decode PRIVATE
                           -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_decode PRIVATE
                        -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_decode PRIVATE brevis_codec)
  endif()
endif()
