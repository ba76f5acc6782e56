#!/usr/bin/env python3
"""PyTorch eager CPU reference for //tools/bench:cpu_step: the same shapes
(char GPT, vocab 65, pre-norm blocks, tanh GELU, tied head, causal SDPA; the
Llama blocks: RMSNorm, RoPE, SwiGLU, grouped-query attention with half as
many K/V heads, untied head; the 784-256-128-10 MLP), f32, AdamW (betas 0.9/0.95, wd 0.1), grad clipping 1.0,
one loss read per step, torch.set_num_threads(--threads). Prints the same
lines as cpu_step: "NAME ms" and a JSON line per shape.

    python3 tools/bench/cpu_step_torch.py --threads 2 [--steps 8 --warmup 3] [--full] [--only NAME]

Needs torch; not part of the build or tests.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = [  # name, layers, d, T, batch, heavy (only with --full); layers 0 = MLP
    ("gpt_L2_d128_T64_B8", 2, 128, 64, 8, False),
    ("gpt_L4_d128_T64_B12", 4, 128, 64, 12, False),
    ("gpt_L2_d128_T256_B32", 2, 128, 256, 32, False),
    ("gpt_L4_d256_T128_B16", 4, 256, 128, 16, False),
    ("gpt_L6_d384_T64_B8", 6, 384, 64, 8, False),
    ("gpt_L6_d384_T256_B8", 6, 384, 256, 8, True),
    ("gpt_L2_d128_T64_B64", 2, 128, 64, 64, True),
    ("mlp_784_256_128_10_B64", 0, 0, 0, 64, False),
    ("llama_L2_d128_T64_B16", 2, 128, 64, 16, False, "llama"),
    ("llama_L4_d256_T256_B8", 4, 256, 256, 8, False, "llama"),
]
VOCAB = 65


class Block(nn.Module):
    def __init__(self, d, h, p):
        super().__init__()
        self.h, self.p = h, p
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + F.dropout(self.proj(y.transpose(1, 2).contiguous().view(b, t, c)), self.p)
        h = self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x + F.dropout(h, self.p)


class Gpt(nn.Module):
    def __init__(self, layers, heads, d, t, p):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d)
        self.wpe = nn.Embedding(t, d)
        self.blocks = nn.ModuleList(Block(d, heads, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # tied head
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate(x, cos, sin):  # Hugging Face's rotate_half convention
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, d, h, kv, ffn):
        super().__init__()
        self.h, self.kv, self.hd = h, kv, d // h
        self.ln1, self.ln2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv * self.hd, bias=False)
        self.v = nn.Linear(d, kv * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, ffn, bias=False)
        self.up = nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        h = rms_norm(x, self.ln1)
        q = self.q(h).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        g = self.h // self.kv
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).contiguous().view(b, t, c))
        h = rms_norm(x, self.ln2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, layers, d, t):
        super().__init__()
        h = max(4, d // 64)
        ffn = -(-(2 * 4 * d // 3) // 32) * 32  # Meta's rule, multiple_of 32
        self.wte = nn.Embedding(VOCAB, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, h, h // 2, ffn) for _ in range(layers))
        self.ln_f = nn.Parameter(torch.ones(d))
        self.head = nn.Linear(d, VOCAB, bias=False)
        hd = d // h
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(t).float(), inv)
        self.cos = torch.cat((ang, ang), -1).cos()
        self.sin = torch.cat((ang, ang), -1).sin()

    def forward(self, idx, targets):
        x = self.wte(idx)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        logits = self.head(rms_norm(x, self.ln_f))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)

    def forward(self, x, y):
        h = F.gelu(self.l1(x), approximate="tanh")
        h = F.gelu(self.l2(h), approximate="tanh")
        return F.cross_entropy(self.l3(h), y)


def run(shape, steps, warmup, p):
    name, layers, d, t, b, _ = shape[:6]
    torch.manual_seed(0)
    if len(shape) > 6:
        model = Llama(layers, d, t)
        x = torch.randint(0, VOCAB, (b, t))
        y = torch.randint(0, VOCAB, (b, t))
    elif layers:
        model = Gpt(layers, max(4, d // 64), d, t, p)
        x = torch.randint(0, VOCAB, (b, t))
        y = torch.randint(0, VOCAB, (b, t))
    else:
        model = Mlp()
        x = torch.randn(b, 784)
        y = torch.randint(0, 10, (b,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--full", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--dropout", type=float, default=0.0)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    steps = max(args.steps, args.warmup + 1)
    for shape in SHAPES:
        if (shape[0] != args.only) if args.only else (shape[5] and not args.full):
            continue
        ms = run(shape, steps, args.warmup, args.dropout)
        print(f"{shape[0]:<26s} {ms:9.2f} ms/step")
        print(json.dumps({"bench": "cpu_step", "impl": "torch-eager", "torch": torch.__version__,
                          "shape": shape[0], "threads": args.threads, "dropout": args.dropout,
                          "step_ms_median": round(ms, 3)}), flush=True)


if __name__ == "__main__":
    main()
