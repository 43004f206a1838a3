#!/usr/bin/env bash
# Installs NVRTC 13.0 from PyPI (no CUDA toolkit, no driver needed) for the sapwood-cuda tests
# that compile every kernel, and prints the directory holding libnvrtc.so.13 on the last line
# of stdout. Idempotent: a second run only prints the directory.
#
#   export LD_LIBRARY_PATH="$(crates/sapwood-cuda/install-nvrtc.sh | tail -n1):$LD_LIBRARY_PATH"
#   SAPWOOD_REQUIRE_NVRTC=1 cargo test -p sapwood-cuda --release
#
# 13.0 is pinned on purpose: a driver refuses PTX from a newer NVRTC than itself, and the
# oldest driver Sapwood targets runs CUDA 13.0. SAPWOOD_NVRTC_DIR overrides the install
# location (default: target/nvrtc in the repository).
set -euo pipefail
VERSION=13.0.88
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="${SAPWOOD_NVRTC_DIR:-$root/target/nvrtc}"
lib="$dest/nvidia/cu13/lib"
stamp="$dest/.installed-$VERSION"
if [ ! -f "$stamp" ] || ! ls "$lib"/libnvrtc.so* >/dev/null 2>&1; then
    py="${PYTHON:-python3}"
    mkdir -p "$dest"
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
        --target "$dest" "nvidia-cuda-nvrtc==$VERSION" >&2
    touch "$stamp"
fi
if ! ls "$lib"/libnvrtc.so* >/dev/null 2>&1; then
    echo "install-nvrtc.sh: no libnvrtc.so under $lib after installing" >&2
    exit 1
fi
# cudarc looks for libnvrtc.so (and libnvrtc.so.13): make sure the plain name exists
if [ ! -e "$lib/libnvrtc.so" ]; then
    first="$(cd "$lib" && ls libnvrtc.so.* | grep -v builtins | sort | head -n1)"
    ln -sf "$first" "$lib/libnvrtc.so"
fi
echo "$lib"
