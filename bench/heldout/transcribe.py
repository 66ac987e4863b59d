#!/usr/bin/env python3
"""Transcribe NVIDIA's published Megatron-Bridge / NeMo pre-training performance tables into the
validation-file schema (../shared/validation/README.md) as bench/heldout/megatron_bridge_perf.json
(--out), and the same pages' fine-tuning (SFT / LoRA) tables as
bench/heldout/megatron_bridge_finetune.json (--finetune-out).

The held-out file is NEVER fitted on (bench/heldout/README.md). This script only copies numbers:
every cell is taken verbatim from the page source (markdown) of the published pages; nothing is
computed except the fields listed in each row's `derived_fields`.

Inputs (page sources, not committed here; see README.md for how to get them):
  --mbridge-summary   Megatron-Bridge docs/performance-summary.md
  --mbridge-archive   Megatron-Bridge docs/performance-summary-archive.md
  --nemo-2407         NVIDIA/NeMo docs/source/performance/performance_summary.md (24.07 tables)
  --catalog-models / --catalog-hardware   ../shared/validation/catalog_*.json

Usage: python3 bench/heldout/transcribe.py --mbridge-summary A.md --mbridge-archive B.md \
         --nemo-2407 C.md --catalog-models M.json --catalog-hardware H.json --out FILE.json \
         [--finetune-out FT.json]        (either output alone is fine)
"""
import argparse
import copy
import json
import re
import sys

MBRIDGE_URL = "https://docs.nvidia.com/nemo/megatron-bridge/latest/performance-summary.html"
MBRIDGE_ARCHIVE_URL = "https://docs.nvidia.com/nemo/megatron-bridge/latest/performance-summary-archive.html"
MBRIDGE_COMMIT = "4ab94dfad36641cabdeb96452b21bf676aac4772"  # NVIDIA-NeMo/Megatron-Bridge, 2026-08-11
NEMO_URL = "https://github.com/NVIDIA/NeMo/blob/9c5c5e9709407d3511005fc966e45374998bb478/docs/source/performance/performance_summary.md"

# Table label (lower case, qualifiers in parentheses removed) -> catalog_models.json key.
# Models mgt cannot load (hybrid Mamba, unknown architectures) are not transcribed: SKIPPED_MODELS.
MODEL_KEYS = {
    "llama3_8b": "llama3_8b", "llama3-8b": "llama3_8b",
    "llama3_70b": "llama3_70b", "llama3-70b": "llama3_70b",
    "llama3.1_405b": "llama31_405b", "llama3-405b": "llama31_405b",
    "deepseekv3": "deepseek_v3",
    "gpt oss 120b": "gpt_oss_120b",
    "qwen3_30b_a3b": "qwen3_30b_a3b",
    "qwen3_235b_a22b": "qwen3_235b_a22b",
    "kimi_k2": "kimi_k2",
    "gpt3-5b": "nemo_gpt3_5b", "gpt3-20b": "nemo_gpt3_20b", "gpt3-175b": "nemo_gpt3_175b",
    "llama2-7b": "llama2_7b", "llama2-13b": "llama2_13b", "llama2-70b": "llama2_70b",
    "nemotron-8b": "nemotron3_8b", "nemotron-22b": "nemotron3_22b", "nemotron-340b": "nemotron4_340b",
}
SKIPPED_MODELS = {
    "nemotron_3_nano": "hybrid Mamba-Transformer MoE (mgt has no Mamba layers)",
    "nemotron_3_super": "hybrid Mamba-Transformer LatentMoE (mgt has no Mamba layers)",
    "nemotron_3_ultra": "hybrid Mamba-Transformer LatentMoE (mgt has no Mamba layers)",
    "nemotron_3_5_lightning": "hybrid Mamba-Transformer MoE (mgt has no Mamba layers)",
    "deepseekv4 flash": "DeepSeek-V4 architecture not in examples/models or the catalog",
}
SYSTEMS = {"DGX-H100": "dgx_h100", "DGX-B200": "dgx_b200", "DGX-B300": "dgx_b300",
           "DGX-GB200": "dgx_gb200", "DGX-GB300": "dgx_gb300"}

FOOTNOTE = re.compile(r"\[\^([^\]]+)\]")


def split_alt(cell):
    """'31737 (30341)' -> ('31737', '30341'); '8' -> ('8', None)."""
    m = re.fullmatch(r"\s*(.*?)\s*\(([^)]*)\)\s*", cell)
    if not m:
        return cell.strip(), None
    return m.group(1), m.group(2).strip()


def num(s):
    """Published integer cell -> int; 'n/a' or '' -> None (the field is not stated)."""
    s = s.strip()
    if s.lower() in ("n/a", "", "-"):
        return None
    return int(s)


def parse_tables(text):
    """Yield (context, header, rows, footnote_refs) for every markdown table, with the section
    context (container, task, model/system heading) it sits under."""
    ctx = {"container": None, "task": None, "heading": None}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i].strip()
        m = re.match(r"^##\s+(\S+)\s+NeMo Container", ln)
        if m:
            ctx = {"container": m.group(1), "task": None, "heading": None}
        elif ln.startswith("### "):
            ctx["task"] = ln[4:].strip()
        elif ln.startswith("#### "):
            ctx["heading"] = ln[5:].strip()
        if ln.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-| ]+\|$", lines[i + 1].strip()):
            header = [c.strip() for c in ln.strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            yield dict(ctx), header, rows
            continue
        i += 1


def footnotes(text):
    out = {}
    for m in re.finditer(r"^\[\^([^\]]+)\]:\s*(.+)$", text, re.M):
        out[m.group(1)] = re.sub(r"\s+", " ", m.group(2).strip())
    return out


def label_key(label):
    """'DeepSeekV3 (w/o MTP)' -> ('deepseekv3', 'w/o MTP')."""
    m = re.fullmatch(r"\s*(.*?)\s*(?:\(([^)]*)\))?\s*", label)
    return m.group(1).lower(), m.group(2)


QUALIFIER_NOTES = {
    "w/o mtp": "Source label '(w/o MTP)': the multi-token-prediction layer is disabled.",
    "w/ mtp": "Source label '(w/ MTP)': one multi-token-prediction layer (mgt does not model MTP: it adds about 1/61 of the layers plus a second LM head).",
    "tokendrop": "Source label '(tokendrop)': token-dropping MoE routing (capacity factor not stated on the page); mgt models dropless, balanced routing.",
    "dropless": "Source label '(dropless)': token-dropless MoE routing.",
}


def measured_cells(tok, tfl):
    meas = {}
    if tok is not None:
        meas["tokens_per_sec_per_gpu"] = int(tok)
    if tfl is not None:
        meas["model_tflops_per_gpu"] = int(tfl)
    return meas


def build_row(catalog, page, ctx, cells, alt, notes):
    """One published configuration -> one validation row. `cells` maps column -> the (main or
    parenthesised alternative) string; `alt` says which of the two this row is."""
    label = cells["Model"]
    key, qual = label_key(label)
    if key in SKIPPED_MODELS:
        return None, f"{label}: {SKIPPED_MODELS[key]}"
    if key not in MODEL_KEYS:
        raise SystemExit(f"unknown model label {label!r} in {page['name']} {ctx}")
    ckey = MODEL_KEYS[key]
    system = SYSTEMS[cells["System"]]
    seq = num(cells["Sequence Length"])
    model = copy.deepcopy(catalog[ckey])
    model["seq_length"] = seq
    model["catalog_key"] = ckey
    # A table without a CP column (the NeMo 24.07 Finetuning table): cp null (not stated), dp over TP x PP.
    gpus, tp, pp = num(cells["#-GPUs"]), num(cells["TP"]), num(cells["PP"])
    cp = num(cells["CP"]) if "CP" in cells else None
    gbs = num(cells["GBS"])
    par = {"num_gpus": gpus, "dp": gpus // (tp * pp * (cp or 1)), "tp": tp, "pp": pp, "cp": cp,
           "vpp": num(cells["VP"]) if "VP" in cells else None,
           "ep": num(cells["EP"]) if "EP" in cells else None,
           "sequence_parallel": None, "zero_stage": None}
    derived = ["training.global_batch_size_tokens", "parallel.dp", "model.seq_length"]
    if "FSDP" in cells:
        raw = num(cells["FSDP"])
        par["fsdp_raw"] = raw
        par["fsdp"] = raw is not None and raw > 0
        derived.append("parallel.fsdp")
    else:
        par["fsdp"] = None
    training = {"global_batch_size_seqs": gbs, "global_batch_size_tokens": gbs * seq,
                "micro_batch_size": num(cells["MBS"]), "seq_length": seq}
    if "GA" in cells:
        training["grad_accum_steps"] = num(cells["GA"])
    ga = training.get("grad_accum_steps")
    if alt and ga and "MBS" not in cells.get("_paren", ()) and gbs % (par["dp"] * ga) == 0 \
            and gbs // (par["dp"] * ga) != training["micro_batch_size"]:
        # The alternative's GA is published in parentheses but its MBS cell is shared with the main
        # entry; GBS / (dp x GA) is the micro-batch the alternative ran with.
        training["micro_batch_size"] = gbs // (par["dp"] * ga)
        derived.append("training.micro_batch_size")
        notes = notes + [f"The MBS cell has no parenthesised value; GBS {gbs} / (dp {par['dp']} x GA {ga}) = "
                         f"{training['micro_batch_size']} is used for this alternative."]
    stage_ranks = par["dp"] * (cp or 1) * tp
    if alt and par["ep"] and stage_ranks % par["ep"] != 0:
        notes = notes + [f"As published this alternative cannot run: the shared EP cell {par['ep']} does not divide the "
                         f"{stage_ranks} ranks of a pipeline stage implied by its parenthesised PP; the page gives no EP for it."]
    meas = measured_cells(cells.get("tok"), cells.get("tfl"))
    row_notes = [page["row_note"](ctx, cells, alt)]
    if qual and qual.lower() in QUALIFIER_NOTES:
        row_notes.append(QUALIFIER_NOTES[qual.lower()])
    row_notes += notes
    prec = cells["Precision"]
    pid = re.sub(r"[^a-z0-9]+", "", prec.split("(")[0].lower()) or "fp8"
    rid = (f"{page['prefix']}_{ctx['container']}_{ckey}_{system.replace('dgx_', '')}_{pid}_{gpus}g"
           + (f"_{qual.lower().replace('/', '').replace(' ', '')}" if qual else "") + ("_alt" if alt else ""))
    row = {"id": rid, "container": ctx["container"], "task": "pretrain", "model": model,
           "model_label_in_source": label, "training": training, "parallel": par,
           "recompute": "not stated", "precision": prec, "system": system, "measured": meas,
           "derived_fields": derived, "source_table": page["table"](ctx), "note": " ".join(n for n in row_notes if n)}
    return row, None


def pick(header, raw):
    """Row cells by column, main and parenthesised alternative; None alt when the row has none."""
    main, alt, paren_cols, marks = {}, {}, set(), []
    for h, c in zip(header, raw):
        marks += FOOTNOTE.findall(c)
        c = FOOTNOTE.sub("", c).strip()
        c = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", c)  # [888](https://mlcommons...) -> 888
        if h == "Model":
            main[h] = alt[h] = c
            continue
        a, b = split_alt(c)
        main[h] = a
        alt[h] = b if b is not None else a
        if b is not None:
            paren_cols.add(h)
    return main, (alt if paren_cols else None), paren_cols, marks


def rename(cells, had_paren=None):
    """Column names -> short keys for the two measured columns."""
    out = dict(cells)
    out["tok"] = out.pop("Tokens / sec / GPU", None)
    out["tfl"] = out.pop("Model TFLOP / sec / GPU", None)
    if had_paren is not None:  # an alternative row: a measured cell without parentheses is not its value
        for k, col in (("tok", "Tokens / sec / GPU"), ("tfl", "Model TFLOP / sec / GPU")):
            if col not in had_paren:
                out[k] = None
    return out


ALT_NOTE_2509_2511 = ("Parenthesised alternative of the published cell pair. The page: 'The numbers in (normal) "
                      "parentheses indicate the use of different quantization granularities: In case of GB200 and B200 "
                      "systems, 32x32 for both weights and activations. For H100 system, 128x128 for weights and 1x128 "
                      "for activations, which match those used in the original DeepSeekV3 pre-training.'")
KIMI_NOTE = "Page note: 'Muon optimizer was used for pre-training Kimi-K2' (mgt prices Adam)."
MOE_NOTE = ("Page footnote: 'In MoE training benchmarks, we force-balance the token distribution among experts and "
            "all benchmarks are token-dropless' (25.09: 'In token-dropless MoE training benchmarks, we force-balance').")


def precision_2509(system, alt):
    if not alt:
        return "FP8 (not stated in the 25.09 table; see note)"
    return "MXFP8 (32x32 granularity)" if system in ("DGX-GB200", "DGX-B200") else "FP8 blockwise (128x128 weights, 1x128 activations)"


def moe_note(catalog, cells):
    """The page's MoE footnote for a row whose model is a mixture of experts."""
    return [MOE_NOTE] if catalog.get(MODEL_KEYS.get(label_key(cells["Model"])[0], ""), {}).get("type") == "moe" else []


def table_entries(header, table, kind, name, notes_by_mark, precision):
    """Each measured entry of a Megatron-Bridge table, main and parenthesised alternative: (cells, is_alt,
    footnote notes). `kind: name` is the table heading's column (e.g. Model: LLAMA3_70B); `precision(cells,
    is_alt)` gives the precision where the table has no column for it."""
    for raw in table:
        main, alt, paren_cols, marks = pick(header, raw)
        for cells, is_alt in ((main, False), (alt, True)):
            if cells is None:
                continue
            cells = dict(cells)
            cells[kind] = name
            if "Precision" not in cells:
                cells["Precision"] = precision(cells, is_alt)
            c = rename(cells, paren_cols if is_alt else None)
            c["_paren"] = paren_cols if is_alt else set()
            if c["tok"] is None and c["tfl"] is None:
                continue
            yield c, is_alt, [f"Page footnote: '{notes_by_mark[m]}'" for m in marks
                              if m in notes_by_mark and m != "moe-training-note"]


def mbridge_rows(text, url, catalog, skipped):
    notes_by_mark = footnotes(text)
    page = {"name": url, "prefix": "mb",
            "table": lambda ctx: f"{url} | {ctx['container']} NeMo Container | {ctx['task']} | {ctx['heading']}",
            "row_note": lambda ctx, cells, alt: (
                f"Megatron-Bridge performance summary, {ctx['container']} NeMo Container, {ctx['task']}, "
                f"table '{ctx['heading']}' (page source docs/{'performance-summary-archive' if 'archive' in url else 'performance-summary'}.md, "
                f"NVIDIA-NeMo/Megatron-Bridge commit {MBRIDGE_COMMIT[:10]}). Recompute, sequence parallel, distributed "
                "optimizer and communication overlap are not stated on the page (they live in the perf recipes)."
                + ("" if "FSDP" in cells else " The table has no FSDP column."))}
    rows = []
    for ctx, header, table in parse_tables(text):
        if not ctx["task"] or "pre-training" not in ctx["task"].lower():
            if ctx["task"]:
                skipped.add(f"{ctx['container']} {ctx['task']} ({ctx['heading']}): not pre-training")
            continue
        kind, _, name = ctx["heading"].partition(": ")
        for c, is_alt, extra in table_entries(header, table, kind, name, notes_by_mark,
                                              lambda cells, is_alt: precision_2509(cells["System"], is_alt)):
            if is_alt:
                extra.append(ALT_NOTE_2509_2511 + " Cells without parentheses are shared with the main entry; "
                             "a measured cell without parentheses is not attributed to the alternative.")
            if ctx["container"] == "25.09" and not is_alt:
                extra.append("The 25.09 table has no precision column; the unparenthesised numbers are taken as FP8 "
                             "per-tensor current scaling (the 25.11 table's 'FP8-CS (FP8-MX)' convention for the same rows).")
            if MODEL_KEYS.get(label_key(c["Model"])[0]) == "kimi_k2":
                extra.append(KIMI_NOTE)
            extra += moe_note(catalog, c)
            row, why = build_row(catalog, page, ctx, c, is_alt, extra)
            if row is None:
                skipped.add(f"{ctx['container']} {why}")
            else:
                rows.append(row)
    return rows


def nemo_2407_rows(text, catalog, skipped):
    page = {"name": NEMO_URL, "prefix": "nemo",
            "table": lambda ctx: f"{NEMO_URL} | Pretraining (FP8, Container NeMo24.07, System DGX-H100)",
            "row_note": lambda ctx, cells, alt: (
                "NeMo performance summary, 'Pretraining' table: 'pre-training performance for various tasks at FP8 "
                "precision', Container NeMo24.07, System DGX-H100 (NVIDIA/NeMo docs/source/performance/"
                "performance_summary.md at commit 9c5c5e9709, '24.07 perf numbers', the last version before the page "
                "moved to docs.nvidia.com). FSDP, EP, GA, recompute and overlap are not stated in this table.")}
    rows = []
    for ctx, header, table in parse_tables(text):
        if "Model" not in header or "Task" in header:  # the Finetuning table has a Task column
            if "Task" in header:
                skipped.add("NeMo 24.07 Finetuning (SFT / LoRA) table: not pre-training")
            continue
        ctx = {"container": "24.07", "task": "Pretraining", "heading": "System: DGX-H100"}
        for raw in table:
            main, alt, _, _ = pick(header, raw)
            c = rename(main)
            c["System"], c["Precision"] = "DGX-H100", "FP8"
            extra = []
            if c["Model"].startswith("GPT3-175B") and c["#-GPUs"] == "512":
                extra.append("The page links this row's Model TFLOP/s (888) to https://mlcommons.org/benchmarks/training/.")
            row, why = build_row(catalog, page, ctx, c, False, extra)
            if row:
                row["framework"] = {"name": "nemo", "version": "24.07", "features": []}
                rows.append(row)
            else:
                skipped.add(why)
    return rows


# ---- Fine-tuning tables (--finetune-out, bench/heldout/megatron_bridge_finetune.json) ----------------------
# The same parsing and row building as the pre-training tables; `task` comes from the section heading
# (Megatron-Bridge '### SFT Performance' / '### LoRA Performance') or the NeMo 24.07 table's Task column.
FT_SECTIONS = {"sft performance": "sft", "lora performance": "lora"}
FT_TASK_CELLS = {"sft": "sft", "lora": "lora"}
MBRIDGE_RECIPES_QUOTE = ("These results were obtained using performance recipes available "
                         "[here](https://github.com/NVIDIA-NeMo/Megatron-Bridge/tree/main/scripts/performance).")
NEMO_FT_QUOTES = ("The results in the table below show finetuning performance of LLAMA2 models with SFT (supervised "
                  "fine-tuning), and LoRA (Low-rank adaptors) at FP8 precision.",
                  "For fine-tuning, we use `SQuAD-v1.1 <https://rajpurkar.github.io/SQuAD-explorer/>`__ dataset, and "
                  "the inputs are packed to 4096 tokens.")
FT_ALT_NOTE = ("Parenthesised alternative of the published cell pair (the page does not say what the parentheses mean "
               "in this table). Cells without parentheses are shared with the main entry; a measured cell without "
               "parentheses is not attributed to the alternative.")


def lora_unstated(task):
    return (" LoRA rank: not stated. LoRA target modules: not stated. Which weights are frozen: not stated."
            if task == "lora" else "")


def mbridge_finetune_rows(text, url, catalog, skipped, found):
    assert MBRIDGE_RECIPES_QUOTE in text, f"{url}: the recipes sentence changed; re-read the page"
    src = "performance-summary-archive" if "archive" in url else "performance-summary"
    notes_by_mark = footnotes(text)
    page = {"name": url,
            "table": lambda ctx: f"{url} | {ctx['container']} NeMo Container | {ctx['task']} | {ctx['heading']}",
            "row_note": lambda ctx, cells, alt: (
                f"Megatron-Bridge performance summary, {ctx['container']} NeMo Container, {ctx['task']}, table "
                f"'{ctx['heading']}' (page source docs/{src}.md, NVIDIA-NeMo/Megatron-Bridge commit {MBRIDGE_COMMIT[:10]}); "
                f"task '{FT_SECTIONS[ctx['task'].lower()]}' from the section heading. All the page says of the setup: "
                f"'{MBRIDGE_RECIPES_QUOTE}' Not stated on the page: the dataset, whether sequences are packed (the "
                "'Sequence Length' column is training.seq_length), recompute, sequence parallel, distributed optimizer, "
                "communication overlap, CUDA graphs." + lora_unstated(FT_SECTIONS[ctx['task'].lower()])
                + ("" if "FSDP" in cells else " The table has no FSDP column."))}
    rows = []
    for ctx, header, table in parse_tables(text):
        task = FT_SECTIONS.get((ctx["task"] or "").lower())
        if task is None:
            continue
        found.append(f"{ctx['container']} {ctx['task']} ({ctx['heading']}) in docs/{src}.md")
        kind, _, name = ctx["heading"].partition(": ")
        page["prefix"] = f"mb_{task}"

        def no_precision(cells, is_alt, ctx=ctx):
            raise SystemExit(f"{url} {ctx}: fine-tuning table without a precision column; transcribe by hand")

        for c, is_alt, extra in table_entries(header, table, kind, name, notes_by_mark, no_precision):
            if is_alt:
                extra.append(FT_ALT_NOTE)
            extra += moe_note(catalog, c)
            row, why = build_row(catalog, page, ctx, c, is_alt, extra)
            if row is None:
                skipped.add(f"{ctx['container']} {ctx['task']} {why}")
                continue
            row["task"] = task
            row["framework"] = {"name": "megatron-bridge", "version": ctx["container"], "features": []}
            rows.append(row)
    return rows


def nemo_2407_finetune_rows(text, catalog, skipped, found):
    for q in NEMO_FT_QUOTES:
        assert q in text, "NeMo 24.07 page: the Finetuning notes changed; re-read the page"
    page = {"name": NEMO_URL,
            "table": lambda ctx: f"{NEMO_URL} | Finetuning (SFT / LoRA, FP8, Container NeMo24.07, System DGX-H100)",
            "row_note": lambda ctx, cells, alt: (
                "NeMo performance summary, 'Finetuning' table, Container NeMo24.07, System DGX-H100 (NVIDIA/NeMo "
                "docs/source/performance/performance_summary.md at commit 9c5c5e9709, '24.07 perf numbers'); task "
                f"'{cells['Task']}' from the table's Task column. The page: '{NEMO_FT_QUOTES[0]}' and "
                f"'{NEMO_FT_QUOTES[1]}' The 'Packed Sequence Length' column is training.seq_length. The table has no "
                "CP, VP, EP, GA or FSDP column: cp and vpp are null (not stated) and dp = #-GPUs / (TP x PP). Not stated: "
                "recompute, sequence parallel, distributed optimizer, communication overlap, CUDA graphs."
                + lora_unstated(FT_TASK_CELLS[cells["Task"].lower()]).replace(
                    "LoRA target modules: not stated.", "LoRA target modules: not stated (the page says only 'LoRA "
                    "(Low-rank adaptors)')."))}
    rows = []
    for _, header, table in parse_tables(text):
        if "Task" not in header:  # the Pretraining table: megatron_bridge_perf.json
            continue
        found.append("NeMo 24.07 Finetuning table")
        ctx = {"container": "24.07", "task": "Finetuning", "heading": "System: DGX-H100"}
        for raw in table:
            main, alt, _, _ = pick(header, raw)
            if alt is not None:
                raise SystemExit(f"NeMo 24.07 Finetuning: parenthesised cell in {raw}; transcribe by hand")
            c = rename(main)
            c["Sequence Length"] = c.pop("Packed Sequence Length")
            c["System"], c["Precision"] = "DGX-H100", "FP8"
            task = FT_TASK_CELLS[c["Task"].lower()]
            page["prefix"] = f"nemo_{task}"
            row, why = build_row(catalog, page, ctx, c, False, [])
            if row is None:
                skipped.add(f"24.07 Finetuning {why}")
                continue
            row["task"] = task
            row["framework"] = {"name": "nemo", "version": "24.07", "features": []}
            rows.append(row)
    return rows


SOURCE_SNAPSHOT = {"megatron_bridge": f"NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md and "
                                      f"docs/performance-summary-archive.md at commit {MBRIDGE_COMMIT} (2026-08-11)",
                   "nemo": "NVIDIA/NeMo docs/source/performance/performance_summary.md at commit "
                           "9c5c5e9709407d3511005fc966e45374998bb478 (2024-11-05)"}


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


def write_finetune(args, catalog, hw):
    """The fine-tuning file (--finetune-out), bench/heldout/megatron_bridge_finetune.json."""
    skipped, found = set(), []
    rows = (mbridge_finetune_rows(open(args.mbridge_summary).read(), MBRIDGE_URL, catalog, skipped, found)
            + mbridge_finetune_rows(open(args.mbridge_archive).read(), MBRIDGE_ARCHIVE_URL, catalog, skipped, found)
            + nemo_2407_finetune_rows(open(args.nemo_2407).read(), catalog, skipped, found))
    assert len({r["id"] for r in rows}) == len(rows), "duplicate ids"
    used = sorted({r["system"] for r in rows})
    containers = sorted({r["container"] for r in rows if r["framework"]["name"] == "megatron-bridge"})
    doc = {
        "source": "NVIDIA Megatron-Bridge performance summary archive (SFT and LoRA tables, NeMo container "
                  f"{', '.join(containers)}) and NeMo Framework performance summary (NeMo 24.07, DGX-H100, Finetuning "
                  "table). HELD-OUT: never used for fitting.",
        "source_url": [MBRIDGE_URL, MBRIDGE_ARCHIVE_URL, NEMO_URL],
        "source_snapshot": SOURCE_SNAPSHOT,
        "source_notes": (
            "Held-out validation file (bench/heldout/README.md): fine-tuning rows transcribed by bench/heldout/transcribe.py "
            "--finetune-out from the page sources, every table cell verbatim; never add it to ../shared/validation, a fit or "
            "--cv. Pre-training rows are in megatron_bridge_perf.json. Tables read: " + "; ".join(found) + ". The latest "
            "Megatron-Bridge page (26.08) has no SFT or LoRA table. Row `task` is 'sft' or 'lora' from the section "
            "heading (Megatron-Bridge) or the Task column (NeMo 24.07). What the pages say about the fine-tuning setup: "
            f"Megatron-Bridge, only '{MBRIDGE_RECIPES_QUOTE}' (dataset, packing, LoRA rank, LoRA target modules and "
            "frozen weights: not stated); NeMo 24.07, '" + "' and '".join(NEMO_FT_QUOTES) + "' (LoRA rank and target "
            "modules: not stated). Tokens/sec/GPU and Model TFLOP/sec/GPU as published; the pages do not define Model "
            "TFLOP/s for LoRA (observation here, not on the pages: per token the LoRA rows quote about 2/3 of the SFT "
            "rows' FLOPs for the same model, as if the frozen weights' weight-gradient GEMMs were not counted); "
            "`validate` compares tokens/s/GPU. The NeMo 24.07 column 'Est. time to finetune in mins (10M tokens)' is a "
            "projection and is not transcribed. Pages name only the DGX system: hardware blocks are catalog_hardware.json "
            "reference specs. Unstated knobs (recompute, sequence parallel, distributed optimizer, overlap, CUDA graphs) "
            "are set by the Megatron-Bridge / NeMo perf recipes of each container, not by the page. Left out: "
            + ("; ".join(sorted(skipped)) if skipped else "no row (every fine-tuning model is in the catalog)") + "."),
        "framework": {"name": "megatron-bridge", "version": f"NeMo container {', '.join(containers)} (row `container`)",
                      "features": []},
        "hardware": {k: hw[k] for k in used},
        "rows": rows,
    }
    write_json(args.finetune_out, doc)
    print(f"{len(rows)} fine-tuning rows -> {args.finetune_out}; left out: {len(skipped)} rows", file=sys.stderr)


def write_pretrain(args, catalog, hw):
    """The pre-training file (--out), bench/heldout/megatron_bridge_perf.json."""
    skipped = set()
    rows = (mbridge_rows(open(args.mbridge_summary).read(), MBRIDGE_URL, catalog, skipped)
            + mbridge_rows(open(args.mbridge_archive).read(), MBRIDGE_ARCHIVE_URL, catalog, skipped)
            + nemo_2407_rows(open(args.nemo_2407).read(), catalog, skipped))
    ids = {}
    for r in rows:  # the same configuration twice in one table (DeepSeekV3 GBS 4096 / 15360): add the batch
        ids.setdefault(r["id"], []).append(r)
    for rid, group in ids.items():
        if len(group) > 1:
            for r in group:
                r["id"] = f"{rid}_gbs{r['training']['global_batch_size_seqs']}"
    assert len({r["id"] for r in rows}) == len(rows), "duplicate ids"
    used = sorted({r["system"] for r in rows})
    doc = {
        "source": "NVIDIA Megatron-Bridge performance summary (latest + archive: NeMo containers 25.09 to 26.08) and "
                  "NeMo Framework performance summary (NeMo 24.07, DGX-H100). HELD-OUT: never used for fitting.",
        "source_url": [MBRIDGE_URL, MBRIDGE_ARCHIVE_URL, NEMO_URL],
        "source_snapshot": SOURCE_SNAPSHOT,
        "source_notes": (
            "Held-out validation file (bench/heldout/README.md): transcribed by bench/heldout/transcribe.py from the page "
            "sources, every table cell verbatim; never add it to ../shared/validation, a fit or --cv. Pre-training rows only "
            "(SFT / LoRA tables left out). Tokens/sec/GPU and Model TFLOP/sec/GPU (model FLOPs, no recompute) as published; "
            "for FP8/MXFP8/NVFP4 rows NVIDIA quotes model TFLOP/s against nothing, compare with the matching low-precision "
            "peak. A cell 'a (b)' is two published configurations: the main row and an '_alt' row (see each note). "
            "Pages name only the DGX system: hardware blocks are catalog_hardware.json reference specs. Unstated knobs "
            "(recompute, sequence parallel, distributed optimizer, overlap, CUDA graphs) are set by the Megatron-Bridge / "
            "NeMo perf recipes of each container, not by the page. Models left out: " + "; ".join(sorted(skipped)) + "."),
        "framework": {"name": "megatron-bridge", "version": "NeMo containers 25.09-26.08 (row `container`)", "features": []},
        "hardware": {k: hw[k] for k in used},
        "rows": rows,
    }
    write_json(args.out, doc)
    print(f"{len(rows)} rows -> {args.out}; left out: {len(skipped)} tables/rows", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    for a in ("--mbridge-summary", "--mbridge-archive", "--nemo-2407", "--catalog-models", "--catalog-hardware"):
        ap.add_argument(a, required=True)
    ap.add_argument("--out", help="pre-training rows (bench/heldout/megatron_bridge_perf.json)")
    ap.add_argument("--finetune-out", help="SFT / LoRA rows (bench/heldout/megatron_bridge_finetune.json)")
    args = ap.parse_args()
    if not args.out and not args.finetune_out:
        ap.error("give --out, --finetune-out or both")
    catalog = json.load(open(args.catalog_models))["models"]
    hw = json.load(open(args.catalog_hardware))["systems"]
    if args.out:
        write_pretrain(args, catalog, hw)
    if args.finetune_out:
        write_finetune(args, catalog, hw)


if __name__ == "__main__":
    main()
