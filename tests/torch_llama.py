"""The Llama of //models/llama written out in PyTorch from its
documentation (Meta's model card and Hugging Face's LlamaForCausalLM), in
weft's parameter names and shapes, for tests/torch_reference.py: pre-norm
blocks with RMSNorm (eps 1e-5), grouped-query causal attention with rotary
embeddings (rotate_half pairing, theta 10000), a SwiGLU MLP (gate and up
rows stacked in one matrix), no biases, an untied head; with --qk_norm,
Qwen3's RMSNorm of each q and k head (weights of head_dim) before RoPE.
"""
import math

import torch
import torch.nn.functional as F


def kv_heads(cfg):
    return cfg.n_kv_head or cfg.n_head


def shapes(cfg, vp):
    c, hd = cfg.d_model, cfg.d_model // cfg.n_head
    kv, f = kv_heads(cfg) * hd, cfg.ffn_hidden
    out = [("embed.wte", (vp, c))]
    for l in range(cfg.n_layer):
        b = f"blocks.{l}."
        out += [(b + "ln1.weight", (c,)), (b + "attn.q.weight", (c, c)),
                (b + "attn.k.weight", (kv, c)), (b + "attn.v.weight", (kv, c)),
                (b + "attn.proj.weight", (c, c)), (b + "ln2.weight", (c,)),
                (b + "mlp.gate_up.weight", (2 * f, c)), (b + "mlp.down.weight", (c, f))]
        if cfg.qk_norm:
            out += [(b + "attn.q_norm.weight", (hd,)), (b + "attn.k_norm.weight", (hd,))]
    return out + [("ln_f.weight", (c,)), ("lm_head.weight", (vp, c))]


def decays(name, t):
    """weft decays matrices (projections, embedding, head), not norms."""
    return t.dim() >= 2


def random_weights(cfg, vp, seed):
    g = torch.Generator().manual_seed(seed)
    w = {}
    for name, shape in shapes(cfg, vp):
        t = torch.randn(shape, generator=g) * 0.02
        if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight", "norm.weight")):
            t = 1.0 + t * 5  # around one, not exactly one
        w[name] = t
    w["embed.wte"][cfg.vocab:] = 0  # padding rows are zero on both sides
    w["lm_head.weight"][cfg.vocab:] = 0
    return w


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotary(t, hd, theta):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.outer(torch.arange(t, dtype=torch.float64), inv)
    emb = torch.cat((ang, ang), -1)
    return emb.cos().float(), emb.sin().float()


def rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def logits_of(p, idx, cfg):
    b, t = idx.shape
    c, nh, g = cfg.d_model, cfg.n_head, kv_heads(cfg)
    hd, f = c // nh, cfg.ffn_hidden
    cos, sin = rotary(t, hd, cfg.rope_theta)
    x = p["embed.wte"][idx]
    for l in range(cfg.n_layer):
        pre = f"blocks.{l}."
        h = rms_norm(x, p[pre + "ln1.weight"])
        q = (h @ p[pre + "attn.q.weight"].T).view(b, t, nh, hd).transpose(1, 2)
        k = (h @ p[pre + "attn.k.weight"].T).view(b, t, g, hd).transpose(1, 2)
        v = (h @ p[pre + "attn.v.weight"].T).view(b, t, g, hd).transpose(1, 2)
        if cfg.qk_norm:
            q, k = rms_norm(q, p[pre + "attn.q_norm.weight"]), rms_norm(k, p[pre + "attn.k_norm.weight"])
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k, v = k.repeat_interleave(nh // g, dim=1), v.repeat_interleave(nh // g, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + y @ p[pre + "attn.proj.weight"].T
        h = rms_norm(x, p[pre + "ln2.weight"])
        gu = h @ p[pre + "mlp.gate_up.weight"].T
        x = x + (F.silu(gu[..., :f]) * gu[..., f:]) @ p[pre + "mlp.down.weight"].T
    x = rms_norm(x, p["ln_f.weight"])
    return x @ p["lm_head.weight"][:cfg.vocab].T  # the padded rows never reach the loss


def losses(p, idx, targets, cfg):
    """(mean cross-entropy, 0: no auxiliary losses)."""
    logits = logits_of(p, idx, cfg)
    return F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1)), torch.zeros(())
