#!/usr/bin/env bash
# Fresh machine -> a recommendation: installs dependencies, builds, and asks mgt-plan how to train
# Llama-3.1-8B on 8 GPUs of the default cluster (h100-sxm).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/mgt-plan examples/models/Llama-3.1-8B.json --gpus 8
