# The benchmark's plain FUSE passthrough (scripts/bench.sh --mount): built
# with the tests, never installed.
pkg_check_modules(FUSE3_PT REQUIRED IMPORTED_TARGET fuse3)
add_executable(brevis_passthrough bench/passthrough.cpp)
target_compile_definitions(brevis_passthrough PRIVATE _FILE_OFFSET_BITS=64)
target_link_libraries(brevis_passthrough PRIVATE PkgConfig::FUSE3_PT)
