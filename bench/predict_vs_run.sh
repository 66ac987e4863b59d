#!/usr/bin/env bash
# Measured vs predicted step time of the CPU backend for six plans of one model: probes this machine
# (mgt-plan probe --backend cpu under mpirun -np 2), then runs each plan with `mgt-plan run --cluster`
# and prints the simulator's prediction beside the measured mean step (steps after the first).
#
# Usage: bench/predict_vs_run.sh [MGT_PLAN_BINARY] [--steps N] [--repeat R] [--cluster FILE] [--out DIR]
#   MGT_PLAN_BINARY  default build/mgt-plan
#   --steps N        optimizer steps per run (default 5; the first is warm-up, not measured)
#   --repeat R       runs per plan (default 3); the table gives each run's ratio and their median
#   --cluster FILE   use this probed cluster instead of probing now
#   --out DIR        keep the cluster file, the model config and every run's log here (default: a temp dir)
#   --plans LIST     ';'-separated plans instead of the six below
#
# Model: Llama, 4 layers, hidden 512, 8 heads / 4 KV heads of 64, ffn 1536, vocab 8192, seq 256,
# global batch 4 (as bench/cpu_step_vs_pytorch.py), synthetic init and tokens (--seed 0), fp32.
# Plans: {} on 1 rank; {"tp":2}, {"dp_shard":2}, {"dp_replicate":2}, {"cp":2} and
# {"pp":2,"micro_batch":2} on 2 ranks. Every row prints the 1-minute load average beside it: on a
# machine shared with other work a step measures that work too.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=build/mgt-plan
steps=5
repeat=3
cluster=""
out=""
plans='{};{"tp":2};{"dp_shard":2};{"dp_replicate":2};{"cp":2};{"pp":2,"micro_batch":2}'
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --cluster) cluster=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --plans) plans=$2; shift 2 ;;
    -h|--help) sed -n 2,18p "$0"; exit 0 ;;
    *) binary=$1; shift ;;
  esac
done
binary=$(realpath "$binary")
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader)
load() { cut -d' ' -f1 /proc/loadavg; }

cat > "$out/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512, "intermediate_size": 1536,
 "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "num_hidden_layers": 4, "vocab_size": 8192,
 "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false,
 "hidden_act": "silu", "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
JSON

if [ -z "$cluster" ]; then
  cluster="$out/cpu-cluster.json"
  echo "# probe: mpirun -np 2 mgt-plan probe --backend cpu (load $(load))"
  "${mpirun[@]}" -np 2 "$binary" probe --backend cpu --out "$cluster" > "$out/probe.log"
fi

printf '%-26s %5s %13s %13s %9s %7s\n' plan ranks predicted_ms measured_ms meas/pred load
IFS=';' read -r -a plan_list <<< "$plans"
for plan in "${plan_list[@]}"; do
  ranks=1
  for axis in tp dp_shard dp_replicate cp pp; do
    degree=$(python3 -c "import json,sys; print(json.loads(sys.argv[1]).get('$axis', 1))" "$plan")
    ranks=$((ranks * degree))
  done
  ratios=()
  for r in $(seq 1 "$repeat"); do
    log="$out/run-$(echo "$plan" | tr -c 'a-z0-9' '_')-$r.jsonl"
    launcher=()
    if [ "$ranks" -gt 1 ]; then launcher=("${mpirun[@]}" -np "$ranks"); fi
    "${launcher[@]}" "$binary" run "$out/config.json" --plan "$plan" --seq-len 256 --global-batch 4 \
      --steps "$steps" --cluster "$cluster" --log "$log" > "$out/run.out" 2>&1 ||
      { echo "run failed: $plan"; cat "$out/run.out"; exit 1; }
    row=$(python3 - "$log" <<'PY'
import json, sys
summary = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]["summary"]["step_time_s"]
print(f'{summary["predicted"] * 1e3:.1f} {summary["measured"] * 1e3:.1f} {summary["measured_over_predicted"]:.3f}')
PY
)
    read -r predicted measured ratio <<< "$row"
    ratios+=("$ratio")
    printf '%-26s %5s %13s %13s %9s %7s\n' "$plan" "$ranks" "$predicted" "$measured" "$ratio" "$(load)"
  done
  median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
  printf '%-26s %5s %13s %13s %9s %7s\n' "$plan" "$ranks" "" "median" "$median" ""
done
