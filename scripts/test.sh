#!/usr/bin/env bash
# Fresh machine -> every test: installs dependencies, builds with warnings as errors, runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DMGT_WERROR=ON
ctest --test-dir build --output-on-failure -j "${MGT_TEST_JOBS:-2}"
