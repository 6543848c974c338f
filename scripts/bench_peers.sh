#!/usr/bin/env bash
# Measures the peer compressors on checkpoint files, per dtype class:
# compressed ratio, compress and decompress MB/s (MB of original per CPU-second
# of the tool, one thread, input in the page cache, output on tmpfs), plus the
# order-0 entropy bounds of scripts/entropy_bound.py (ratio only).
#
#   scripts/bench_peers.sh [options] [FILE...]   (default: corpus/*.safetensors corpus/*.pt)
#     --quick N       only the first N files (by name) of each class (the full
#                     corpus takes ~30 min on a busy 2-core box, mostly zstd -19 and xz)
#     --per-file      also print one row per file and tool
#     --tools LIST    comma-separated subset of: zstd-3,zstd-19,xz-6,gzip-6,lz4,bound
#     --raw FILE      also write the raw measurements (TSV) to FILE
#     --no-verify     skip the byte-exact roundtrip check (cmp) after decompression
#     --speed-min-mb M  speeds count only files of at least M MB (default 4: process
#                     start-up dominates on small files); a class without such
#                     files uses all its files. Ratios always use every file.
#     --repeat N      time the tools whose speed is a target (brevis -T1, zstd -3)
#                     N times per file and keep the least CPU (default 3: one run
#                     of a 5 MB file drifted up to 2x on the shared box)
#
# Classes come from file names: *bf16*.safetensors, *fp16*.safetensors,
# *fp32*.safetensors, *.pt (bf16 .pt); anything else is its own class.
#
# Reusable: `source scripts/bench_peers.sh` defines the functions without running
# anything. scripts/bench.sh adds a column with
#   bench_init FILE...
#   measure_tool brevis 'build/brevis compress {in} -o {out}' 'build/brevis decompress {in} -o {out}'
#   bench_report
# A command is run by bash with {in} and {out} replaced by (quoted) paths; it must
# read {in} and write {out}. Its CPU time (user+sys of its processes) is measured.
BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_PYTHON=${PYTHON:-/usr/bin/python3}
BENCH_VERIFY=1
BENCH_PER_FILE=0
BENCH_QUICK=0
BENCH_RAW=
BENCH_SPEED_MIN_MB=4
BENCH_REPEAT=3
BENCH_FILES=()
BENCH_TOOLS=()   # tool names in the order measured
BENCH_WORK=

bench_die() { echo "bench_peers: error: $*" >&2; exit 1; }

# Class label of a file, from its name.
bench_class() {
  local b; b=$(basename "$1")
  case $b in
    *bf16*.safetensors) echo "bf16 safetensors" ;;
    *fp16*.safetensors) echo "fp16 safetensors" ;;
    *fp32*.safetensors) echo "fp32 safetensors" ;;
    *.safetensors) echo "safetensors" ;;
    *bf16*.pt|*.pt) echo "bf16 .pt" ;;
    *.*) echo ".${b##*.}" ;;
    *) echo "other" ;;
  esac
}

# bench_init FILE...: choose the files (applying --quick), warm the page cache,
# create the work directory (on tmpfs when available) and the results table.
bench_init() {
  local f c
  local -A taken=()
  BENCH_FILES=()
  for f in "$@"; do
    [[ -f $f ]] || bench_die "no such file: $f"
    c=$(bench_class "$f")
    if ((BENCH_QUICK > 0)); then
      ((${taken[$c]:-0} >= BENCH_QUICK)) && continue
      taken[$c]=$((${taken[$c]:-0} + 1))
    fi
    BENCH_FILES+=("$f")
  done
  ((${#BENCH_FILES[@]})) || bench_die "no input files (run scripts/fetch-corpus.sh first)"
  local base=${TMPDIR:-/tmp}
  [[ -d /dev/shm && -w /dev/shm ]] && base=/dev/shm
  BENCH_WORK=$(mktemp -d "$base/bench_peers.XXXXXX") || bench_die "cannot create work dir"
  trap 'rm -rf "$BENCH_WORK"' EXIT
  # results: tool class file original compressed ctime dtime ok
  : >"$BENCH_WORK/results"
  cat "${BENCH_FILES[@]}" >/dev/null
}

# bench_time CMD: runs CMD (a bash command string) and sets BENCH_SECS to the
# user+sys CPU seconds it took. Returns the command's status.
bench_time() {
  local TIMEFORMAT='%3U %3S' rc t
  { time eval "$1" 2>>"$BENCH_WORK/stderr"; } 2>"$BENCH_WORK/time"
  rc=$?
  t=$(tail -n 1 "$BENCH_WORK/time")
  BENCH_SECS=$(awk -v u="${t% *}" -v s="${t#* }" 'BEGIN{printf "%.3f", u + s}')
  return $rc
}

# bench_time_min N CMD: bench_time N times (stopping at a failure), BENCH_SECS
# the least of them: the run least disturbed by the other work on the box.
bench_time_min() {
  local n=$1 i best=
  for ((i = 0; i < n; i++)); do
    bench_time "$2" || return
    if [[ -z $best ]] || awk -v a="$BENCH_SECS" -v b="$best" 'BEGIN{exit !(a < b)}'; then
      best=$BENCH_SECS
    fi
  done
  BENCH_SECS=${best:-0}
}

# Substitutes {in} and {out} in a command template with quoted paths.
bench_subst() {
  local cmd=$1 qin qout
  printf -v qin '%q' "$2"
  printf -v qout '%q' "$3"
  cmd=${cmd//\{in\}/$qin}
  cmd=${cmd//\{out\}/$qout}
  printf '%s' "$cmd"
}

# measure_tool NAME COMPRESS_CMD DECOMPRESS_CMD [REPEAT]
# Runs the tool on every file of BENCH_FILES: compress file -> c, decompress
# c -> d, check d == file; records sizes and CPU times (the least of REPEAT
# runs each, default 1).
measure_tool() {
  local name=$1 ccmd=$2 dcmd=$3 repeat=${4:-1} f orig csize ct dt ok
  local c=$BENCH_WORK/compressed d=$BENCH_WORK/decompressed
  BENCH_TOOLS+=("$name")
  for f in "${BENCH_FILES[@]}"; do
    rm -f "$c" "$d"
    orig=$(stat -c %s "$f")
    ok=1
    if ! bench_time_min "$repeat" "$(bench_subst "$ccmd" "$f" "$c")" || [[ ! -f $c ]]; then
      echo "bench_peers: $name failed to compress $f" >&2
      tail -n 3 "$BENCH_WORK/stderr" >&2
      printf '%s\t%s\t%s\t%s\t-\t-\t-\t0\n' "$name" "$(bench_class "$f")" "$f" "$orig" \
        >>"$BENCH_WORK/results"
      continue
    fi
    ct=$BENCH_SECS
    csize=$(stat -c %s "$c")
    if ! bench_time_min "$repeat" "$(bench_subst "$dcmd" "$c" "$d")"; then
      echo "bench_peers: $name failed to decompress $f" >&2
      ok=0
    fi
    dt=$BENCH_SECS
    if ((BENCH_VERIFY)) && ((ok)) && ! cmp -s "$f" "$d"; then
      echo "bench_peers: $name: roundtrip MISMATCH on $f" >&2
      ok=0
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$(bench_class "$f")" "$f" "$orig" \
      "$csize" "$ct" "$dt" "$ok" >>"$BENCH_WORK/results"
  done
  rm -f "$c" "$d"
}

# measure_bound: order-0 entropy bounds (whole-word and fields) as ratio-only tools.
measure_bound() {
  BENCH_TOOLS+=("bound" "bound-fields")
  "$BENCH_PYTHON" "$BENCH_ROOT/scripts/entropy_bound.py" --tsv "${BENCH_FILES[@]}" \
    >"$BENCH_WORK/bound" || bench_die "entropy_bound.py failed"
  local f orig w fl
  while IFS=$'\t' read -r f orig w fl; do
    printf 'bound\t%s\t%s\t%s\t%s\t-\t-\t1\n' "$(bench_class "$f")" "$f" "$orig" "$w"
    printf 'bound-fields\t%s\t%s\t%s\t%s\t-\t-\t1\n' "$(bench_class "$f")" "$f" "$orig" "$fl"
  done <"$BENCH_WORK/bound" >>"$BENCH_WORK/results"
}

measure_peers() {
  local t
  for t in "$@"; do
    case $t in
      zstd-3) measure_tool zstd-3 'zstd -3 -T1 -q -c {in} >{out}' 'zstd -d -T1 -q -c {in} >{out}' \
        "$BENCH_REPEAT" ;;
      zstd-19) measure_tool zstd-19 'zstd -19 -T1 -q -c {in} >{out}' 'zstd -d -T1 -q -c {in} >{out}' ;;
      xz-6) measure_tool xz-6 'xz -6 -T1 -c {in} >{out}' 'xz -d -T1 -c {in} >{out}' ;;
      gzip-6) measure_tool gzip-6 'gzip -6 -c {in} >{out}' 'gzip -d -c {in} >{out}' ;;
      lz4) measure_tool lz4 'lz4 -q -c {in} >{out}' 'lz4 -d -q -c {in} >{out}' ;;
      bound) measure_bound ;;
      *) bench_die "unknown tool $t (known: zstd-3,zstd-19,xz-6,gzip-6,lz4,bound)" ;;
    esac
  done
}

# bench_report: the per-class table (and per-file rows with --per-file).
# Ratio = sum(original) / sum(compressed); speeds = sum(original MB) / sum(CPU s).
bench_report() {
  [[ -n $BENCH_RAW ]] && cp "$BENCH_WORK/results" "$BENCH_RAW"
  awk -F'\t' -v tools="${BENCH_TOOLS[*]}" -v perfile="$BENCH_PER_FILE" \
    -v minb="$(awk -v m="$BENCH_SPEED_MIN_MB" 'BEGIN{print m * 1e6}')" -v root="$PWD/" '
    function speed(mb, s) { return s > 0 ? sprintf("%.0f", mb / s) : "-" }
    # Issue 2 targets per brevis tool: the 16-bit classes against the whole-word
    # bound, with and without the .pt files (the bound counts their zip and
    # pickle bytes raw, which flatters any coder), and the files that lose to
    # xz -6 or zstd -19.
    function targets(   i, f, t, set, n, o16, c16, b16, lose, peer, p, cnt, seenpeer) {
      if (!has_bound) return
      print ""
      print "| tool | 16-bit set | ratio | bound | % of bound | files (all classes) not smaller than xz-6 / zstd-19 |"
      print "|---|---|---:|---:|---:|---|"
      for (i = 1; i <= nt; i++) {
        t = T[i]
        if (t !~ /^brevis/) continue
        for (set = 1; set <= 2; set++) {
          o16 = 0; c16 = 0; b16 = 0; n = 0
          for (f in fcls) {
            if (fcls[f] != "bf16 safetensors" && fcls[f] != "fp16 safetensors" &&
                !(set == 2 && fcls[f] == "bf16 .pt")) continue
            if (!((t SUBSEP f) in fcomp) || !(("bound" SUBSEP f) in fcomp)) continue
            o16 += forig[f]; c16 += fcomp[t SUBSEP f]; b16 += fcomp["bound" SUBSEP f]; n++
          }
          lose = ""
          if (set == 1) {
            lose = "-"
            for (p = 1; p <= 2; p++) {
              peer = p == 1 ? "xz-6" : "zstd-19"
              cnt = 0; seenpeer = 0
              for (f in fcls)
                if (((peer SUBSEP f) in fcomp) && ((t SUBSEP f) in fcomp)) {
                  seenpeer = 1
                  if (fcomp[t SUBSEP f] + 0 >= fcomp[peer SUBSEP f] + 0) cnt++
                }
              lose = p == 1 ? (seenpeer ? cnt : "-") : lose " / " (seenpeer ? cnt : "-")
            }
          }
          if (n == 0) continue
          printf("| %s | %s (%d files) | %.4f | %.4f | %.2f%% | %s |\n", t,
                 set == 1 ? "bf16+fp16 safetensors" : "bf16+fp16 incl. .pt", n,
                 o16 / c16, o16 / b16, 100 * b16 / c16, lose)
        }
      }
    }
    # Issue 2 speed targets per brevis -T1 tool, on files >= the speed floor:
    # compression at >= 2x zstd -3 -T1 (CPU seconds) and decompression at
    # least as fast as zstd -d, file by file, with the five slowest named.
    function speed_targets(   i, t, f, n, slow_c, slow_d, m, k, j, fc, fd, name, tmp, tmpn, worst) {
      if (!has_zstd3 || !has_brevis_t1) return
      print ""
      print "| tool | files >= " minb / 1e6 " MB | compress < 2x zstd -3 | decompress slower than zstd -d | slowest compress (x zstd -3) |"
      print "|---|---:|---:|---:|---|"
      for (i = 1; i <= nt; i++) {
        t = T[i]
        if (t !~ /^brevis/ || t !~ /T1$/) continue
        n = 0; slow_c = 0; slow_d = 0; m = 0
        for (f in fcls) {
          if (forig[f] < minb || !((t SUBSEP f) in fct) || !(("zstd-3" SUBSEP f) in fct)) continue
          if (fct[t SUBSEP f] <= 0 || fdt[t SUBSEP f] <= 0) continue
          if (fct["zstd-3" SUBSEP f] <= 0 || fdt["zstd-3" SUBSEP f] <= 0) continue
          n++
          fc = fct["zstd-3" SUBSEP f] / fct[t SUBSEP f]
          fd = fdt["zstd-3" SUBSEP f] / fdt[t SUBSEP f]
          if (fc < 2) slow_c++
          if (fd < 1) slow_d++
          FC[++m] = fc; FN[m] = f
        }
        for (k = 2; k <= m; k++)  # insertion sort, slowest first
          for (j = k; j > 1 && FC[j] < FC[j - 1]; j--) {
            tmp = FC[j]; FC[j] = FC[j - 1]; FC[j - 1] = tmp
            tmpn = FN[j]; FN[j] = FN[j - 1]; FN[j - 1] = tmpn
          }
        worst = ""
        for (k = 1; k <= m && k <= 5; k++) {
          name = FN[k]; sub(/.*\//, "", name)
          worst = worst (k > 1 ? ", " : "") sprintf("%s %.2f", name, FC[k])
        }
        if (n == 0) printf("| %s | 0 | - | - | (no file this large) |\n", t)
        else printf("| %s | %d | %d | %d | %s |\n", t, n, slow_c, slow_d, worst)
      }
    }
    BEGIN {
      nt = split(tools, T, " ")
      for (i = 1; i <= nt; i++) {
        if (T[i] == "bound") has_bound = 1
        if (T[i] == "zstd-3") has_zstd3 = 1
        if (T[i] ~ /^brevis/ && T[i] ~ /T1$/) has_brevis_t1 = 1
      }
    }
    {
      tool = $1; cls = $2; file = $3
      if (!(cls in seen)) { seen[cls] = 1; C[++nc] = cls }
      key = tool SUBSEP cls
      if (!((cls SUBSEP file) in counted)) {
        counted[cls SUBSEP file] = 1; orig[cls] += $4; nfiles[cls]++
      }
      if ($5 == "-" || $8 == 0) { bad[key]++ }
      else {
        comp[key] += $5; o[key] += $4
        if ($6 != "-") {
          ct[key] += $6; dt[key] += $7; so[key] += $4
          if ($4 >= minb) { bct[key] += $6; bdt[key] += $7; bso[key] += $4 }
        }
      }
      if (perfile) rows[++nr] = $0
      if ($5 != "-" && $8 != 0) { fcomp[tool SUBSEP file] = $5; fcls[file] = cls; forig[file] = $4 }
      if ($6 != "-" && $8 != 0) { fct[tool SUBSEP file] = $6; fdt[tool SUBSEP file] = $7 }
    }
    END {
      hdr = "| class | files | MB |"; sep = "|---|---:|---:|"
      for (i = 1; i <= nt; i++) {
        if (T[i] ~ /^bound/) { hdr = hdr " " T[i] " |"; sep = sep "---:|" }
        else { hdr = hdr " " T[i] " ratio | c MB/s | d MB/s |"; sep = sep "---:|---:|---:|" }
      }
      printf("speeds: MB of original per CPU-second, files >= %g MB (all files of a class that has none); brevis -T1 and zstd -3 the least of --repeat runs, the others one run\n\n", minb / 1e6)
      print hdr; print sep
      for (j = 1; j <= nc + 1; j++) {
        if (j <= nc) { cls = C[j]; mb = orig[cls] / 1e6; nf = nfiles[cls] }
        else {
          if (nc < 2) break
          cls = "all"; mb = 0; nf = 0
          for (k = 1; k <= nc; k++) { mb += orig[C[k]] / 1e6; nf += nfiles[C[k]] }
          for (i = 1; i <= nt; i++) for (k = 1; k <= nc; k++) {
            kk = T[i] SUBSEP C[k]; ka = T[i] SUBSEP "all"
            comp[ka] += comp[kk]; o[ka] += o[kk]; ct[ka] += ct[kk]; dt[ka] += dt[kk]; bad[ka] += bad[kk]
            so[ka] += so[kk]; bso[ka] += bso[kk]; bct[ka] += bct[kk]; bdt[ka] += bdt[kk]
          }
        }
        line = sprintf("| %s | %d | %.1f |", cls, nf, mb)
        for (i = 1; i <= nt; i++) {
          key = T[i] SUBSEP cls
          r = comp[key] > 0 ? sprintf("%.3f", o[key] / comp[key]) : "-"
          if (bad[key]) r = r " (" bad[key] " failed)"
          if (T[i] ~ /^bound/) line = line " " r " |"
          else if (bso[key] > 0)
            line = line sprintf(" %s | %s | %s |", r, speed(bso[key] / 1e6, bct[key]),
                                speed(bso[key] / 1e6, bdt[key]))
          else
            line = line sprintf(" %s | %s | %s |", r, speed(so[key] / 1e6, ct[key]),
                                speed(so[key] / 1e6, dt[key]))
        }
        print line
      }
      targets()
      speed_targets()
      if (perfile) {
        print ""
        print "| tool | class | file | bytes | compressed | ratio | c MB/s | d MB/s |"
        print "|---|---|---|---:|---:|---:|---:|---:|"
        for (i = 1; i <= nr; i++) {
          split(rows[i], F, "\t")
          r = (F[5] != "-" && F[5] > 0) ? sprintf("%.3f", F[4] / F[5]) : "-"
          if (F[8] == 0) r = r " FAILED"
          f = F[3]; if (index(f, root) == 1) f = substr(f, length(root) + 1)
          printf("| %s | %s | %s | %d | %s | %s | %s | %s |\n", F[1], F[2], f, F[4], F[5], r,
                 F[6] == "-" ? "-" : speed(F[4] / 1e6, F[6]), F[7] == "-" ? "-" : speed(F[4] / 1e6, F[7]))
        }
      }
    }' "$BENCH_WORK/results"
  if awk -F'\t' '$8 == 0 { f = 1 } END { exit !f }' "$BENCH_WORK/results"; then
    echo "bench_peers: some measurements failed (see above)" >&2
    return 1
  fi
}

bench_peers_main() {
  local tools=zstd-3,zstd-19,xz-6,gzip-6,lz4,bound files=()
  while (($#)); do
    case $1 in
      --quick) BENCH_QUICK=${2:?--quick needs N}; shift ;;
      --per-file) BENCH_PER_FILE=1 ;;
      --tools) tools=${2:?--tools needs a list}; shift ;;
      --raw) BENCH_RAW=${2:?--raw needs a file}; shift ;;
      --no-verify) BENCH_VERIFY=0 ;;
      --speed-min-mb) BENCH_SPEED_MIN_MB=${2:?--speed-min-mb needs M}; shift ;;
      --repeat) BENCH_REPEAT=${2:?--repeat needs N}; shift ;;
      -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
      -*) bench_die "unknown option $1 (see --help)" ;;
      *) files+=("$1") ;;
    esac
    shift
  done
  [[ $BENCH_QUICK =~ ^[0-9]+$ ]] || bench_die "--quick needs a number"
  [[ $BENCH_REPEAT =~ ^[1-9][0-9]*$ ]] || bench_die "--repeat needs a number >= 1"
  if ! ((${#files[@]})); then
    shopt -s nullglob
    files=("$BENCH_ROOT"/corpus/*.safetensors "$BENCH_ROOT"/corpus/*.pt)
    shopt -u nullglob
    # class order: bf16, fp16, fp32 safetensors, then .pt
    local sorted=() c f
    for c in "bf16 safetensors" "fp16 safetensors" "fp32 safetensors" "bf16 .pt"; do
      for f in "${files[@]}"; do [[ $(bench_class "$f") == "$c" ]] && sorted+=("$f"); done
    done
    files=("${sorted[@]}")
  fi
  local t; IFS=, read -ra tl <<<"$tools"
  for t in "${tl[@]}"; do
    case $t in zstd-*) t=zstd ;; xz-*) t=xz ;; gzip-*) t=gzip ;; bound) t=$BENCH_PYTHON ;; esac
    command -v "$t" >/dev/null || bench_die "$t not found (scripts/setup.sh installs it)"
  done
  bench_init "${files[@]}"
  echo "bench_peers: ${#BENCH_FILES[@]} files, tools: $tools" >&2
  # scripts/bench.sh measures brevis first, in the same run, through this hook.
  if declare -F bench_before_peers >/dev/null; then bench_before_peers; fi
  measure_peers "${tl[@]}"
  bench_report
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -uo pipefail
  bench_peers_main "$@"
fi
