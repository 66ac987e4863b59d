#!/usr/bin/env python3
"""Counts the ATen ops that the eager PyTorch implementations of a transformer layer's pieces dispatch,
forward and backward: the counts behind eager_launch_counts() in cost_model/include/mgt/cost_model/
host_dispatch.hpp (docs/cost-model.md §9, "Host dispatch").

    /usr/bin/python3 bench/host_dispatch/count_aten_ops.py     # Debian's python3-torch is enough (CPU)

Each piece is written as Hugging Face transformers writes it (LlamaRMSNorm, apply_rotary_pos_emb,
LlamaMLP's act_fn(gate) * up, nn.Linear, the loss's logits.float() + cross_entropy, nn.LayerNorm under
autocast's fp32 policy). A TorchDispatchMode records every op that reaches ATen; ops that only make
views or compare metadata (no kernel) and the test's own tensor creation are left out. The dispatch
is the same on CUDA, so the counts are the host's ATen calls per piece, each of which launches at least
one kernel.
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

NO_KERNEL = {"view", "_unsafe_view", "_reshape_alias", "reshape", "transpose", "t", "expand", "unsqueeze",
             "squeeze", "slice", "select", "permute", "as_strided", "alias", "detach", "split", "narrow",
             "is_same_size", "ones_like", "empty", "empty_like", "empty_strided"}


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name not in NO_KERNEL:
            self.ops.append(name)
        return func(*args, **(kwargs or {}))


def count(fn, *shapes):
    inputs = [torch.randn(*s, dtype=torch.bfloat16, requires_grad=True) for s in shapes]
    fwd = Count()
    with fwd:
        y = fn(*inputs)
    bwd = Count()
    grad = torch.ones_like(y)
    with bwd:
        y.backward(grad)
    return fwd.ops, bwd.ops


def rms_norm(x, weight, eps=1e-6):  # transformers LlamaRMSNorm.forward
    dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x.to(dtype)


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)


B, S, H, D = 1, 16, 64, 16
cos = torch.randn(S, D, dtype=torch.bfloat16)
sin = torch.randn(S, D, dtype=torch.bfloat16)
linear = torch.nn.Linear(H, H, bias=False).to(torch.bfloat16)
biased = torch.nn.Linear(H, H).to(torch.bfloat16)
layer_norm = torch.nn.LayerNorm(H)
targets = torch.zeros(B * S, dtype=torch.long)

pieces = {
    "rms_norm": (lambda x, w: rms_norm(x, w), [(B, S, H), (H,)]),
    "layer_norm (autocast fp32)": (lambda x: layer_norm(x.float()), [(B, S, H)]),
    "rope (one tensor)": (lambda q: q * cos + rotate_half(q) * sin, [(B, 4, S, D)]),
    "silu(gate) * up": (lambda g, u: torch.nn.functional.silu(g) * u, [(B, S, H), (B, S, H)]),
    "gelu": (lambda x: torch.nn.functional.gelu(x), [(B, S, H)]),
    "linear": (lambda x: linear(x), [(B, S, H)]),
    "linear with bias": (lambda x: biased(x), [(B, S, H)]),
    "cross entropy": (lambda l: torch.nn.functional.cross_entropy(l.float().view(-1, l.shape[-1]), targets), [(B, S, 100)]),
}
for name, (fn, shapes) in pieces.items():
    fwd, bwd = count(fn, *shapes)
    print(f"{name:28s} forward {len(fwd):2d} {fwd}\n{'':28s} backward {len(bwd):2d} {bwd}")
