#!/usr/bin/env bash
# The GPU run, from the repository root on the GPU machine, in one command:
#
#   bash bench/gpu/run.sh OUT [KIT]       (KIT defaults to .gpu-kit, made by bench/gpu/pack.sh)
#
# Puts NVRTC and NCCL from the installed Python packages on LD_LIBRARY_PATH, unpacks the
# carried Vulkan loader where the machine has none, generates the data, then (only where a
# GPU answers) runs the carried test binaries with SAPWOOD_REQUIRE_CUDA=1, reports the
# device histogram encoders' throughput and bytes (packed and grouped vs i64), trains every
# configuration on the CPU and on the GPU, compares the model bytes, times training and reads
# GPU memory. Writes OUT/gpu-report.md and OUT/gpu-run.log and prints the report last.
# Without a GPU it stops after generating the data with "no GPU" and exit status 2.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: run.sh OUT [KIT]}"
kit="${2:-.gpu-kit}"
mkdir -p "$out"
if [ ! -x "$kit/bin/sapwood" ] && [ -f "$kit/payload.tar.xz" ]; then
    tar -C "$kit" -xJf "$kit/payload.tar.xz"
fi
[ -x "$kit/bin/sapwood" ] || { echo "run: no kit in $kit: run bench/gpu/pack.sh first" >&2; exit 1; }

# NVRTC and NCCL ship in the nvidia-* Python packages; cudarc looks for libnccl.so
libs=$(mktemp -d)
for sp in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
    [ -d "$sp/nvidia" ] || continue
    while read -r lib; do
        ln -sf "$lib" "$libs/$(basename "$lib")"
        case "$(basename "$lib")" in
            libnccl.so.*) ln -sf "$lib" "$libs/libnccl.so" ;;
            libnvrtc.so.*) ln -sf "$lib" "$libs/libnvrtc.so" ;;
        esac
    done < <(find "$sp/nvidia" -name 'libnvrtc*.so*' -o -name 'libnccl.so*')
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# wgpu needs a Vulkan loader, and NVIDIA's ICD (it comes with the driver) libglvnd's dispatch
if ! ldconfig -p 2>/dev/null | grep -q libvulkan.so.1 ||
        ! ldconfig -p 2>/dev/null | grep -q libGLdispatch.so.0; then
    for deb in "$kit"/debs/*.deb; do
        [ -f "$deb" ] && dpkg -x "$deb" / 2>/dev/null
    done
    ldconfig 2>/dev/null
fi
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
        export VK_DRIVER_FILES="$icd"
    fi
done

echo "run: Vulkan driver file ${VK_DRIVER_FILES:-none found}; loader $(ldconfig -p 2>/dev/null | grep -c 'libvulkan.so.1\|libGLdispatch.so.0') of 2 libraries" >&2

export PYTHONUNBUFFERED=1
exec python3 bench/gpu/kit.py --kit "$kit" --out "$out"
