#!/usr/bin/env bash
# Held-out check (bench/heldout/README.md): mgt's throughput predictions against NVIDIA's published
# Megatron-Bridge / NeMo pre-training tables and torchtitan's published runs, files never fitted on.
#   bash bench/heldout_check.sh [--rows] [path/to/mgt-plan]
# Prints validate's own summary, then per-GPU / per-precision / per-model medians and signs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rows=""
if [[ "${1:-}" == "--rows" ]]; then rows="--rows"; shift; fi
mgt="${1:-$here/../build/mgt-plan}"
[[ -x "$mgt" ]] || { echo "heldout_check: $mgt is not built (bash scripts/build.sh, or pass the mgt-plan path)" >&2; exit 2; }
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# Each held-out file on its own: NVIDIA's Megatron-Bridge / NeMo tables, torchtitan's pages, then
# single-node tensor-parallel runs (A100, two H100 comparison rows), fine-tuning, long-sequence CP runs.
for data in "$here/heldout/megatron_bridge_perf.json" "$here/heldout/torchtitan_perf.json" \
            "$here/heldout/single_node_tp_runs.json" "$here/heldout/megatron_bridge_finetune.json" \
            "$here/heldout/nemo_long_sequence.json"; do
  echo "=== $(basename "$data")"
  "$mgt" validate "$data"
  "$mgt" validate --json "$data" > "$out"
  python3 "$here/heldout/summarize.py" "$out" "$data" $rows
  echo
done
