#!/usr/bin/env bash
# The main job, until the mount lands: install and build (scripts/setup.sh),
# fetch a few real checkpoints (scripts/fetch-corpus.sh --small), compress one,
# print its inspect table, verify it and check the roundtrip byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/fetch-corpus.sh --small

input=${1:-corpus/meet.bf16.safetensors}
[[ -f $input ]] || { echo "run: $input not found" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build/brevis compress -v -f "$input" -o "$work/model.brv"
build/brevis inspect "$work/model.brv"
build/brevis verify "$work/model.brv"
build/brevis decompress -f "$work/model.brv" -o "$work/model.out"
cmp "$input" "$work/model.out"
echo "run: $input roundtrips byte for byte" \
  "($(stat -c %s "$input") -> $(stat -c %s "$work/model.brv") bytes)"
