#!/usr/bin/env python3
"""PyTorch reference for a weft training run on real tokens: the same GPT-2
model as gpt_throughput_torch.py (pre-norm, tied head, padded vocab), GPT-2
init (std 0.02, residual projections 0.02/sqrt(2L)), bf16 autocast, AdamW
(0.9, 0.95, eps 1e-8, decay on matrices only), clip 1.0, and weft's LR
schedule (llm.c's: linear warmup, then cosine from the peak toward min_lr;
steps here are 1-based), on an llm.c /
//tools:prepare_data token shard. Batches are random windows, so the curve is
compared statistically with weft's, not step for step.

    python3 tools/bench/gpt_train_torch.py --shard DIR/train_000000.bin \
        --vocab 8192 --steps 200 --batch 16 --seq_len 1024 --lr 6e-4 --warmup 20

Prints one JSON line per step ({"step", "loss", "lr", "step_ms"}). Needs
torch and a GPU; it is not part of the build or the tests.
"""
import argparse
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpt_throughput_torch import Gpt  # noqa: E402


def load_shard(path):
    header = np.fromfile(path, dtype="<i4", count=256)
    if header[0] != 20240520:
        raise SystemExit(f"{path}: magic {header[0]}, expected 20240520 (uint16 tokens)")
    n = int(header[2])
    return np.fromfile(path, dtype="<u2", offset=1024, count=n).astype(np.int64)


def lr_at(step, args):
    if step <= args.warmup:
        return args.lr * step / args.warmup
    progress = min(max((step - 1 - args.warmup) / max(args.steps - args.warmup, 1), 0.0), 1.0)
    return args.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (args.lr - args.min_lr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shard", required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq_len", type=int, default=1024)
    p.add_argument("--n_layer", type=int, default=12)
    p.add_argument("--n_head", type=int, default=12)
    p.add_argument("--d_model", type=int, default=768)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--min_lr", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    tokens = torch.from_numpy(load_shard(args.shard))
    padded = (args.vocab + 127) // 128 * 128
    model = Gpt(args.n_layer, args.n_head, args.d_model, padded, args.seq_len)
    model.vocab_real = args.vocab
    proj_std = 0.02 / math.sqrt(2 * args.n_layer)
    for name, prm in model.named_parameters():
        if prm.dim() >= 2:
            std = proj_std if name.endswith(("proj.weight", "mlp_proj.weight")) else 0.02
            torch.nn.init.normal_(prm, 0.0, std)
        elif name.endswith("bias"):
            torch.nn.init.zeros_(prm)
    model = model.cuda()
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    gen = torch.Generator().manual_seed(args.seed)
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        starts = torch.randint(0, len(tokens) - args.seq_len - 1, (args.batch,), generator=gen)
        win = torch.stack([tokens[s:s + args.seq_len + 1] for s in starts.tolist()]).cuda()
        lr = lr_at(step, args)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(win[:, :-1].contiguous(), win[:, 1:].contiguous())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = loss.item()
        print(json.dumps({"impl": "torch", "step": step, "loss": round(value, 5), "lr": lr,
                          "step_ms": round((time.perf_counter() - t0) * 1000, 2)}), flush=True)


if __name__ == "__main__":
    main()
