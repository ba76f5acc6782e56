#!/usr/bin/env python3
"""PyTorch reference for //tools/bench:gpt_throughput: the same GPT-2 model
(pre-norm blocks, tied head, vocab padded to 50304, T=1024), batch, bf16
autocast and AdamW, timed the same way (median step after warmup, one loss
read per step). Runs eager (SDPA attention, fused AdamW) and torch.compile.

    python3 tools/bench/gpt_throughput_torch.py --batch 16 --seq_len 1024 --steps 30

Prints one JSON line per mode, with the weft benchmark's fields. Needs torch
and a GPU; it is not part of the build or the tests.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
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
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, heads, d, vocab, t):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(t, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.vocab_real = 50257

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # tied head
        logits = logits[..., : self.vocab_real]
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def run(mode, args):
    torch.manual_seed(0)
    dev = "cuda"
    model = Gpt(args.n_layer, args.n_head, args.d_model, args.padded_vocab, args.seq_len).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    step_fn = model
    if mode == "compile":
        step_fn = torch.compile(model)
    x = torch.randint(0, 50257, (args.batch, args.seq_len), device=dev)
    y = torch.randint(0, 50257, (args.batch, args.seq_len), device=dev)
    times = []
    for i in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()  # one host sync per step, like weft's loss read
        t1 = time.perf_counter()
        if i >= args.warmup:
            times.append((t1 - t0) * 1000)
    times.sort()
    ms = times[len(times) // 2]
    tokens = args.batch * args.seq_len
    flops_per_token = 6 * n_params + 6 * args.n_layer * args.seq_len * args.d_model
    tps = tokens / (ms / 1000)
    print(json.dumps({
        "bench": "gpt_throughput", "impl": f"torch-{mode}", "torch": torch.__version__,
        "global_batch": args.batch, "seq_len": args.seq_len, "step_ms_median": round(ms, 3),
        "tokens_per_s": round(tps, 1), "mfu": round(flops_per_token * tps / (args.peak_tflops * 1e12), 4),
        "peak_mem_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1), "params": n_params}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq_len", type=int, default=1024)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--n_layer", type=int, default=12)
    p.add_argument("--n_head", type=int, default=12)
    p.add_argument("--d_model", type=int, default=768)
    p.add_argument("--padded_vocab", type=int, default=50304)
    p.add_argument("--peak_tflops", type=float, default=989.0)
    p.add_argument("--modes", default="eager,compile")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    for mode in args.modes.split(","):
        run(mode, args)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    main()
