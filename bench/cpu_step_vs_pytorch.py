#!/usr/bin/python3
"""Single-rank training-step time of mgt's CPU runtime against PyTorch eager on the same machine.

Usage: /usr/bin/python3 bench/cpu_step_vs_pytorch.py MGT_PLAN_BINARY [--steps N] [--threads T]
                                                     [--vocab V] [--batch G] [--json OUT]
                                                     [--clock wall|cpu] [--repeat R]

Needs an optimised BLAS under torch (Debian: apt-get install libopenblas0-pthread); the result
lists the BLAS torch mapped and warns on the reference one.

The model is a small Llama (4 layers, hidden 512, 8 heads, 4 KV heads, head_dim 64, ffn 1536,
vocab 8192 unless --vocab, seq 256), global batch G sequences per step. Both sides run the same
step: forward, backward, global-norm clipping and AdamW, from the same safetensors weights and the
same tokens, with T threads (mgt's CPU kernels are single-threaded, one rank per core, so the
default is T = 1 and torch.set_num_threads(1)). PyTorch runs LlamaForCausalLM written with torch ops
(tests/runtime/reference/kernels_reference.py: HF eager attention, F.linear, F.cross_entropy).

Reported: the median step time of steps 2..N of each (step 1 warms caches and allocators), their
ratio mgt / PyTorch, and the first losses of both (they must agree: the two run the same
computation, so a timing of different work cannot pass unnoticed).

--clock cpu times CPU seconds instead of wall seconds, for a machine shared with other work, where
wall time measures the other jobs as much as these: PyTorch's steps by time.process_time(), mgt's as
the CPU time of a run of N steps less that of a run of 1 step (the children's rusage), divided by
N - 1 (a mean, not a median: one process's CPU time cannot be split per step from outside). CPU time
still grows with the cache and memory-bandwidth contention of other jobs, but not with their share
of the cores. --repeat R runs the whole comparison R times and reports each ratio and their median.
"""
import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--json")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--repeat", type=int, default=1)
    return ap.parse_args()


ARGS = parse_args()
# Thread counts of torch's BLAS must be set before torch loads it.
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "runtime", "reference"))
import kernels_reference as ref  # noqa: E402
import llama_train_reference as train_ref  # noqa: E402

HYPER = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=1.0)


def torch_steps(cfg, init, tokens, G, S, steps, clock=time.perf_counter):
    params = {k: v.detach().clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.AdamW(list(params.values()), lr=HYPER["lr"], betas=(HYPER["beta1"], HYPER["beta2"]),
                            eps=HYPER["eps"], weight_decay=HYPER["weight_decay"])
    losses, times = [], []
    for k in range(steps):
        rows = [tokens[(k * G + j) * S: (k * G + j) * S + S + 1] for j in range(G)]
        batch = torch.stack(rows)
        inputs, targets = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
        t0 = clock()
        opt.zero_grad()
        loss = ref.llama_loss(cfg, params, False, inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), max_norm=HYPER["grad_clip"])
        opt.step()
        times.append(clock() - t0)
        losses.append(float(loss))
    return losses, times


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def mgt_steps_cpu(binary, workdir, G, S, steps, threads):
    """Losses of an N-step run and (CPU s of that run - CPU s of a 1-step run) / (N - 1) as every
    step's time: the setup (weights, lowering, the simulation) costs the same in both runs."""
    t0 = children_cpu_s()
    mgt_steps(binary, workdir, G, S, 1, threads)
    one = children_cpu_s() - t0
    t0 = children_cpu_s()
    losses, _ = mgt_steps(binary, workdir, G, S, steps, threads)
    many = children_cpu_s() - t0
    per_step = (many - one) / (steps - 1)
    return losses, [per_step] * steps


def mgt_steps(binary, workdir, G, S, steps, threads):
    log = os.path.join(workdir, "mgt.jsonl")
    cmd = [binary, "run", os.path.join(workdir, "config.json"), "--weights", os.path.join(workdir, "model.safetensors"),
           "--data", os.path.join(workdir, "tokens.bin"), "--data-dtype", "uint16", "--seq-len", str(S),
           "--global-batch", str(G), "--steps", str(steps), "--lr", str(HYPER["lr"]), "--beta1", str(HYPER["beta1"]),
           "--beta2", str(HYPER["beta2"]), "--eps", str(HYPER["eps"]), "--weight-decay", str(HYPER["weight_decay"]),
           "--grad-clip", str(HYPER["grad_clip"]), "--log", log]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    losses, times = [], []
    with open(log) as f:
        for line in f:
            rec = json.loads(line)
            if "step" in rec:
                losses.append(rec["loss"])
                times.append(rec["step_time_s"])
    return losses, times


def blas_library():
    """The BLAS torch's process mapped: Debian's torch calls the system libblas.so.3, which is the
    reference BLAS (~2 GFLOP/s) unless an optimised one (libopenblas0-pthread) is installed."""
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.split()[-1].lower()}
    return sorted(libs)


def main():
    a = ARGS
    results = [compare(a) for _ in range(max(a.repeat, 1))]
    result = results[-1]
    if a.repeat > 1:
        ratios = [r["ratio_mgt_over_torch"] for r in results]
        result = dict(result, ratios=ratios, ratio_median=statistics.median(ratios))
    result["load_average"] = os.getloadavg()
    print(json.dumps(result, indent=1))
    if not any("openblas" in lib for lib in result["torch_blas"]):
        print("warning: torch runs on the reference BLAS; install libopenblas0-pthread for a fair comparison",
              file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


def compare(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(2024)
    S, G = 256, a.batch
    cfg = dict(ref.LLAMA, layers=4, hidden=512, heads=8, kv_heads=4, head_dim=64, ffn=1536, vocab=a.vocab, seq=S)
    cfg["rope_scaling"] = dict(cfg["rope_scaling"], original_max_position_embeddings=8192)
    init = ref.llama_parameters(cfg, tied=False)
    tokens = torch.randint(0, cfg["vocab"], (a.steps * G * S + 1,), dtype=torch.int64)
    with tempfile.TemporaryDirectory() as work:
        conf = train_ref.config_json(cfg)
        conf["max_position_embeddings"] = 8192
        with open(os.path.join(work, "config.json"), "w") as f:
            json.dump(conf, f)
        train_ref.write_safetensors(os.path.join(work, "model.safetensors"), init)
        with open(os.path.join(work, "tokens.bin"), "wb") as f:
            f.write(tokens.to(torch.int32).numpy().astype("<u2").tobytes())
        if a.clock == "cpu":
            m_losses, m_times = mgt_steps_cpu(a.binary, work, G, S, a.steps, a.threads)
        else:
            m_losses, m_times = mgt_steps(a.binary, work, G, S, a.steps, a.threads)
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    t_losses, t_times = torch_steps(cfg, init, tokens, G, S, a.steps, clock)
    # The same work on both sides: the first loss (same weights, same tokens, before any update)
    # agrees to fp32 rounding; later ones drift only by accumulated rounding.
    rel = abs(m_losses[0] - t_losses[0]) / abs(t_losses[0])
    if not rel < 1e-4 or not all(math.isfinite(x) for x in m_losses + t_losses):
        sys.exit(f"losses disagree: mgt {m_losses} vs torch {t_losses}")
    m_med, t_med = statistics.median(m_times[1:]), statistics.median(t_times[1:])
    n_params = sum(v.numel() for v in init.values())
    flops = 6 * n_params * G * S  # matmul FLOPs of the dense params (attention scores not counted)
    result = {
        "model": {k: cfg[k] for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")},
        "seq_len": S, "global_batch": G, "threads": a.threads, "steps": a.steps, "params": n_params, "clock": a.clock,
        "mgt_step_s": m_med, "torch_step_s": t_med, "ratio_mgt_over_torch": m_med / t_med,
        "mgt_gflops_per_s": flops / m_med / 1e9, "torch_gflops_per_s": flops / t_med / 1e9,
        "first_loss": {"mgt": m_losses[0], "torch": t_losses[0], "rel_diff": rel},
        "torch_version": torch.__version__, "torch_blas": blas_library(),
        "load_average": os.getloadavg(),
    }
    print(f"mgt {m_med:.3f} s, torch {t_med:.3f} s ({a.clock}), mgt/torch {m_med / t_med:.3f}, "
          f"load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
