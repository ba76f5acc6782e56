#!/usr/bin/python3
"""weft against an independent implementation: PyTorch (Debian's
python3-torch) trains the same GPT from the same weights on the same batches,
and every step's loss, learning rate and gradient norm and the final weights
must agree.

The parity tests compare weft with itself (N ranks against one process);
this compares it with the textbook formulas as PyTorch writes them:
nn.functional attention/GELU(tanh)/LayerNorm/cross-entropy, autograd,
torch.optim.AdamW with decay on matrices only, clip_grad_norm_, gradient
accumulation, and llm.c's learning-rate schedule (0-based steps: linear
warmup, then cosine from the peak at the first step after warmup). A weft
bug in any of them moves the curve by far more than float32 rounding.

    torch_reference.py --train=CMD --ckpt=CMD --workdir=DIR [--weft_runs="FLAGS;FLAGS"]
        [--device=cuda] [--corpus=TEXT]

The weights start from a random llm.c file (every bias and LayerNorm
parameter perturbed, so no gradient path is trivially zero) that weft reads
with --init_from; the tokens are a character-level shard of a real text,
read in order (--shuffle=false), so step s takes windows (s-1)*G .. s*G-1,
and the validation loss after the last step is compared too.
Exits non-zero and names the first disagreement.
"""
import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt  # noqa: E402  (the models, beside this file)
import torch_llama  # noqa: E402

MODEL = torch_gpt  # or torch_llama (--model=llama)

SHARD_MAGIC = 20240520


def write_shard(path, tokens, vocab):
    header = np.zeros(256, dtype="<i4")
    header[:4] = [SHARD_MAGIC, 1, len(tokens), vocab]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def char_tokens(corpus, limit):
    text = open(corpus, encoding="utf-8", errors="replace").read()[:limit]
    chars = sorted(set(text))
    ids = {c: i for i, c in enumerate(chars)}
    return [ids[c] for c in text], chars


def lr_at(step0, args):
    """llm.c's schedule, 0-based: warmup (step0+1)/W, then decay from the peak."""
    if step0 < args.warmup:
        return args.lr * (step0 + 1) / args.warmup
    ratio = (step0 - args.warmup) / (args.steps - args.warmup)
    shape = 0.5 * (1 + math.cos(math.pi * ratio)) if args.schedule == "cosine" else 1 - ratio
    return args.min_lr + shape * (args.lr - args.min_lr)


def torch_run(w0, tokens, args):
    p = {k: v.clone().requires_grad_(True) for k, v in w0.items()}
    decay = [v for k, v in p.items() if MODEL.decays(k, v)]
    no_decay = [v for k, v in p.items() if not MODEL.decays(k, v)]
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    if args.optimizer == "adamw":
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    else:  # SGD's decay is PyTorch's: added to the gradient before momentum
        opt = torch.optim.SGD(groups, lr=args.lr, momentum=0.9, nesterov=True, foreach=False)
    t, g, m = args.seq_len, args.global_batch, args.micro_batch
    data = torch.tensor(tokens, dtype=torch.long)
    rows = []
    for s in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(s, args)
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for first in range(s * g, (s + 1) * g, m):
            win = torch.stack([data[i * t:i * t + t + 1] for i in range(first, first + m)])
            ce, moe = MODEL.losses(p, win[:, :-1], win[:, 1:], args)
            # The task loss averages over the global batch; the MoE terms
            # are per-token losses (core/nn/moe.h), not part of the logged loss.
            (ce * (m / g) + moe / (g * t)).backward()
            loss_sum += ce.item() * (m / g)
        norm = torch.nn.utils.clip_grad_norm_(list(p.values()), args.grad_clip)
        opt.step()
        rows.append({"step": s + 1, "loss": loss_sum, "lr": lr_at(s, args),
                     "grad_norm": float(norm)})
    return rows, {k: v.detach() for k, v in p.items()}


def torch_eval(p, tokens, args):
    """Mean loss over the first eval_samples windows of the validation split,
    with every expert choice kept (capacity bounds training only)."""
    t = args.seq_len
    data = torch.tensor(tokens, dtype=torch.long)
    with torch.no_grad():
        win = torch.stack([data[i * t:i * t + t + 1] for i in range(args.eval_samples)])
        dropless = argparse.Namespace(**{**vars(args), "capacity_factor": 0.0})
        return MODEL.losses(p, win[:, :-1], win[:, 1:], dropless)[0].item()


def moe_flags(args):
    if args.moe_every == 0:
        return []
    return [f"--moe_every={args.moe_every}", f"--num_experts={args.num_experts}",
            f"--top_k={args.top_k}", f"--capacity_factor={args.capacity_factor}",
            f"--moe_aux_loss_coef={args.aux_coef}", f"--moe_z_loss_coef={args.z_coef}",
            f"--moe_routing_groups={args.routing_groups}"]


def model_flags(args):
    if args.model == "gpt":
        return [f"--max_seq_len={args.seq_len}", *moe_flags(args)]
    flags = [f"--max_seq_len={args.seq_len}", f"--n_kv_head={args.n_kv_head}",
             f"--ffn_hidden={args.ffn_hidden}", f"--rope_theta={args.rope_theta}",
             "--tie_weights=false", f"--qk_norm={'true' if args.qk_norm else 'false'}"]
    if args.llama_experts > 0:
        flags += [f"--num_experts={args.llama_experts}", f"--top_k={args.top_k}",
                  f"--moe_ffn_hidden={args.moe_ffn_hidden}",
                  f"--router_score={args.router_score}",
                  f"--norm_topk_prob={'true' if args.norm_topk_prob else 'false'}",
                  f"--shared_expert_hidden={args.shared_hidden}",
                  f"--capacity_factor={args.capacity_factor}",
                  f"--moe_aux_loss_coef={args.aux_coef}", f"--moe_z_loss_coef={args.z_coef}",
                  f"--moe_routing_groups={args.routing_groups}"]
    return flags


def weft_run(w_file, data_dir, out_dir, args, extra):
    metrics = os.path.join(out_dir, "metrics.jsonl")
    ckpt = os.path.join(out_dir, "ckpt")
    cmd = shlex.split(args.train) + [
           f"--data={data_dir}", f"--init_from={w_file}", f"--device={args.device}",
           "--shuffle=false", "--quiet", "--log_every=1", f"--eval_samples={args.eval_samples}",
           f"--steps={args.steps}", f"--seq_len={args.seq_len}",
           f"--global_batch={args.global_batch}", f"--micro_batch={args.micro_batch}",
           f"--n_layer={args.n_layer}", f"--n_head={args.n_head}", f"--d_model={args.d_model}",
           f"--lr={args.lr}", f"--min_lr={args.min_lr}", f"--warmup_steps={args.warmup}",
           f"--weight_decay={args.weight_decay}", f"--grad_clip={args.grad_clip}",
           f"--optim.name={args.optimizer}", "--momentum=0.9", "--nesterov=true",
           f"--lr_schedule={args.schedule}", *model_flags(args),
           f"--metrics_out={metrics}", f"--checkpoint_dir={ckpt}", "--num_workers=1"] + extra
    print("weft:", " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, timeout=600)
    fmt = "safetensors" if w_file.endswith(".safetensors") else "llmc"
    final = os.path.join(out_dir, "final." + fmt)
    subprocess.run(shlex.split(args.ckpt) + ["export", ckpt, f"--format={fmt}", f"--out={final}"],
                   check=True, timeout=120)
    rows = [json.loads(line) for line in open(metrics)]
    val = [r["val_loss"] for r in rows if "val_loss" in r]
    return [r for r in rows if "loss" in r and "step" in r], val, final


def compare(label, ref, got, ref_w, got_w, ref_val, got_val, args):
    failures = []
    print(f"{label}: val_loss after step {args.steps}: torch {ref_val:.7f}, weft {got_val}")
    if len(got_val) != 1 or not abs(got_val[0] - ref_val) <= args.loss_rtol * ref_val:
        failures.append(f"val_loss: torch {ref_val:.9g}, weft {got_val} (one evaluation "
                        f"within {args.loss_rtol:g})")
    print(f"{label}: step  loss(torch)   loss(weft)    lr(torch)   lr(weft)  norm(torch) norm(weft)")
    by_step = {r["step"]: r for r in got}
    for r in ref:
        wr = by_step.get(r["step"])
        if wr is None:
            failures.append(f"step {r['step']}: no weft metrics line")
            continue
        print(f"{label}: {r['step']:4d}  {r['loss']:.7f}  {wr['loss']:.7f}  {r['lr']:.6g}  "
              f"{wr['lr']:.6g}  {r['grad_norm']:.6f}  {wr.get('grad_norm', float('nan')):.6f}")
        checks = [("loss", r["loss"], wr["loss"], args.loss_rtol),
                  ("lr", r["lr"], wr["lr"], 1e-6),
                  ("grad_norm", r["grad_norm"], wr.get("grad_norm", float("nan")), args.norm_rtol)]
        for what, a, b, rtol in checks:
            if not abs(a - b) <= rtol * abs(a):
                failures.append(f"step {r['step']} {what}: torch {a:.9g}, weft {b:.9g} "
                                f"(relative {abs(a - b) / abs(a):.3g} > {rtol:g})")
    # A tensor-parallel checkpoint keeps packed sections apart ((2, F, C) for
    # gate_up): the same row-major values.
    got_w = {k: got_w[k].reshape(ref_w[k].shape) for k in ref_w}
    worst = max(((ref_w[k] - got_w[k]).abs().max().item() / ref_w[k].abs().max().item(), k)
                for k in ref_w)
    print(f"{label}: largest weight difference after {args.steps} steps: "
          f"{worst[0]:.3g} of {worst[1]}'s largest magnitude")
    if not worst[0] <= args.weight_rtol:
        failures.append(f"final weights: {worst[1]} differs by {worst[0]:.3g} of its largest "
                        f"magnitude (> {args.weight_rtol:g})")
    return failures


def greedy_check(args, vp, chars, work):
    """//models/gpt:sample's greedy text from llm.c weights, against PyTorch's
    argmax over the last seq_len positions, past the window (so the KV cache
    and the shifted recompute both run). The embedding is scaled up so the
    top two logits stay apart: float rounding cannot flip an argmax. Larger
    attention and MLP weights make the text depend on the context (with the
    defaults it repeats one character)."""
    w = torch_gpt.random_weights(args, vp, seed=99)
    for name in w:
        if name == "ln_f.weight":
            w[name] *= 30
        elif name.endswith(("qkv.weight", "fc.weight", "mlp.proj.weight")):
            w[name] *= 10
    path = os.path.join(work, "sample.bin")
    torch_gpt.write_llmc(path, w, args, vp)
    tok = os.path.join(work, "tokenizer.txt")
    with open(tok, "w") as f:  # CharTokenizer's file: code points in id order
        f.write(f"weft-tokenizer char v1\n{len(chars)}\n" + "".join(f"{ord(c)}\n" for c in chars))
    ids = {c: i for i, c in enumerate(chars)}
    prompt = "The"
    seq = [ids[c] for c in prompt]
    margin = float("inf")
    with torch.no_grad():
        for _ in range(args.sample_tokens):
            window = torch.tensor([seq[-args.seq_len:]])
            logits = torch_gpt.logits_of(w, window, args)[0, -1]
            top2 = logits.topk(2).values
            margin = min(margin, (top2[0] - top2[1]).item())
            seq.append(int(logits.argmax()))
    want = "".join(chars[i] for i in seq)
    failures = [] if margin > 1e-3 else [f"greedy check: top-2 logit gap {margin:.3g} is too "
                                         "small to tell rounding from a bug; change the weights"]
    for kv in ("true", "false"):
        out = subprocess.run(shlex.split(args.sample) + [
            f"--init_from={path}", f"--tokenizer={tok}", f"--prompt={prompt}", "--temperature=0",
            f"--tokens={args.sample_tokens}", f"--kv_cache={kv}", f"--device={args.device}"],
            check=True, timeout=120, capture_output=True, text=True).stdout
        got = out[:-1] if out.endswith("\n") else out
        print(f"greedy (kv_cache={kv}, smallest top-2 logit gap {margin:.3g}): "
              f"{'same' if got == want else 'DIFFERENT'} {len(seq)} characters {want!r}")
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            failures.append(f"greedy sample (kv_cache={kv}) differs from character {at}: "
                            f"weft {got[at:at + 20]!r}, torch {want[at:at + 20]!r}")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True, help="the trainer's command line")
    ap.add_argument("--model", choices=["gpt", "llama"], default="gpt",
                    help="the trainer's model: //models/gpt:train or //models/llama:train")
    ap.add_argument("--n_kv_head", type=int, default=2, help="llama: K/V heads")
    ap.add_argument("--ffn_hidden", type=int, default=96, help="llama: SwiGLU hidden size")
    ap.add_argument("--rope_theta", type=float, default=10000.0, help="llama")
    ap.add_argument("--qk_norm", action="store_true", help="llama: Qwen3's QK-norm")
    ap.add_argument("--ckpt", required=True, help="//tools:ckpt's command line")
    ap.add_argument("--sample", default="", help="//models/gpt:sample's command line: "
                    "also compare greedy text")
    ap.add_argument("--sample_tokens", type=int, default=45)
    ap.add_argument("--device", default="cpu", help="weft's device; PyTorch runs on the CPU")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--corpus", default="/usr/share/games/fortunes/fortunes")
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--schedule", choices=["cosine", "linear"], default="cosine")
    ap.add_argument("--steps", type=int, default=12)
    # Not a multiple of the micro-batch: the last evaluation batch is part padding.
    ap.add_argument("--eval_samples", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min_lr", type=float, default=3e-4)
    ap.add_argument("--weight_decay", type=float, default=0.1)
    ap.add_argument("--grad_clip", type=float, default=1.0)
    ap.add_argument("--global_batch", type=int, default=8)
    ap.add_argument("--micro_batch", type=int, default=4)
    ap.add_argument("--seq_len", type=int, default=32)
    ap.add_argument("--n_layer", type=int, default=2)
    ap.add_argument("--n_head", type=int, default=4)
    ap.add_argument("--d_model", type=int, default=64)
    # Mixture of experts (core/nn/moe.h) in every moe_every-th block; 0: dense.
    ap.add_argument("--moe_every", type=int, default=0)
    ap.add_argument("--num_experts", type=int, default=4)
    ap.add_argument("--top_k", type=int, default=2)
    ap.add_argument("--capacity_factor", type=float, default=0.0)
    ap.add_argument("--aux_coef", type=float, default=0.01)
    ap.add_argument("--z_coef", type=float, default=0.0)
    ap.add_argument("--routing_groups", type=int, default=1)
    # The Llama's mixture of experts (every block; 0: dense), with --top_k,
    # --capacity_factor, --aux_coef, --z_coef and --routing_groups above.
    ap.add_argument("--llama_experts", type=int, default=0)
    ap.add_argument("--moe_ffn_hidden", type=int, default=32)
    ap.add_argument("--router_score", choices=["softmax", "sigmoid"], default="softmax")
    ap.add_argument("--norm_topk_prob", type=int, default=1, help="1: gates renormalised")
    ap.add_argument("--shared_hidden", type=int, default=0, help="a shared expert's hidden size")
    ap.add_argument("--loss_rtol", type=float, default=2e-5)
    ap.add_argument("--norm_rtol", type=float, default=1e-4)
    # Adam divides by sqrt(v): float rounding in elements with tiny gradients
    # reaches ~1e-4 of a tensor's largest weight in 12 steps; an LR schedule
    # one step off moved them 4e-2.
    ap.add_argument("--weight_rtol", type=float, default=1e-3)
    # One weft run per entry: extra flags (e.g. "--nproc_per_node=2 --strategy=fsdp").
    ap.add_argument("--weft_runs", default="")
    args = ap.parse_args()
    global MODEL
    MODEL = torch_llama if args.model == "llama" else torch_gpt
    torch.manual_seed(0)
    torch.set_num_threads(1)

    tokens, chars = char_tokens(args.corpus, 200_000)
    args.vocab = len(chars)
    vp = -(-args.vocab // 64) * 64  # weft's default vocab_pad_multiple
    need = args.steps * args.global_batch * args.seq_len + 1
    if len(tokens) < need + args.eval_samples * args.seq_len + 1:
        raise SystemExit(f"{args.corpus}: {len(tokens)} tokens, need "
                         f"{need + args.eval_samples * args.seq_len + 1}")
    os.makedirs(args.workdir, exist_ok=True)
    data_dir = os.path.join(args.workdir, "data")
    os.makedirs(data_dir, exist_ok=True)
    write_shard(os.path.join(data_dir, "train_000000.bin"), tokens[:need], args.vocab)
    val_tokens = tokens[need:need + args.eval_samples * args.seq_len + 1]
    write_shard(os.path.join(data_dir, "val_000000.bin"), val_tokens, args.vocab)
    w0 = MODEL.random_weights(args, vp, seed=1234)
    if args.moe_every > 0 or args.model != "gpt":  # llm.c's format: GPT-2 only
        w_file = os.path.join(args.workdir, "init.safetensors")
        torch_gpt.write_safetensors(w_file, w0, {"format": "torch_reference"})
    else:
        w_file = os.path.join(args.workdir, "init.bin")
        torch_gpt.write_llmc(w_file, w0, args, vp)

    ref, ref_w = torch_run(w0, tokens[:need], args)
    ref_val = torch_eval(ref_w, val_tokens, args)
    failures = []
    runs = [r for r in args.weft_runs.split(";")] if args.weft_runs else [""]
    for i, extra in enumerate(runs):
        out_dir = os.path.join(args.workdir, f"run{i}")
        shutil.rmtree(out_dir, ignore_errors=True)  # a fresh checkpoint directory
        os.makedirs(out_dir)
        got, got_val, final = weft_run(w_file, data_dir, out_dir, args, shlex.split(extra))
        label = extra or "one process"
        got_w = (torch_gpt.read_safetensors(final) if final.endswith(".safetensors")
                 else torch_gpt.read_llmc(final, args, vp))
        failures += [f"[{label}] {f}" for f in compare(label, ref, got, ref_w, got_w, ref_val,
                                                       got_val, args)]
    if args.sample:
        failures += greedy_check(args, vp, chars, args.workdir)
    if failures:
        print("FAIL: weft disagrees with PyTorch:\n  " + "\n  ".join(failures[:20]))
        sys.exit(1)
    moe = (f", MoE every {args.moe_every} (capacity {args.capacity_factor:g}, "
           f"{args.routing_groups} routing groups)" if args.moe_every else "")
    if args.llama_experts:
        moe = (f", {args.llama_experts} SwiGLU experts top-{args.top_k} {args.router_score}"
               f"{' renormalised' if args.norm_topk_prob else ' raw'}"
               f"{f' shared {args.shared_hidden}' if args.shared_hidden else ''} (capacity "
               f"{args.capacity_factor:g}, {args.routing_groups} routing groups)")
    print(f"PASS: {len(runs)} weft run(s) match PyTorch {torch.__version__} for {args.steps} "
          f"steps of {args.optimizer} with {args.schedule} decay{moe}")


if __name__ == "__main__":
    main()
