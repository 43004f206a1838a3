#!/usr/bin/env bash
# Runs every test of the project on a fresh machine, installing what the tests need first:
# Mesa lavapipe (software Vulkan: the WGSL backend runs for real), OpenMPI (mpirun tests),
# libclang (MPI bindings), iproute2 (TCP ranks on network namespaces as hosts), g++ (the CUDA
# simulator compiles every CUDA kernel for the CPU and runs it), NVRTC 13.0 from PyPI (every
# CUDA kernel is compiled for every GPU architecture), and a
# Python virtualenv with maturin, pytest, scikit-learn, XGBoost, LightGBM and PySpark (run on
# Java 17, openjdk-17-jre-headless), then builds the user guide (Sphinx from PyPI, rustdoc).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
  echo "cargo is required (Rust toolchain 1.89 or newer)" >&2
  exit 1
fi

need=()
for pkg in mesa-vulkan-drivers libvulkan1 libopenmpi-dev openmpi-bin libclang-dev iproute2 g++ \
    openjdk-17-jre-headless; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -o DPkg::Lock::Timeout=600
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -o DPkg::Lock::Timeout=600 "${need[@]}"
fi

# the WGSL tests must find lavapipe: a missing adapter fails them instead of skipping
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
export SAPWOOD_REQUIRE_ADAPTER=1
# every CUDA kernel compiles with NVRTC from PyPI (no driver, no toolkit)
nvrtc_lib="$(bash crates/sapwood-cuda/install-nvrtc.sh | tail -n1)"
export LD_LIBRARY_PATH="$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SAPWOOD_REQUIRE_NVRTC=1

# the SASS of every kernel is inspected with nvdisasm from PyPI (no toolkit, no driver)
export SAPWOOD_NVDISASM="$(bash crates/sapwood-cuda/install-nvdisasm.sh | tail -n1)/nvdisasm"
export SAPWOOD_REQUIRE_NVDISASM=1

# the Spark tests (pyspark from PyPI, Java 17 from the packages above) must run, not skip
export SAPWOOD_REQUIRE_SPARK=1

# as root, TCP ranks train on three "hosts" (network namespaces on a virtual switch, from
# iproute2); elsewhere that test is compiled as ignored
if [ "$(id -u)" -eq 0 ]; then
  export SAPWOOD_REQUIRE_NETNS=1
fi

# where the CPU has AVX-512 VBMI, the byte-lane prediction tests must run their lanes
# rather than skip them
# (not where SAPWOOD_PORTABLE turns the vector paths off, to test the portable ones)
if grep -qw avx512vbmi /proc/cpuinfo 2>/dev/null \
    && { [ -z "${SAPWOOD_PORTABLE:-}" ] || [ "${SAPWOOD_PORTABLE}" = "0" ]; }; then
  export SAPWOOD_REQUIRE_AVX512=1
fi

# the fuzz targets (crates/sapwood-fuzz) mutate valid inputs for this long each
export SAPWOOD_FUZZ_SECONDS="${SAPWOOD_FUZZ_SECONDS:-20}"
# each run draws a new seed, printed with each target's report; SAPWOOD_FUZZ_SEED replays one

# no file of a crate or of the Python package may import another that imports it back
python3 scripts/import_circles.py

# release mode: the quality tests train 200 rounds on every bundled dataset; one feature
# selection for the whole workspace, so nothing is built twice. `sapwood-cuda/sim` runs every
# CUDA kernel and the CUDA backend's host code on the simulator (tests/sim.rs, two
# schedules); `sapwood-cuda/nccl` compiles the NCCL collective and its GPU tests (ignored
# without a driver) so that they cannot rot
cargo test --workspace --release --locked \
    --features sapwood-cli/mpi,sapwood-cuda/sim,sapwood-cuda/nccl

# the Python package: built with maturin into a virtualenv, pytest and the type checks; its
# CLI tests use the binary built above
export SAPWOOD_CLI="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/sapwood"
bash python/run_tests.sh

# the user guide: Sphinx with warnings as errors, the gallery's examples executed, every
# shell and Python block of the guide run, the generated reference checked for every
# parameter and flag, and the Rust API documented by rustdoc with warnings as errors
bash docs/build.sh
