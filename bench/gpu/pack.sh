#!/usr/bin/env bash
# Packs everything the GPU run needs into one git-ignored folder (default .gpu-kit), built
# here in release: the CLI with `cuda` and `wgpu`, the sapwood-cuda and sapwood-wgpu test
# binaries (compiled to run, not ignored, on a machine with a GPU), the CUDA benchmark, the
# Vulkan loader as Debian packages (NVIDIA's machines may lack it), all stripped, and NVIDIA's
# compute-sanitizer (run by kit.py over carried CUDA tests where the machine has none of its
# own). The programs and test binaries travel xz-compressed (payload.tar.xz; run.sh unpacks
# it). The data generator and the run script come with the repository. Prints the folder's
# size: with the repository's tracked files it must stay under the 64 MiB a device call
# carries (60, for room).
#
#   bash bench/gpu/pack.sh [DIR]      then, on the GPU machine: bash bench/gpu/run.sh OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
kit="${1:-.gpu-kit}"
limit_mib=60
tree_kib=$(git ls-files -z | xargs -0 du -k --apparent-size 2>/dev/null | awk '{s += $1} END {print s + 0}')

rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/tests" "$kit/debs"

# the tests must be compiled to run: a GPU test that sees no driver at build time is ignored
export SAPWOOD_REQUIRE_CUDA=1 SAPWOOD_REQUIRE_ADAPTER=1 SAPWOOD_REQUIRE_NVRTC=1

echo "pack: building the CLI (cuda, wgpu) and the CUDA benchmark" >&2
cargo build --release --locked -p sapwood-cli
cp target/release/sapwood "$kit/bin/"
cargo build --release --locked -p sapwood-cuda --features nccl --example cuda_bench
cp target/release/examples/cuda_bench "$kit/bin/"

echo "pack: building the GPU crates' test binaries" >&2
cargo test --release --locked -p sapwood-cuda -p sapwood-wgpu --features sapwood-cuda/nccl \
    --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        crate = m["package_id"].split("#")[0].rsplit("/", 1)[-1]
        print(m["executable"], crate + "-" + name)
' | while read -r exe name; do
    case "$name" in
        # the no-device paths (ignored where a device answers) and the WGSL validation unit
        # tests (they need no device) run in CI; here they would only cost room, as would
        # the WGSL encoders' tests (6 MiB of wgpu; run byte for byte on lavapipe in CI). The
        # CUDA encoders' tests (sapwood-cuda-encode) are carried: kit.py reads their
        # throughput line
        *-no_adapter | *-no_driver | sapwood-wgpu-sapwood_wgpu | sapwood-wgpu-encode) continue ;;
    esac
    cp "$exe" "$kit/tests/$name"
done

strip "$kit/bin/"* "$kit/tests/"*

echo "pack: fetching compute-sanitizer (PyPI nvidia-cuda-sanitizer-api, the 13.0 line of NVRTC)" >&2
sanitizer=$(mktemp -d)
if python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$sanitizer" \
        --platform manylinux_2_25_x86_64 "nvidia-cuda-sanitizer-api==13.0.85" >&2; then
    # the binary and its libraries, xz-compressed (8 MiB; the wheel is 14)
    kit_abs="$(cd "$kit" && pwd)"
    (cd "$sanitizer" && python3 -m zipfile -e nvidia_cuda_sanitizer_api-*.whl x &&
        tar cJf "$kit_abs/sanitizer.tar.xz" -C x nvidia/cu13/bin nvidia/cu13/lib)
else
    echo "pack: could not download compute-sanitizer (the report will say so)" >&2
fi
rm -rf "$sanitizer"

echo "pack: fetching the Vulkan loader and the GL dispatch packages" >&2
# NVIDIA's Vulkan driver (libGLX_nvidia) needs libglvnd's dispatch library beside the loader;
# an image without a desktop has neither
if command -v apt-get >/dev/null; then
    for pkg in libvulkan1 libglvnd0 libglx0 libgl1 libegl1 libopengl0; do
        (cd "$kit/debs" && apt-get download "$pkg" >/dev/null 2>&1) ||
            echo "pack: could not download $pkg (the wgpu runs need the GPU machine's own)" >&2
    done
fi

echo "pack: compressing the programs and test binaries" >&2
ls -l "$kit/bin" "$kit/tests" | awk 'NF > 5 {printf "  %8.1f MiB  %s\n", $5 / 1048576, $9}'
n_tests=$(ls "$kit/tests" | wc -l)
n_bins=$(ls "$kit/bin" | wc -l)
tar -C "$kit" -cf - bin tests | xz -T0 -6 >"$kit/payload.tar.xz"
rm -rf "$kit/bin" "$kit/tests"

size_kib=$(du -sk "$kit" | cut -f1)
echo "pack: $kit holds $n_tests test binaries, $n_bins programs, $(ls "$kit/debs" | wc -l) packages: $((size_kib / 1024)) MiB, with the tracked files $(((size_kib + tree_kib) / 1024)) MiB"
if [ $((size_kib + tree_kib)) -gt $((limit_mib * 1024)) ]; then
    echo "pack: $kit and the tracked files are over $limit_mib MiB" >&2
    exit 1
fi
