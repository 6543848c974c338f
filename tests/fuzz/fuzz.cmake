# Fuzz targets. The replay driver always builds and ctest runs the committed
# corpus through it; with clang and -DBREVIS_FUZZ=ON the libFuzzer binaries
# build too (fuzz_decode, fuzz_program, fuzz_parse, fuzz_compress; each
# CORPUS_DIR). That build
# ignores checksum failures (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION), so run
# no other tests in it.
add_executable(fuzz_decode_replay fuzz/fuzz_decode.cpp fuzz/replay_main.cpp)
target_link_libraries(fuzz_decode_replay PRIVATE brevis_codec)
add_test(NAME fuzz_decode_corpus
         COMMAND fuzz_decode_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/decode
                 ${CMAKE_CURRENT_SOURCE_DIR}/data/bad)
add_executable(fuzz_program_replay fuzz/fuzz_program.cpp fuzz/replay_main.cpp)
target_link_libraries(fuzz_program_replay PRIVATE brevis_codec)
add_test(NAME fuzz_program_corpus
         COMMAND fuzz_program_replay
                 ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/program)
add_executable(fuzz_parse_replay fuzz/fuzz_parse.cpp fuzz/replay_main.cpp)
target_link_libraries(fuzz_parse_replay PRIVATE brevis_codec)
add_test(NAME fuzz_parse_corpus
         COMMAND fuzz_parse_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/parse)
# The compressor end to end: the parsers' seeds (the same first byte) and
# the bad inputs, compressed and read back.
add_executable(fuzz_compress_replay fuzz/fuzz_compress.cpp fuzz/replay_main.cpp)
target_link_libraries(fuzz_compress_replay PRIVATE brevis_codec)
add_test(NAME fuzz_compress_corpus
         COMMAND fuzz_compress_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/parse
                 ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/compress
                 ${CMAKE_CURRENT_SOURCE_DIR}/data/bad)
# Writes the seed corpora (disabled tests) and checks that they decode, and
# parse.
brevis_add_test(fuzz_seeds_test fuzz/seeds_test.cpp fuzz/parse_seeds_test.cpp)

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
    foreach(target fuzz_decode fuzz_program fuzz_parse fuzz_compress)
      add_executable(${target} fuzz/${target}.cpp)
      target_compile_options(${target} PRIVATE
                             -fsanitize=fuzzer,address,undefined)
      target_link_options(${target} PRIVATE
                          -fsanitize=fuzzer,address,undefined)
      target_link_libraries(${target} PRIVATE brevis_codec)
    endforeach()
  endif()
endif()
