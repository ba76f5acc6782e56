"""The Llama of //models/llama written out in PyTorch from its
documentation (Meta's model card and Hugging Face's LlamaForCausalLM), in
weft's parameter names and shapes, for tests/torch_reference.py: pre-norm
blocks with RMSNorm (eps 1e-5), grouped-query causal attention with rotary
embeddings (rotate_half pairing, theta 10000), a SwiGLU MLP (gate and up
rows stacked in one matrix), no biases, an untied head; with --qk_norm,
Qwen3's RMSNorm of each q and k head (weights of head_dim) before RoPE.

With --llama_experts=E, every block's MLP is a mixture of E SwiGLU experts
(Mixtral's layout, core/nn/moe.h): a bias-free router with softmax or
sigmoid scores, top-k choices with the gates renormalised over the k or
raw, capacity drops by choice rank then token in routing groups of samples
s % groups, an optional shared SwiGLU expert every token passes through,
and the switch balance loss and router z-loss as per-token losses.
"""
import math

import torch
import torch.nn.functional as F


def kv_heads(cfg):
    return cfg.n_kv_head or cfg.n_head


def is_moe(cfg):
    return getattr(cfg, "llama_experts", 0) > 0


def mlp_shapes(cfg, b):
    c, f = cfg.d_model, cfg.ffn_hidden
    if not is_moe(cfg):
        return [(b + "mlp.gate_up.weight", (2 * f, c)), (b + "mlp.down.weight", (c, f))]
    e, h = cfg.llama_experts, cfg.moe_ffn_hidden
    out = [(b + "mlp.router.weight", (e, c)),
           (b + "mlp.experts.gate_up_weight", (e, 2, h, c)),
           (b + "mlp.experts.down_weight", (e, c, h))]
    if cfg.shared_hidden > 0:
        s = cfg.shared_hidden
        out += [(b + "mlp.shared.gate_up.weight", (2 * s, c)),
                (b + "mlp.shared.down.weight", (c, s))]
    return out


def shapes(cfg, vp):
    c, hd = cfg.d_model, cfg.d_model // cfg.n_head
    kv = kv_heads(cfg) * hd
    out = [("embed.wte", (vp, c))]
    for l in range(cfg.n_layer):
        b = f"blocks.{l}."
        out += [(b + "ln1.weight", (c,)), (b + "attn.q.weight", (c, c)),
                (b + "attn.k.weight", (kv, c)), (b + "attn.v.weight", (kv, c)),
                (b + "attn.proj.weight", (c, c)), (b + "ln2.weight", (c,))]
        out += mlp_shapes(cfg, b)
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


def swiglu(x, gate_up, down):
    h = gate_up.shape[0] // 2
    gu = x @ gate_up.T
    return (F.silu(gu[..., :h]) * gu[..., h:]) @ down.T


def moe(p, pre, x, cfg, extra):
    """The mixture of SwiGLU experts on x (B, T, C); adds the balance and
    z-loss terms, summed per token, to extra[0]."""
    b, t, c = x.shape
    e, k = cfg.llama_experts, cfg.top_k
    logits = x @ p[pre + "router.weight"].T  # (B, T, E), no bias
    scores = logits.sigmoid() if cfg.router_score == "sigmoid" else logits.softmax(-1)
    lse = torch.logsumexp(logits, -1)
    top_s, top_i = scores.topk(k, dim=-1)  # ties: the lower index first
    gates = top_s / top_s.sum(-1, keepdim=True) if cfg.norm_topk_prob else top_s
    y = torch.zeros_like(x)
    for g in range(cfg.routing_groups):
        rows = list(range(g, b, cfg.routing_groups))  # sample s is in group s % groups
        xs, ix, gs, ps = (x[rows].reshape(-1, c), top_i[rows].reshape(-1, k),
                          gates[rows].reshape(-1, k), scores[rows].reshape(-1, e))
        n = xs.shape[0]
        # Capacity: every token's first choice (tokens in order), then every second, ...
        cap = (max(1, math.ceil(cfg.capacity_factor * n * k / e)) if cfg.capacity_factor > 0
               else n * k)
        taken, keep = [0] * e, torch.zeros(n, k, dtype=torch.bool)
        for j in range(k):
            for tok in range(n):
                ex = int(ix[tok, j])
                if taken[ex] < cap:
                    taken[ex] += 1
                    keep[tok, j] = True
        out = torch.zeros_like(xs)
        for ex in range(e):
            tok, slot = ((ix == ex) & keep).nonzero(as_tuple=True)
            if len(tok) == 0:
                continue
            gu = p[pre + "experts.gate_up_weight"][ex].reshape(-1, c)  # (2, H, C): gate, then up
            h = swiglu(xs[tok], gu, p[pre + "experts.down_weight"][ex])
            out = out.index_add(0, tok, h * gs[tok, slot].unsqueeze(1))
        y[rows] = out.view(len(rows), t, c)
        # Balance: coef * E * sum_j f_j P_j over the group, as N_g per-token losses.
        f = torch.bincount(ix.reshape(-1), minlength=e).to(x.dtype) / (n * k)
        extra[0] = extra[0] + cfg.aux_coef * e * (f * ps.mean(0)).sum() * n
    extra[0] = extra[0] + cfg.z_coef * (lse ** 2).sum()
    if cfg.shared_hidden > 0:
        y = y + swiglu(x, p[pre + "shared.gate_up.weight"], p[pre + "shared.down.weight"])
    return y


def logits_of(p, idx, cfg, extra=None):
    extra = extra if extra is not None else [torch.zeros(())]
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
        if is_moe(cfg):
            x = x + moe(p, pre + "mlp.", h, cfg, extra)
        else:
            x = x + swiglu(h, p[pre + "mlp.gate_up.weight"], p[pre + "mlp.down.weight"])
    x = rms_norm(x, p["ln_f.weight"])
    return x @ p["lm_head.weight"][:cfg.vocab].T  # the padded rows never reach the loss


def losses(p, idx, targets, cfg):
    """(mean cross-entropy, the MoE terms summed over tokens; 0 when dense)."""
    extra = [torch.zeros(())]
    logits = logits_of(p, idx, cfg, extra)
    return F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1)), extra[0]
