#!/usr/bin/env bash
# Installs every Debian package that brevis needs to build, test and benchmark,
# then configures and builds a Release tree into build/. Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config ninja-build git
  clang libclang-rt-14-dev clang-format clang-tidy
  libfuse3-dev fuse3 liblmdb-dev lmdb-utils libtbb-dev libcli11-dev
  libgtest-dev libgmock-dev libhtscodecs-dev libbz2-dev libzstd-dev
  libxxhash-dev
  nlohmann-json3-dev
  zstd xz-utils gzip lz4 attr curl ca-certificates
  python3 python3-numpy python3-torch
)
# Node.js and npm (for fetching the corpus) may come from outside Debian; only
# install Debian's when none is on PATH.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The mount's user.brevis.* attributes describe how a file is stored there,
# not the file: cp -a and cp --preserve=xattr (libattr's /etc/xattr.conf)
# then leave them behind, as they do Beagle's index data.
if [[ -f /etc/xattr.conf ]] && ! grep -q '^user\.brevis\.\*' /etc/xattr.conf; then
  printf 'user.brevis.*\t\t\tskip\t\t# brevis mount: how a file is stored\n' \
    >>/etc/xattr.conf
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
