#!/usr/bin/env bash
# Installs what mgt needs to build and test on Debian 12 (bookworm). Idempotent; run as root or with sudo.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
packages=(
  g++ cmake ninja-build lld ccache
  nlohmann-json3-dev libboost-graph-dev libcli11-dev
  libgtest-dev libbenchmark-dev
  libeigen3-dev libopenmpi-dev openmpi-bin
  libopenblas-dev  # the CPU kernels' GEMMs (runtime/CMakeLists.txt); also the BLAS PyTorch maps (bench/)
  python3-torch python3-numpy
  libmlir-19-dev mlir-19-tools llvm-19-dev  # MLIR interop (ir/mlir); mlir-19-tools holds mlir-tblgen, which find_package(MLIR) checks
  clang-14 libclang-rt-14-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
