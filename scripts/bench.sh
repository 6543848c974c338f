#!/usr/bin/env bash
# Benchmarks brevis against the peers on the corpus (scripts/fetch-corpus.sh),
# in one run, per dtype class: ratio and compress/decompress MB/s per CPU-second
# for brevis at -T1 and -T2, zstd -3, zstd -19, xz -6, gzip -6, lz4, and the
# order-0 entropy bounds. The machine is shared and noisy: compare speeds with
# each other within one run, not across runs.
#
#   scripts/bench.sh [bench_peers options] [FILE...]
#     --quick N    N files per class (the full corpus takes ~35 min, mostly xz
#                  and zstd -19); --tools LIST picks peers; --per-file adds rows.
#
# -T2 speeds are MB per CPU-second too (both cores' time counted), so they show
# parallel overhead, not wall-clock speed-up; the wall time is printed apart.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
brevis=${BREVIS:-$here/../build/brevis}
[[ -x $brevis ]] || { echo "bench: $brevis not built (run scripts/setup.sh)" >&2; exit 1; }

# shellcheck source=bench_peers.sh
source "$here/bench_peers.sh"

# The store's add/get beside compress/decompress (same codec, plus pack
# writes, fsync and LMDB commits); the "compressed size" is the pack bytes.
bench_store() {
  local st=$BENCH_WORK/store
  measure_tool "store-T2" \
    "rm -rf '$st' && '$brevis' store add -q -T2 '$st' {in} --as x && truncate -s \$(cat '$st'/packs/*.pack | wc -c) {out}" \
    "'$brevis' store get -q -f -T2 '$st' x -o {out}"
  # Random 128 KiB reads from the largest bf16 checkpoint, cold page cache.
  local f big=""
  for f in "${BENCH_FILES[@]}"; do
    [[ $f == *bf16* ]] || continue
    [[ -z $big || $(stat -c %s "$f") -gt $(stat -c %s "$big") ]] && big=$f
  done
  if [[ -n $big ]]; then
    rm -rf "$st"
    "$brevis" store add -q -T2 "$st" "$big" --as x &&
      echo "bench: store random reads ($big): $("$brevis" store read-bench -q -T2 "$st" x --count 500)" >&2
    rm -rf "$st"
  fi
}

bench_before_peers() {
  local t start
  for t in 1 2; do
    start=$(date +%s.%N)
    measure_tool "brevis-T$t" "'$brevis' compress -q -f -T$t {in} -o {out}" \
      "'$brevis' decompress -q -f -T$t {in} -o {out}"
    echo "bench: brevis -T$t: $(awk -v s="$start" -v e="$(date +%s.%N)" \
      'BEGIN{printf "%.1f", e - s}') s wall for all files" >&2
  done
  bench_store
}

bench_peers_main "$@"
