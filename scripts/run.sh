#!/usr/bin/env bash
# The main job: install and build (scripts/setup.sh), fetch a few real
# checkpoints (scripts/fetch-corpus.sh --small) and check one roundtrips
# through a .brv archive, then mount the default store and copy that
# checkpoint in, wait (at most two minutes) until it is compressed in the
# background, and say how to use and unmount the mount. The mount daemonizes
# and stays; run again and it is reused.
#
#   scripts/run.sh [CHECKPOINT]
#   BREVIS_STORE (default ~/brevis-store), BREVIS_MOUNT (default ~/models)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/fetch-corpus.sh --small

input=${1:-corpus/meet.bf16.safetensors}
[[ -f $input ]] || { echo "run: $input not found" >&2; exit 1; }
brevis=$PWD/build/brevis
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The codec alone: a standalone archive, verified and decoded back.
"$brevis" compress -f "$input" -o "$work/model.brv"
"$brevis" verify "$work/model.brv"
"$brevis" decompress -f "$work/model.brv" -o "$work/model.out"
cmp "$input" "$work/model.out"
echo "run: $input roundtrips byte for byte" \
  "($(stat -c %s "$input") -> $(stat -c %s "$work/model.brv") bytes)"

# The mount on the default store.
store=${BREVIS_STORE:-$HOME/brevis-store}
mnt=${BREVIS_MOUNT:-$HOME/models}
mkdir -p "$mnt"
if mountpoint -q "$mnt"; then
  echo "run: $mnt is mounted already; using it"
else
  # Daemonizes once mounted; logs go to syslog (journalctl -t brevis).
  "$brevis" mount "$store" "$mnt"
fi
name=$(basename "$input")
cp "$input" "$mnt/$name"
state=
for _ in $(seq 1200); do
  state=$(getfattr --only-values -n user.brevis.state "$mnt/$name" 2>/dev/null || true)
  [[ $state == compressed ]] && break
  sleep 0.1
done
cmp "$input" "$mnt/$name"
echo "run: $mnt/$name reads back byte for byte (state: ${state:-unknown})"
getfattr -d -m 'user.brevis.(state|logical|stored|ratio)' "$mnt/$name"
"$brevis" stats "$store"
cat <<EOF

The store $store is mounted on $mnt (the daemon keeps running):
  cp -r some-checkpoint/ $mnt/           # at disk speed; compressed behind
  getfattr -d -m user.brevis $mnt/FILE   # state, sizes, ratio, programs
  du -sh $mnt; du -sh --apparent-size $mnt; $brevis stats $store
  $brevis unmount $mnt                   # or: fusermount3 -u $mnt
  $brevis mount $store $mnt              # everything is still there
EOF
