#!/usr/bin/env python3
"""Transcribe NeMo's published long-sequence (context parallel) pre-training table into the
validation-file schema (../shared/validation/README.md) as bench/heldout/nemo_long_sequence.json.

The held-out file is NEVER fitted on (bench/heldout/README.md). Every cell is copied verbatim from the
page source; only the fields listed in a row's `derived_fields` are computed.

Input (page source, not committed): NVIDIA/NeMo docs/source/performance/performance_long_sequence.md at
commit a2c4cc8ee6 (2025-05-09), e.g.
  git --git-dir=<NeMo mirror> show a2c4cc8ee6:docs/source/performance/performance_long_sequence.md > LS.md

Usage: python3 bench/heldout/transcribe_long_sequence.py --page LS.md \
         --catalog-models M.json --catalog-hardware H.json --out bench/heldout/nemo_long_sequence.json
"""
import argparse
import copy
import json
import re
import sys

from transcribe import write_json

COMMIT = "a2c4cc8ee6"
URL = ("https://github.com/NVIDIA/NeMo/blob/a2c4cc8ee6/docs/source/performance/performance_long_sequence.md")
INTRO = ("The table below shows the pre-training performance of the LLAMA2-7B and LLAMA3-8B models on H100 and B200 "
         "GPUs, respectively, with CP (context parallelism), and compares it against the results without CP at various "
         "input sequence lengths. ... In non-CP training runs, we use the most performant model- and data-parallel "
         "configurations without CP given the memory capacity constraint of the each GPU system.")
# Section heading -> (catalog model key, system, precision). Only what the heading and its bullets say.
SECTIONS = {"LLAMA2-7B (FP8) - H100": ("llama2_7b", "dgx_h100", "FP8"),
            "LLAMA3-8B (FP8) - B200": ("llama3_8b", "dgx_b200", "FP8")}


def cells_of(row_html):
    return [re.sub(r"<.*?>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row_html, re.S)]


def number(cell):
    """'1,671' -> 1671.0; '26.5' -> 26.5; '-' or '-1)' (a footnote mark without a value) -> None."""
    c = cell.replace(",", "").strip()
    return float(c) if re.fullmatch(r"\d+(\.\d+)?", c) else None


def sections(text):
    for part in re.split(r"\n## ", text)[1:]:
        title = part.split("\n", 1)[0].strip()
        container = re.search(r"Container:\s*\[([^\]]+)\]", part)
        system = re.search(r"System:\s*(\S+)", part)
        yield title, container.group(1) if container else None, system.group(1) if system else None, \
            [cells_of(r) for r in re.findall(r"<tr>(.*?)</tr>", part, re.S) if cells_of(r)]


def rows_of(title, container, system_cell, table, catalog, skipped):
    key, system, precision = SECTIONS[title]
    out = []
    for c in table:
        seq_k, gpus, gbs, tflops_no_cp, tp, pp, dp, cp, tflops_cp = c[:9]
        seq, n = int(seq_k) * 1024, int(gpus)
        tp, pp, dp, cp = int(tp), int(pp), int(dp), int(cp)
        if tp * pp * dp * cp != n:
            skipped.append(f"{title}, {seq_k}K: TP {tp} x PP {pp} x DP {dp} x CP {cp} = {tp * pp * dp * cp} is not the "
                           f"published {n} GPUs")
            continue
        model = copy.deepcopy(catalog[key])
        model["seq_length"] = seq
        model["catalog_key"] = key
        base = {"container": container, "task": "pretrain", "model": model, "model_label_in_source": title.split(" (")[0],
                "training": {"global_batch_size_seqs": int(gbs), "global_batch_size_tokens": int(gbs) * seq,
                             "micro_batch_size": None, "seq_length": seq},
                "recompute": "not stated", "precision": precision, "system": system,
                "framework": {"name": "nemo", "version": container, "features": []},
                "source_table": f"{URL} | {title} | SeqLen {seq_k}K"}
        note = (f"NeMo long-sequence performance page, table '{title}' (Container {container}, System {system_cell}), "
                f"row SeqLen {seq_k}K: '{INTRO}' Recompute, sequence parallel, distributed optimizer and overlap are not "
                f"stated. TFLOPS / GPU as published (NeMo's model FLOPs; FP8 rows).")
        with_cp = copy.deepcopy(base)
        with_cp.update({"id": f"nemo_longseq_{key}_{system.replace('dgx_', '')}_{seq_k}k_cp{cp}",
                        "parallel": {"num_gpus": n, "dp": dp, "tp": tp, "pp": pp, "cp": cp, "vpp": None, "ep": None,
                                     "sequence_parallel": None, "zero_stage": None, "fsdp": None},
                        "measured": {"model_tflops_per_gpu": number(tflops_cp)},
                        "derived_fields": ["training.global_batch_size_tokens", "model.seq_length (SeqLen x 1024)"],
                        "note": note + " The 'With CP' configuration and its TFLOPS / GPU."})
        out.append(with_cp)
        value = number(tflops_no_cp)
        if value is None:
            skipped.append(f"{title}, {seq_k}K without CP: no TFLOPS published ('{tflops_no_cp}')")
            continue
        no_cp = copy.deepcopy(base)
        no_cp.update({"id": f"nemo_longseq_{key}_{system.replace('dgx_', '')}_{seq_k}k_nocp",
                      "parallel": {"num_gpus": n, "dp": None, "tp": None, "pp": None, "cp": 1, "vpp": None, "ep": None,
                                   "sequence_parallel": None, "zero_stage": None, "fsdp": None},
                      "measured": {"model_tflops_per_gpu": value},
                      "derived_fields": ["training.global_batch_size_tokens", "model.seq_length (SeqLen x 1024)"],
                      "note": note + " The 'Without CP' TFLOPS / GPU: the page gives only that it is the most performant "
                                     "configuration without CP that fits, not its TP / PP / DP."})
        out.append(no_cp)
    return out


def main():
    ap = argparse.ArgumentParser()
    for a in ("--page", "--catalog-models", "--catalog-hardware", "--out"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    catalog = json.load(open(args.catalog_models))["models"]
    hw = json.load(open(args.catalog_hardware))["systems"]
    rows, skipped = [], []
    for title, container, system_cell, table in sections(open(args.page).read()):
        if title not in SECTIONS:
            raise SystemExit(f"unknown section {title!r} in {args.page}")
        rows += rows_of(title, container, system_cell, table, catalog, skipped)
    assert len({r["id"] for r in rows}) == len(rows), "duplicate ids"
    doc = {
        "source": "NVIDIA NeMo long-sequence performance page (context parallel pre-training, Llama 2 7B on DGX-H100, "
                  "NeMo 24.03.01). HELD-OUT: never used for fitting.",
        "source_url": URL,
        "source_snapshot": f"NVIDIA/NeMo docs/source/performance/performance_long_sequence.md at commit {COMMIT} (2025-05-09)",
        "source_notes": ("Held-out validation file (bench/heldout/README.md): transcribed by "
                         "bench/heldout/transcribe_long_sequence.py from the page source, every cell verbatim; never add "
                         "it to ../shared/validation, a fit or --cv. SeqLen (K) is read as K x 1024 tokens. TFLOPS / GPU "
                         "is NeMo's model FLOPs per GPU (its flops formula counts the full s x s attention), FP8 rows. "
                         "Each SeqLen has two rows: the published 'With CP' layout, and 'Without CP' with only cp = 1 "
                         "stated (tp, pp, dp tuned). Left out: " + ("; ".join(skipped) if skipped else "nothing") + "."),
        "framework": {"name": "nemo", "version": "row `container`", "features": []},
        "hardware": {k: hw[k] for k in sorted({r["system"] for r in rows})},
        "rows": rows,
    }
    write_json(args.out, doc)
    print(f"{len(rows)} rows -> {args.out}; left out: {len(skipped)}", file=sys.stderr)


if __name__ == "__main__":
    main()
