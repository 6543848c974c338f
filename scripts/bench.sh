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
#   --search     also the search ablation (bench_search below): brevis -T1 with
#                --search=astar|greedy|fixed x --prior=learned|uniform, side by
#                side, with the search expansions each spent.
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

# The program search ablation (issue 3): ratio and compress speed per
# strategy and prior, and the expansions spent (from compress -v).
bench_search() {
  local s p name log
  for s in astar greedy fixed; do
    for p in learned uniform; do
      [[ $s == fixed && $p == uniform ]] && continue  # fixed has no prior
      name="brevis-$s-$p"
      [[ $s == fixed ]] && name="brevis-fixed"
      log=$BENCH_WORK/search-$name.log
      : >"$log"
      measure_tool "$name" \
        "'$brevis' compress -v -f -T1 --search=$s --prior=$p {in} -o {out} 2>>'$log'" \
        "'$brevis' decompress -q -f -T1 {in} -o {out}"
      echo "bench: $name: $(awk '/search expansions/ {e += $(NF-2); c += $4} \
        END {printf "%d search expansions, %.2f s choosing programs", e, c}' "$log")" >&2
    done
  done
}

bench_before_peers() {
  local t start
  if ((BENCH_SEARCH)); then bench_search; fi
  for t in 1 2; do
    start=$(date +%s.%N)
    measure_tool "brevis-T$t" "'$brevis' compress -q -f -T$t {in} -o {out}" \
      "'$brevis' decompress -q -f -T$t {in} -o {out}"
    echo "bench: brevis -T$t: $(awk -v s="$start" -v e="$(date +%s.%N)" \
      'BEGIN{printf "%.1f", e - s}') s wall for all files" >&2
  done
  bench_store
}

BENCH_SEARCH=0
args=()
for a in "$@"; do
  if [[ $a == --search ]]; then BENCH_SEARCH=1; else args+=("$a"); fi
done
bench_peers_main "${args[@]}"
