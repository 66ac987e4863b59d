#!/usr/bin/env bash
# Configures and builds mgt in ./build (Release, Ninja). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
linker=()
if command -v ld.lld >/dev/null 2>&1; then linker=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "${linker[@]}" "$@"
cmake --build build -j "${MGT_BUILD_JOBS:-2}"
