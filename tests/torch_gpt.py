"""The GPT of //models/gpt written out in PyTorch from its documentation, in
weft's parameter names and shapes, for tests/torch_reference.py: pre-norm
blocks (LayerNorm eps 1e-5, causal attention, GELU(tanh) MLP), a head tied to
wte, and the mixture-of-experts MLP of core/nn/moe.h (softmax router, top-k,
gates renormalised over k=2, capacity drops by choice rank then token, the
switch balance loss and the router z-loss as per-token losses). Also the
weight files weft reads and writes: llm.c's and safetensors.
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F

LLMC_MODEL_MAGIC = 20240326


def is_moe_layer(l, cfg):
    return cfg.moe_every > 0 and (l + 1) % cfg.moe_every == 0


def expert_hidden(cfg):
    return 4 * cfg.d_model // cfg.top_k  # expert_mlp_ratio 0: mlp_ratio / top_k


def shapes(cfg, vp):
    c, e, h = cfg.d_model, cfg.num_experts, expert_hidden(cfg)
    out = [("embed.wte", (vp, c)), ("embed.wpe", (cfg.seq_len, c))]
    for l in range(cfg.n_layer):
        b = f"blocks.{l}."
        out += [(b + "ln1.weight", (c,)), (b + "ln1.bias", (c,)),
                (b + "attn.qkv.weight", (3 * c, c)), (b + "attn.qkv.bias", (3 * c,)),
                (b + "attn.proj.weight", (c, c)), (b + "attn.proj.bias", (c,)),
                (b + "ln2.weight", (c,)), (b + "ln2.bias", (c,))]
        if is_moe_layer(l, cfg):
            out += [(b + "mlp.router.weight", (e, c)),
                    (b + "mlp.experts.fc_weight", (e, h, c)), (b + "mlp.experts.fc_bias", (e, h)),
                    (b + "mlp.experts.proj_weight", (e, c, h)),
                    (b + "mlp.experts.proj_bias", (e, c))]
        else:
            out += [(b + "mlp.fc.weight", (4 * c, c)), (b + "mlp.fc.bias", (4 * c,)),
                    (b + "mlp.proj.weight", (c, 4 * c)), (b + "mlp.proj.bias", (c,))]
    return out + [("ln_f.weight", (c,)), ("ln_f.bias", (c,))]


def decays(name, t):
    """weft decays matrices (Linear and expert weights, embeddings), not
    biases or LayerNorm parameters."""
    return t.dim() >= 2 and not name.endswith("bias")


def random_weights(cfg, vp, seed):
    g = torch.Generator().manual_seed(seed)
    w = {}
    for name, shape in shapes(cfg, vp):
        t = torch.randn(shape, generator=g) * 0.02
        if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")):
            t = 1.0 + t * 5  # around one, not exactly one
        w[name] = t
    w["embed.wte"][cfg.vocab:] = 0  # padding rows are zero on both sides
    return w


# llm.c's 16 tensors in file order, and their weft names (per layer where stacked).
_LLMC = [("wte", "embed.wte"), ("wpe", "embed.wpe"), ("ln1w", "ln1.weight"),
         ("ln1b", "ln1.bias"), ("qkvw", "attn.qkv.weight"), ("qkvb", "attn.qkv.bias"),
         ("attprojw", "attn.proj.weight"), ("attprojb", "attn.proj.bias"),
         ("ln2w", "ln2.weight"), ("ln2b", "ln2.bias"), ("fcw", "mlp.fc.weight"),
         ("fcb", "mlp.fc.bias"), ("fcprojw", "mlp.proj.weight"), ("fcprojb", "mlp.proj.bias"),
         ("lnfw", "ln_f.weight"), ("lnfb", "ln_f.bias")]


_WHOLE = ("embed.wte", "embed.wpe", "ln_f.weight", "ln_f.bias")


def _llmc_order(cfg):
    """Weft names in llm.c's file order (per-layer tensors stacked)."""
    for _, name in _LLMC:
        yield from [name] if name in _WHOLE else [f"blocks.{l}.{name}" for l in range(cfg.n_layer)]


def write_llmc(path, w, cfg, vp):
    header = np.zeros(256, dtype="<i4")
    header[:8] = [LLMC_MODEL_MAGIC, 3, cfg.seq_len, cfg.vocab, cfg.n_layer, cfg.n_head,
                  cfg.d_model, vp]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for name in _llmc_order(cfg):
            f.write(w[name].numpy().astype("<f4").tobytes())


def read_llmc(path, cfg, vp):
    raw = np.fromfile(path, dtype="<i4", count=256)
    if raw[0] != LLMC_MODEL_MAGIC or raw[1] != 3:
        raise SystemExit(f"{path}: header {raw[:8]}, expected an fp32 llm.c file")
    data = np.fromfile(path, dtype="<f4", offset=1024)
    shape_of = dict(shapes(cfg, vp))
    out, at = {}, 0
    for name in _llmc_order(cfg):
        size = int(np.prod(shape_of[name]))
        out[name] = torch.from_numpy(data[at:at + size].reshape(shape_of[name]).copy())
        at += size
    if at != len(data):
        raise SystemExit(f"{path}: {len(data)} floats, expected {at}")
    return out


def write_safetensors(path, w, metadata):
    header, blobs, at = {"__metadata__": metadata}, [], 0
    for name in sorted(w):
        blob = w[name].numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(w[name].shape),
                        "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        if h["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {h['dtype']}, expected F32")
        b, e = h["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[b:e], dtype="<f4").reshape(h["shape"]).copy())
    return out


def _moe(p, pre, x, cfg, extra):
    """core/nn/moe.h on x (B, T, C); adds the balance and z-loss terms,
    summed per token, to extra[0]."""
    b, t, c = x.shape
    e, k = cfg.num_experts, cfg.top_k
    logits = x @ p[pre + "router.weight"].T  # (B, T, E), no bias
    probs = logits.softmax(-1)
    lse = torch.logsumexp(logits, -1)
    top_p, top_i = probs.topk(k, dim=-1)
    gates = top_p / top_p.sum(-1, keepdim=True) if k == 2 else top_p
    y = torch.zeros_like(x)
    groups = cfg.routing_groups
    for g in range(groups):
        rows = list(range(g, b, groups))  # sample s is in group s % groups
        xs, idx, gs, ps = x[rows].reshape(-1, c), top_i[rows].reshape(-1, k), \
            gates[rows].reshape(-1, k), probs[rows].reshape(-1, e)
        n = xs.shape[0]
        # Capacity: every token's first choice (tokens in order), then every second.
        cap = (max(1, math.ceil(cfg.capacity_factor * n * k / e)) if cfg.capacity_factor > 0
               else n * k)
        taken, keep = [0] * e, torch.zeros(n, k, dtype=torch.bool)
        for j in range(k):
            for tok in range(n):
                ex = int(idx[tok, j])
                if taken[ex] < cap:
                    taken[ex] += 1
                    keep[tok, j] = True
        out = torch.zeros_like(xs)
        for ex in range(e):
            sel = (idx == ex) & keep  # (n, k)
            tok, slot = sel.nonzero(as_tuple=True)
            if len(tok) == 0:
                continue
            h = F.gelu(xs[tok] @ p[pre + "experts.fc_weight"][ex].T +
                       p[pre + "experts.fc_bias"][ex], approximate="tanh")
            h = h @ p[pre + "experts.proj_weight"][ex].T + p[pre + "experts.proj_bias"][ex]
            out = out.index_add(0, tok, h * gs[tok, slot].unsqueeze(1))
        y[rows] = out.view(len(rows), t, c)
        # Balance: coef * E * sum_j f_j P_j over the group, as N_g per-token losses.
        f = torch.bincount(idx.reshape(-1), minlength=e).to(x.dtype) / (n * k)
        extra[0] = extra[0] + cfg.aux_coef * e * (f * ps.mean(0)).sum() * n
    extra[0] = extra[0] + cfg.z_coef * (lse ** 2).sum()
    return y


def logits_of(p, idx, cfg, extra=None):
    b, t = idx.shape
    c, nh = cfg.d_model, cfg.n_head
    extra = extra if extra is not None else [torch.zeros(())]
    x = p["embed.wte"][idx] + p["embed.wpe"][:t]
    for l in range(cfg.n_layer):
        pre = f"blocks.{l}."
        h = F.layer_norm(x, (c,), p[pre + "ln1.weight"], p[pre + "ln1.bias"], 1e-5)
        qkv = h @ p[pre + "attn.qkv.weight"].T + p[pre + "attn.qkv.bias"]
        q, k, v = (z.view(b, t, nh, c // nh).transpose(1, 2) for z in qkv.split(c, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // nh)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + y @ p[pre + "attn.proj.weight"].T + p[pre + "attn.proj.bias"]
        h = F.layer_norm(x, (c,), p[pre + "ln2.weight"], p[pre + "ln2.bias"], 1e-5)
        if is_moe_layer(l, cfg):
            x = x + _moe(p, pre + "mlp.", h, cfg, extra)
        else:
            h = F.gelu(h @ p[pre + "mlp.fc.weight"].T + p[pre + "mlp.fc.bias"], approximate="tanh")
            x = x + h @ p[pre + "mlp.proj.weight"].T + p[pre + "mlp.proj.bias"]
    x = F.layer_norm(x, (c,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return x @ p["embed.wte"][:cfg.vocab].T  # the padded rows never reach the loss


def losses(p, idx, targets, cfg):
    """(mean cross-entropy, the MoE terms summed over tokens)."""
    extra = [torch.zeros(())]
    logits = logits_of(p, idx, cfg, extra)
    ce = F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1))
    return ce, extra[0]
