#!/usr/bin/env bash
# Installs what is needed, builds Release (build/) and an AddressSanitizer +
# UndefinedBehaviorSanitizer tree (build-asan/), and runs every test in both.
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
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"
echo "== all tests passed" >&2
