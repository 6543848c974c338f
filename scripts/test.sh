#!/usr/bin/env bash
# Installs what is needed, builds Release (build/) and an AddressSanitizer +
# UndefinedBehaviorSanitizer tree (build-asan/), and runs every test in both;
# then builds the libFuzzer targets with clang (build-fuzz/) and replays the
# fuzz corpora through them; then runs the store, pipeline, cache and mount
# tests under ThreadSanitizer (scripts/tsan.sh, build-tsan/).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

jobs=$(nproc)
echo "== tests: Release" >&2
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== tests: AddressSanitizer + UndefinedBehaviorSanitizer" >&2
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DBREVIS_SANITIZE=ON
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"

# The libFuzzer targets build only with clang, which nothing else here uses:
# build them and run the committed corpora through them once (-runs=0), so a
# change that breaks the clang build or the fuzzers shows here, not when
# someone next fuzzes.
echo "== libFuzzer targets (clang): build and replay the corpora" >&2
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DBREVIS_FUZZ=ON
cmake --build build-fuzz --target fuzz_decode fuzz_program fuzz_parse fuzz_compress
# UBSan only prints unless told to stop: a report must fail the replay.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
build-fuzz/tests/fuzz_decode -runs=0 tests/fuzz/corpus/decode tests/data/bad
build-fuzz/tests/fuzz_program -runs=0 tests/fuzz/corpus/program
build-fuzz/tests/fuzz_parse -runs=0 tests/fuzz/corpus/parse
build-fuzz/tests/fuzz_compress -runs=0 tests/fuzz/corpus/parse \
  tests/fuzz/corpus/compress tests/data/bad

echo "== ThreadSanitizer: the store, the pipeline, the cache and the mounts" >&2
bash scripts/tsan.sh
echo "== all tests passed" >&2
