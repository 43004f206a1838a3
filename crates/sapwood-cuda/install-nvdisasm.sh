#!/usr/bin/env bash
# Installs nvdisasm from PyPI (no CUDA toolkit, no driver needed) for the sapwood-cuda test
# that disassembles the CUBINs NVRTC builds for sm_90 and inspects their SASS, and prints the
# directory holding the `nvdisasm` binary on the last line of stdout. Idempotent: a second
# run only prints the directory.
#
#   export SAPWOOD_NVDISASM="$(crates/sapwood-cuda/install-nvdisasm.sh | tail -n1)/nvdisasm"
#   SAPWOOD_REQUIRE_NVDISASM=1 cargo test -p sapwood-cuda --release --test nvrtc
#
# PyPI has no nvdisasm 13.0 (the oldest 13.x there is 13.2.51); a disassembler reads CUBINs of
# older compilers, so 13.2.51 reads NVRTC 13.0's sm_90 output. SAPWOOD_NVDISASM_DIR overrides
# the install location (default: target/nvdisasm in the repository).
set -euo pipefail
VERSION=13.2.51
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="${SAPWOOD_NVDISASM_DIR:-$root/target/nvdisasm}"
bin="$dest/nvidia/cu13/bin"
stamp="$dest/.installed-$VERSION"
if [ ! -f "$stamp" ] || [ ! -x "$bin/nvdisasm" ]; then
    py="${PYTHON:-python3}"
    mkdir -p "$dest"
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
        --target "$dest" "nvidia-cuda-nvdisasm==$VERSION" >&2
    chmod +x "$bin/nvdisasm" 2>/dev/null || true
    touch "$stamp"
fi
if [ ! -x "$bin/nvdisasm" ]; then
    echo "install-nvdisasm.sh: no executable nvdisasm under $bin after installing" >&2
    exit 1
fi
echo "$bin"
