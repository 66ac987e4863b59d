#!/usr/bin/python3
"""PyTorch reference for the CPU kernels (runtime/src/cpu/kernels.cpp), read by
tests/runtime/kernels_test.cpp.

Usage: /usr/bin/python3 kernels_reference.py OUT_FILE

For each op it writes the inputs (so both sides use identical numbers), a fixed upstream gradient
`dout`, the forward output and the gradients of sum(out * dout) from autograd. It also writes a tiny
Llama-family model (HF LlamaForCausalLM semantics written with torch ops; transformers is not
needed): loss and gradients of every parameter, grad-norm clipping, and two torch.optim.AdamW steps.

File format (little-endian), a sequence of records until end of file:
  u32 name_len, name (utf-8), u8 dtype (0 f32, 1 i32, 2 f64), u32 ndim, i64 dims[ndim], data.
"""
import math
import struct
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.manual_seed(1234)

RECORDS = []


def put(name, value):
    if isinstance(value, float):
        value = torch.tensor(value, dtype=torch.float64)
    value = value.detach().clone().contiguous()  # a snapshot: optimizers update in place
    codes = {torch.float32: 0, torch.int32: 1, torch.float64: 2}
    if value.dtype == torch.int64:
        value = value.to(torch.int32)
    # A reference must be usable: a NaN or inf here would make the C++ comparison meaningless.
    assert value.dtype == torch.int32 or bool(torch.isfinite(value).all()), f"{name}: non-finite reference"
    RECORDS.append((name, codes[value.dtype], value))


def write(path):
    with open(path, "wb") as f:
        for name, code, value in RECORDS:
            raw = name.encode()
            f.write(struct.pack("<I", len(raw)) + raw + struct.pack("<BI", code, value.dim()))
            f.write(struct.pack("<%dq" % value.dim(), *value.shape))
            f.write(value.numpy().tobytes())


def leaf(*shape, scale=1.0, offset=0.0):
    return (torch.randn(*shape) * scale + offset).requires_grad_(True)


def backward_with_dout(prefix, out):
    """Writes out and a fixed dout; runs autograd on sum(out * dout)."""
    dout = torch.randn(out.shape)
    put(prefix + "/dout", dout)
    put(prefix + "/out", out)
    (out * dout).sum().backward()


# ------------------------------------------------------------------------------------------------
# HF building blocks (transformers/models/llama/modeling_llama.py, modeling_rope_utils.py)

def rms_norm(x, w, eps, unit_offset=False):
    variance = x.pow(2).mean(-1, keepdim=True)
    h = x * torch.rsqrt(variance + eps)
    return (1.0 + w) * h if unit_offset else w * h


def rope_inv_freq(dim, theta, scaling=None):
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if scaling is None:
        return inv_freq
    factor = scaling["factor"]
    low_freq_factor = scaling["low_freq_factor"]
    high_freq_factor = scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rope_cos_sin(T, dim, theta, scaling, offset):
    inv_freq = rope_inv_freq(dim, theta, scaling)
    position_ids = torch.arange(offset, offset + T)[None, :]
    freqs = (inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos()[0], emb.sin()[0]  # (T, D)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin):
    """x (B, T, H, D); cos, sin (T, D)."""
    return x * cos[None, :, None, :] + rotate_half(x) * sin[None, :, None, :]


def attention(q, k, v, causal=True, window=0):
    """q (B, T, H, D), k and v (B, T, KVH, D) -> out (B, T, H, D), lse (B, H, T). HF eager."""
    B, T, H, D = q.shape
    group = H // k.shape[2]
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(group, dim=1)  # repeat_kv
    vh = v.transpose(1, 2).repeat_interleave(group, dim=1)
    scores = torch.matmul(qh, kh.transpose(2, 3)) * (D ** -0.5)
    t = torch.arange(T)[:, None]
    s = torch.arange(T)[None, :]
    masked = torch.zeros(T, T, dtype=torch.bool)
    if causal:
        masked |= s > t
    if window > 0:
        masked |= (t - s) >= window
    scores = scores.masked_fill(masked, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = F.softmax(scores, dim=-1, dtype=torch.float32)
    out = torch.matmul(probs, vh).transpose(1, 2).contiguous()
    return out, lse


# ------------------------------------------------------------------------------------------------
# Single ops

def case_embedding():
    V, C = 50, 16
    ids = torch.tensor([[3, 7, 7, 0, 49, 3, 12], [1, 2, 3, 3, 3, 44, 0]], dtype=torch.int32)
    wte = leaf(V, C)
    put("embedding/ids", ids)
    put("embedding/wte", wte)
    out = F.embedding(ids.long(), wte)
    backward_with_dout("embedding", out)
    put("embedding/dwte", wte.grad)


def case_rmsnorm(name, unit_offset):
    x = leaf(2, 7, 48, scale=2.0, offset=0.3)
    w = leaf(48, scale=0.2, offset=0.0 if unit_offset else 1.0)
    put(name + "/x", x)
    put(name + "/w", w)
    out = rms_norm(x, w, 1e-5, unit_offset)
    backward_with_dout(name, out)
    put(name + "/dx", x.grad)
    put(name + "/dw", w.grad)


def case_layernorm():
    x = leaf(2, 7, 48, scale=2.0, offset=0.3)
    w = leaf(48, scale=0.2, offset=1.0)
    b = leaf(48, scale=0.1)
    for n, t in (("x", x), ("w", w), ("b", b)):
        put("layernorm/" + n, t)
    out = F.layer_norm(x, (48,), w, b, 1e-5)
    backward_with_dout("layernorm", out)
    put("layernorm/dx", x.grad)
    put("layernorm/dw", w.grad)
    put("layernorm/db", b.grad)


def case_linear():
    x = leaf(2, 7, 24)
    w = leaf(40, 24, scale=0.2)
    b = leaf(40, scale=0.1)
    for n, t in (("x", x), ("w", w), ("b", b)):
        put("linear/" + n, t)
    out = F.linear(x, w, b)
    backward_with_dout("linear", out)
    put("linear/dx", x.grad)
    put("linear/dw", w.grad)
    put("linear/db", b.grad)


def case_rope(name, theta, scaling, offset):
    B, T, H, D = 2, 9, 3, 16
    x = leaf(B, T, H, D)
    put(name + "/x", x)
    put(name + "/config", torch.tensor([theta, scaling["factor"] if scaling else 0.0,
                                        scaling["low_freq_factor"] if scaling else 1.0,
                                        scaling["high_freq_factor"] if scaling else 4.0,
                                        scaling["original_max_position_embeddings"] if scaling else 8192,
                                        offset], dtype=torch.float64))
    put(name + "/inv_freq", rope_inv_freq(D, theta, scaling))
    cos, sin = rope_cos_sin(T, D, theta, scaling, offset)
    put(name + "/cos", cos[:, : D // 2])
    put(name + "/sin", sin[:, : D // 2])
    out = apply_rope(x, cos, sin)
    backward_with_dout(name, out)
    put(name + "/dx", x.grad)


def case_attention(name, causal, window):
    B, T, H, KVH, D = 2, 11, 4, 2, 16
    q, k, v = leaf(B, T, H, D), leaf(B, T, KVH, D), leaf(B, T, KVH, D)
    for n, t in (("q", q), ("k", k), ("v", v)):
        put(name + "/" + n, t)
    put(name + "/config", torch.tensor([B, T, H, KVH, D, int(causal), window], dtype=torch.int32))
    out, lse = attention(q, k, v, causal, window)
    put(name + "/lse", lse)
    backward_with_dout(name, out)
    put(name + "/dq", q.grad)
    put(name + "/dk", k.grad)
    put(name + "/dv", v.grad)


def case_elementwise():
    x = leaf(2, 7, 33, scale=2.0)
    put("gelu/x", x)
    backward_with_dout("gelu", F.gelu(x, approximate="tanh"))
    put("gelu/dx", x.grad)
    for name, act in (("swiglu", F.silu), ("geglu", lambda t: F.gelu(t, approximate="tanh"))):
        gate, up = leaf(2, 7, 33, scale=2.0), leaf(2, 7, 33)
        put(name + "/gate", gate)
        put(name + "/up", up)
        backward_with_dout(name, act(gate) * up)
        put(name + "/dgate", gate.grad)
        put(name + "/dup", up.grad)
    a, b = leaf(3, 5), leaf(3, 5)
    put("residual/a", a)
    put("residual/b", b)
    backward_with_dout("residual", a + b)
    put("residual/da", a.grad)
    put("residual/db", b.grad)


def case_cross_entropy():
    N, V = 14, 97
    logits = leaf(N, V, scale=3.0)
    targets = torch.randint(0, V, (N,))
    targets[5] = -100
    num_targets = int((targets >= 0).sum())
    put("xent/logits", logits)
    put("xent/targets", targets)
    loss = F.cross_entropy(logits, targets, ignore_index=-100, reduction="sum") / num_targets
    put("xent/loss", float(loss))
    loss.backward()
    put("xent/dlogits", logits.grad)


def case_adamw():
    n = 1000
    p = torch.randn(n).requires_grad_(True)
    put("adamw/p0", p)
    opt = torch.optim.AdamW([p], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for step in range(1, 4):
        g = torch.randn(n) * (10.0 ** -step)  # shrinking grads so eps and bias correction matter
        put("adamw/g%d" % step, g)
        p.grad = g.clone()
        opt.step()
        put("adamw/p%d" % step, p)
    state = opt.state[p]
    put("adamw/m", state["exp_avg"])
    put("adamw/v", state["exp_avg_sq"])


def case_clip():
    g1, g2 = torch.randn(30) * 0.5, torch.randn(7, 3)
    put("clip/g1", g1)
    put("clip/g2", g2)
    params = [torch.zeros_like(g1, requires_grad=True), torch.zeros_like(g2, requires_grad=True)]
    params[0].grad, params[1].grad = g1.clone(), g2.clone()
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm=1.5)
    put("clip/norm", float(norm))
    put("clip/g1_clipped", params[0].grad)
    put("clip/g2_clipped", params[1].grad)


# ------------------------------------------------------------------------------------------------
# Tiny Llama (LlamaForCausalLM semantics)

LLAMA = dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=512, seq=32,
             batch=2, eps=1e-5, theta=500000.0,
             rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                               original_max_position_embeddings=64),
             lr=1e-2, beta1=0.9, beta2=0.95, adam_eps=1e-8, weight_decay=0.1, max_norm=0.5)


def llama_parameters(cfg, tied):
    C, F_, V, D = cfg["hidden"], cfg["ffn"], cfg["vocab"], cfg["head_dim"]
    H, KVH = cfg["heads"], cfg["kv_heads"]
    params = {"model.embed_tokens.weight": torch.randn(V, C) * 0.02}
    for layer in range(cfg["layers"]):
        p = "model.layers.%d." % layer
        params[p + "input_layernorm.weight"] = 1.0 + 0.1 * torch.randn(C)
        params[p + "self_attn.q_proj.weight"] = torch.randn(H * D, C) * 0.02
        params[p + "self_attn.k_proj.weight"] = torch.randn(KVH * D, C) * 0.02
        params[p + "self_attn.v_proj.weight"] = torch.randn(KVH * D, C) * 0.02
        if cfg.get("qkv_bias"):  # Qwen2: q, k, v projections carry a bias, o does not
            params[p + "self_attn.q_proj.bias"] = torch.randn(H * D) * 0.1
            params[p + "self_attn.k_proj.bias"] = torch.randn(KVH * D) * 0.1
            params[p + "self_attn.v_proj.bias"] = torch.randn(KVH * D) * 0.1
        params[p + "self_attn.o_proj.weight"] = torch.randn(C, H * D) * 0.02
        params[p + "post_attention_layernorm.weight"] = 1.0 + 0.1 * torch.randn(C)
        params[p + "mlp.gate_proj.weight"] = torch.randn(F_, C) * 0.02
        params[p + "mlp.up_proj.weight"] = torch.randn(F_, C) * 0.02
        params[p + "mlp.down_proj.weight"] = torch.randn(C, F_) * 0.02
    params["model.norm.weight"] = 1.0 + 0.1 * torch.randn(C)
    if not tied:
        params["lm_head.weight"] = torch.randn(V, C) * 0.02
    return {k: v.requires_grad_(True) for k, v in params.items()}


def llama_loss(cfg, params, tied, inputs, targets):
    B, T = inputs.shape
    H, KVH, D = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    eps = cfg["eps"]
    cos, sin = rope_cos_sin(T, D, cfg["theta"], cfg["rope_scaling"], 0)
    h = F.embedding(inputs.long(), params["model.embed_tokens.weight"])
    for layer in range(cfg["layers"]):
        p = "model.layers.%d." % layer
        x = rms_norm(h, params[p + "input_layernorm.weight"], eps)
        q = F.linear(x, params[p + "self_attn.q_proj.weight"], params.get(p + "self_attn.q_proj.bias")).view(B, T, H, D)
        k = F.linear(x, params[p + "self_attn.k_proj.weight"], params.get(p + "self_attn.k_proj.bias")).view(B, T, KVH, D)
        v = F.linear(x, params[p + "self_attn.v_proj.weight"], params.get(p + "self_attn.v_proj.bias")).view(B, T, KVH, D)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a, _ = attention(q, k, v, causal=True, window=cfg.get("window", 0))  # Mistral: sliding window
        h = h + F.linear(a.reshape(B, T, H * D), params[p + "self_attn.o_proj.weight"])
        x = rms_norm(h, params[p + "post_attention_layernorm.weight"], eps)
        mlp = F.silu(F.linear(x, params[p + "mlp.gate_proj.weight"])) * F.linear(x, params[p + "mlp.up_proj.weight"])
        h = h + F.linear(mlp, params[p + "mlp.down_proj.weight"])
    h = rms_norm(h, params["model.norm.weight"], eps)
    head = params["model.embed_tokens.weight" if tied else "lm_head.weight"]
    logits = F.linear(h, head)
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1).long())


def case_llama(tied):
    cfg = LLAMA
    prefix = "llama_tied" if tied else "llama_untied"
    params = llama_parameters(cfg, tied)
    tokens = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), dtype=torch.int32)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    put(prefix + "/inputs", inputs)
    put(prefix + "/targets", targets)
    for name, value in params.items():
        put(prefix + "/param/" + name, value)
    opt = torch.optim.AdamW(list(params.values()), lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]),
                            eps=cfg["adam_eps"], weight_decay=cfg["weight_decay"])
    for step in (1, 2):
        opt.zero_grad()
        loss = llama_loss(cfg, params, tied, inputs, targets)
        loss.backward()
        put(prefix + "/step%d/loss" % step, float(loss))
        for name, value in params.items():
            put(prefix + "/step%d/grad/%s" % (step, name), value.grad)
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), max_norm=cfg["max_norm"])
        put(prefix + "/step%d/grad_norm" % step, float(norm))
        opt.step()
        for name, value in params.items():
            put(prefix + "/step%d/param/%s" % (step, name), value)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: kernels_reference.py OUT_FILE")
    case_embedding()
    case_rmsnorm("rmsnorm", unit_offset=False)
    case_rmsnorm("rmsnorm_gemma", unit_offset=True)
    case_layernorm()
    case_linear()
    case_rope("rope_llama3", 500000.0, LLAMA["rope_scaling"], offset=40)
    case_rope("rope_default", 10000.0, None, offset=0)
    case_attention("attention", causal=True, window=0)
    case_attention("attention_window", causal=True, window=4)
    case_attention("attention_full", causal=False, window=0)
    case_elementwise()
    case_cross_entropy()
    case_adamw()
    case_clip()
    case_llama(tied=False)
    case_llama(tied=True)
    write(sys.argv[1])


if __name__ == "__main__":
    main()
