# The benchmark's plain FUSE passthrough (scripts/bench.sh --mount): built
# with the tests, never installed.
pkg_check_modules(FUSE3_PT REQUIRED IMPORTED_TARGET fuse3)
add_executable(brevis_passthrough bench/passthrough.cpp)
target_compile_definitions(brevis_passthrough PRIVATE _FILE_OFFSET_BITS=64)
target_link_libraries(brevis_passthrough PRIVATE PkgConfig::FUSE3_PT)

# ns a symbol of each rans_static decode path on streams cut from a real
# checkpoint (`brevis_rans_static_bench FILE.safetensors`): for choosing
# kernels on a CPU.
add_executable(brevis_rans_static_bench bench/rans_static_decode.cpp)
target_link_libraries(brevis_rans_static_bench PRIVATE brevis_codec)

# CPU ns an element of decoding a checkpoint's bf16 tensors with the store's
# programs and with their mantissas packed (the bits leaf).
add_executable(brevis_program_decode_bench bench/program_decode.cpp)
target_link_libraries(brevis_program_decode_bench PRIVATE brevis_codec)
