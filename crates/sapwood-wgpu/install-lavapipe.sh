#!/usr/bin/env bash
# Installs Mesa lavapipe (a software Vulkan driver) so the wgpu backend's tests have an
# adapter on machines without a GPU. Idempotent: exits 0 at once when it is already there.
# Tests run quieter with XDG_RUNTIME_DIR set (lavapipe warns when it is not).
set -euo pipefail

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

if installed mesa-vulkan-drivers && installed libvulkan1; then
  echo "lavapipe: mesa-vulkan-drivers and libvulkan1 already installed"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  echo "lavapipe: apt-get not found; install Mesa's Vulkan drivers (lavapipe) and the Vulkan loader by hand" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -o DPkg::Lock::Timeout=600
$SUDO apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 \
  mesa-vulkan-drivers libvulkan1
echo "lavapipe: installed"
