#!/usr/bin/env python3
"""Per-row and grouped errors of `mgt-plan validate --json` on the held-out file.

Usage: python3 bench/heldout/summarize.py VALIDATION.json HELDOUT_DATA.json [--rows]

Groups: GPU (the row's system), precision class (BF16 / FP8 per-tensor / FP8 blockwise / MXFP8 /
NVFP4, from the published precision string), model type (dense / moe), container, GPU x precision,
and type x micro-batch x NVLink domain (the stated micro-batch size and the system's
`nvlink_domain_gpus`; docs/validation.md §10 reads the MoE rows through it). For each: rows
compared, median and p90 of |error| (percent; p90 by linear interpolation between closest ranks,
numpy's default, as `validate` does), the median signed error and how many rows are predicted too
slow (error < 0 on a throughput metric) or too fast.
"""
import json
import sys
from collections import defaultdict


def percentile(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def precision_class(p):
    p = p.lower()
    if "fp4" in p:
        return "NVFP4"
    if "mxfp8" in p or "fp8-mx" in p:
        return "MXFP8"
    if "blockwise" in p:
        return "FP8-block"
    if "fp8" in p:
        return "FP8"
    return "BF16"


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: summarize.py VALIDATION.json HELDOUT_DATA.json [--rows]")
    res = json.load(open(sys.argv[1]))
    data = json.load(open(sys.argv[2]))
    rows_by_id = {r["id"]: r for r in data["rows"]}
    gpu_of = {k: v["gpu"] for k, v in data["hardware"].items()}
    domain_of = {k: v.get("nvlink_domain_gpus", "?") for k, v in data["hardware"].items()}
    show_rows = "--rows" in sys.argv[3:]
    groups = defaultdict(list)
    skipped = defaultdict(list)
    table = []
    for r in res["rows"]:
        if r.get("kind") not in (None, "throughput"):
            continue
        src = rows_by_id[r["id"]]
        gpu = gpu_of[src["system"]]
        prec = precision_class(src["precision"])
        if r.get("skipped"):
            skipped[r["skipped"]].append(r["id"])
            continue
        # Throughput metrics: error < 0 means the prediction is slower than measured. For a time
        # metric (none in this file) the sign would flip.
        err = r["error"]
        if r["metric"] == "iteration_time_s":
            err = -err
        table.append((r["id"], gpu, prec, r["metric"], r["measured"], r["predicted"], err))
        mbs = src.get("training", {}).get("micro_batch_size") or "?"
        shape = f"{src['model']['type']}, mbs {mbs}, {domain_of[src['system']]}-GPU NVLink domain"
        for key in (("all",), ("gpu", gpu), ("precision", prec), ("type", src["model"]["type"]),
                    ("type x mbs x domain", shape),
                    ("container", src.get("container", "not stated")), ("gpu x precision", f"{gpu} {prec}"),
                    ("model", src["model"].get("catalog_key", src["model"]["name"]))):
            groups[key].append(err)
    if show_rows:
        print(f"{'row':64s} {'gpu':6s} {'prec':9s} {'measured':>9s} {'predicted':>9s} {'error':>7s}")
        for rid, gpu, prec, metric, meas, pred, err in sorted(table, key=lambda t: t[6]):
            unit = "" if metric == "tokens_per_sec_per_gpu" else f" [{metric}]"
            print(f"{rid:64s} {gpu:6s} {prec:9s} {meas:9.0f} {pred:9.0f} {100 * err:+6.1f}%{unit}")
        print()
    print(f"{'group':44s} {'n':>4s} {'med|e|%':>8s} {'p90|e|%':>8s} {'med e%':>7s} {'slow':>5s} {'fast':>5s}")
    order = ["all", "gpu", "precision", "type", "gpu x precision", "type x mbs x domain", "model", "container"]
    for kind in order:
        for key in sorted(k for k in groups if k[0] == kind):
            e = groups[key]
            a = [abs(x) for x in e]
            name = "all" if kind == "all" else f"{kind}: {key[1]}"
            print(f"{name:44s} {len(e):4d} {100 * percentile(a, 0.5):8.1f} {100 * percentile(a, 0.9):8.1f} "
                  f"{100 * percentile(e, 0.5):+7.1f} {sum(x < 0 for x in e):5d} {sum(x > 0 for x in e):5d}")
    if skipped:
        print(f"\nskipped rows: {sum(len(v) for v in skipped.values())}")
        for why, ids in sorted(skipped.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(ids):3d}  {why}")


if __name__ == "__main__":
    main()
