#!/usr/bin/env bash
# ThreadSanitizer over the parts of brevis that run threads: the store, the
# compression pipeline, the read cache and every mount test (the daemons the
# tests start are the instrumented binary too). Every process writes its
# reports to build-tsan/reports/: any report fails the run, also from a
# daemon a test killed (whose exit status nobody reads).
#
# oneTBB is built from Debian's source of the packaged version with
# ThreadSanitizer into build-tsan/onetbb first (fetched once: the first run
# needs the network): the packaged library is not instrumented, and the flow
# graph's hand-offs of messages between its workers then look like races.
# LMDB's own functions are suppressed (tests/tsan.supp).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
tbb_version=2021.8.0
tbb_sha256=7e9111b8bb59c8800bf6d0b06afe7b0891937443d2dae1ee1101c8e2ede6a7ef
tbb_url=http://deb.debian.org/debian/pool/main/o/onetbb/onetbb_${tbb_version}.orig.tar.xz
tbb=build-tsan/onetbb
# Its library must match the headers brevis is compiled with.
packaged=$(dpkg-query -W -f='${Version}' libtbb-dev)
if [[ $packaged != "$tbb_version"-* ]]; then
  echo "tsan: libtbb-dev is $packaged; this script builds oneTBB $tbb_version" >&2
  exit 1
fi
if [[ "$(cat "$tbb/stamp" 2>/dev/null)" != "$tbb_sha256" ]]; then
  echo "tsan: building oneTBB $tbb_version with ThreadSanitizer" >&2
  rm -rf "$tbb" && mkdir -p "$tbb"
  curl -fsS --retry 3 -o "$tbb/src.tar.xz" "$tbb_url"
  echo "$tbb_sha256  $tbb/src.tar.xz" | sha256sum -c --quiet
  tar -xf "$tbb/src.tar.xz" -C "$tbb"
  cmake -S "$tbb/oneTBB-$tbb_version" -B "$tbb/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_SANITIZE=thread -DTBB_TEST=OFF \
    -DTBB_STRICT=OFF -DTBBMALLOC_BUILD=OFF -DTBB_EXAMPLES=OFF >/dev/null
  # (Its build warns that TSan does not model atomic fences: kept in a log.)
  cmake --build "$tbb/build" --target tbb >"$tbb/build.log" 2>&1 ||
    { tail -50 "$tbb/build.log" >&2; exit 1; }
  mkdir -p "$tbb/lib"
  cp -a "$tbb"/build/*_relwithdebinfo/libtbb.so* "$tbb/lib/"
  echo "$tbb_sha256" >"$tbb/stamp"
fi

tests=(store_test deferred_sync_test chunk_cache_test pipeline_test
  readahead_test resize_gate_test mount_lock_test mount_test mount_fs_test
  mount_race_test mount_crash_test mount_stress_test mount_edge_test
  mount_signal_test mount_read_test mount_full_disk_test)
echo "tsan: building brevis and ${#tests[@]} test programs" >&2
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_CXX_FLAGS=-fsanitize=thread \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
  -DBREVIS_STATIC_CXX_RUNTIME=OFF >/dev/null
cmake --build build-tsan -j "$jobs" --target brevis "${tests[@]}"

reports=$PWD/build-tsan/reports
rm -rf "$reports" && mkdir -p "$reports"
export LD_LIBRARY_PATH=$PWD/$tbb/lib BREVIS=$PWD/build-tsan/brevis
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp second_deadlock_stack=1 log_path=$reports/report"
failed=()
for t in "${tests[@]}"; do
  echo "tsan: $t" >&2
  # A forked child that starts threads is not supported under TSan.
  filter=-store_test.unsynced_commits_outlive_their_process
  build-tsan/tests/"$t" --gtest_filter="$filter" >"build-tsan/$t.log" 2>&1 ||
    failed+=("$t")
done
for t in "${failed[@]}"; do
  echo "== tsan: $t failed" >&2
  { grep -E -A30 'FAILED|Failure' "build-tsan/$t.log" ||
    tail -n 40 "build-tsan/$t.log"; } | head -n 200 >&2 || true
done
shopt -s nullglob
found=("$reports"/report*)
for r in "${found[@]}"; do
  echo "== tsan: $r" >&2
  head -n 120 "$r" >&2 || true
done
if ((${#failed[@]} + ${#found[@]})); then
  echo "tsan: ${#failed[@]} test programs failed, ${#found[@]} reports" >&2
  exit 1
fi
echo "tsan: no races in ${#tests[@]} test programs" >&2
