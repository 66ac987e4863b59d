#!/usr/bin/python3
"""PyTorch reference for the schedule executor (runtime/src/executor.cpp), read by
tests/runtime/executor_test.cpp.

Usage: /usr/bin/python3 llama_train_reference.py OUT_DIR

Writes into OUT_DIR:
  config.json        a tiny Llama (2 layers, hidden 64, 4 heads, 2 kv heads, head_dim 16, ffn 128,
                     vocab 512, rope theta 500000 with llama3 scaling), Hugging Face config format
  model.safetensors  its weights, F32, Hugging Face names (written here by hand: 8-byte little-endian
                     header length, JSON header, raw little-endian data; no `safetensors` package)
  tokens.bin         flat little-endian uint16 tokens
  losses.json        {"G1": [3 losses], "G2": [3 losses], "hyper": {...}}: torch.optim.AdamW steps
                     (weight decay on every parameter, global-norm clipping) from those weights on
                     the fixed order of docs/runtime_executor.md: at step k sequence g = k*G + j has
                     inputs tokens[g*S : g*S+S] and targets tokens[g*S+1 : g*S+S+1]; the loss is the
                     mean over the G*S targets, from the forward before the update.
The model is LlamaForCausalLM written with torch ops (kernels_reference.py; transformers is not needed).
OUT_DIR/mistral/ and OUT_DIR/qwen2/ hold the same four files for a tiny Mistral (sliding window 16)
and a tiny Qwen2 (q/k/v biases), from the same seed.
"""
import json
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels_reference as ref  # noqa: E402  (HF building blocks; importing runs nothing else)

torch.set_num_threads(1)

SEQ = 32
STEPS = 3
HYPER = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=0.5)


def config_json(cfg):
    family = cfg.get("family", "llama")
    arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}[family]
    c = {
        "architectures": [arch], "model_type": family,
        "hidden_size": cfg["hidden"], "intermediate_size": cfg["ffn"],
        "num_attention_heads": cfg["heads"], "num_key_value_heads": cfg["kv_heads"], "head_dim": cfg["head_dim"],
        "num_hidden_layers": cfg["layers"], "vocab_size": cfg["vocab"], "max_position_embeddings": 128,
        "rms_norm_eps": cfg["eps"], "rope_theta": cfg["theta"],
        "tie_word_embeddings": False, "hidden_act": "silu",
    }
    rs = cfg["rope_scaling"]
    if rs is not None:
        c["rope_scaling"] = {"rope_type": "llama3", "factor": rs["factor"], "low_freq_factor": rs["low_freq_factor"],
                             "high_freq_factor": rs["high_freq_factor"],
                             "original_max_position_embeddings": rs["original_max_position_embeddings"]}
    if family == "mistral":
        c["sliding_window"] = cfg["window"]
    if family == "qwen2":
        c["use_sliding_window"] = False  # Qwen2's q/k/v biases are implied by the model type
    return c


# The other dense rotary families the executor names parameters for, each differing from the tiny
# Llama in what the comparison must exercise: Mistral's sliding window (16 of the 32 positions, so it
# masks), Qwen2's q/k/v biases; both with plain RoPE (no llama3 scaling).
FAMILIES = {
    "llama": {},
    "mistral": dict(family="mistral", window=16, rope_scaling=None, theta=10000.0),
    "qwen2": dict(family="qwen2", qkv_bias=True, rope_scaling=None, theta=1000000.0),
}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().to(torch.float32).numpy().tobytes()  # x86: little-endian
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def train(cfg, init, tokens, G):
    params = {k: v.detach().clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.AdamW(list(params.values()), lr=HYPER["lr"], betas=(HYPER["beta1"], HYPER["beta2"]),
                            eps=HYPER["eps"], weight_decay=HYPER["weight_decay"])
    losses = []
    for k in range(STEPS):
        rows = [tokens[(k * G + j) * SEQ: (k * G + j) * SEQ + SEQ + 1] for j in range(G)]
        batch = torch.stack(rows)
        inputs, targets = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
        opt.zero_grad()
        loss = ref.llama_loss(cfg, params, False, inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), max_norm=HYPER["grad_clip"])
        opt.step()
        losses.append(float(loss))
    # A usable reference: finite losses near ln(vocab) for a freshly initialised model (tokens are
    # uniform), so a broken reference cannot silently pass the C++ comparison.
    assert all(math.isfinite(l) for l in losses), f"non-finite reference losses {losses}"
    assert abs(losses[0] - math.log(cfg["vocab"])) < 1.0, f"step-0 loss {losses[0]} far from ln(vocab)"
    return losses


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: llama_train_reference.py OUT_DIR")
    root = sys.argv[1]
    for family, overrides in FAMILIES.items():
        # The Llama files stay at the top (what the Llama tests read); the others in a subfolder each.
        out = root if family == "llama" else os.path.join(root, family)
        os.makedirs(out, exist_ok=True)
        torch.manual_seed(4321)
        cfg = dict(ref.LLAMA)
        cfg.update(overrides)
        cfg["seq"] = SEQ
        init = ref.llama_parameters(cfg, tied=False)
        tokens = torch.randint(0, cfg["vocab"], (STEPS * 2 * SEQ + 1,), dtype=torch.int64)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(config_json(cfg), f, indent=1)
        write_safetensors(os.path.join(out, "model.safetensors"), init)
        with open(os.path.join(out, "tokens.bin"), "wb") as f:
            f.write(tokens.to(torch.int32).numpy().astype("<u2").tobytes())
        result = {"G1": train(cfg, init, tokens, 1), "G2": train(cfg, init, tokens, 2), "hyper": HYPER, "seq_len": SEQ}
        with open(os.path.join(out, "losses.json"), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
