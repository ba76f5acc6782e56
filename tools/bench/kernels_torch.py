#!/usr/bin/env python3
"""PyTorch's side of //core/kernels/cuda:kernels_benchmark: the same GPT-2
124M shapes (C=768, 12 heads, T=1024, vocab 50257 padded to 50304, bf16
activations), one line per op in kernels_benchmark's format, so each weft
kernel has the time of what PyTorch runs for it beside it. Attention runs
with each SDPA backend PyTorch offers (default, flash, cudnn, efficient),
which also says what torch.compile's step gets for attention; layernorm
and the loss also run through torch.compile (its generated kernels, as in
the compiled step; --no_compile skips them).

    python3 tools/bench/kernels_torch.py --batch=32 [--iters=20] [--only=attention]

Needs torch; not part of the build or the tests. --device=cpu (small
--batch) only checks that the script runs.
"""
import argparse
import contextlib
import time

import torch
import torch.nn.functional as F

C, NH, T, V, VP, LAYERS = 768, 12, 1024, 50257, 50304, 12


class Bench:
    def __init__(self, device, iters, only):
        self.device, self.iters, self.only = device, iters, only

    def run(self, name, flops, nbytes, fn):
        """Mean time of fn over --iters calls after 3 warm-up calls."""
        if self.only not in name:
            return
        try:
            for _ in range(3):
                fn()
            if self.device == "cuda":
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(self.iters):
                    fn()
                stop.record()
                stop.synchronize()
                ms = start.elapsed_time(stop) / self.iters
            else:
                t0 = time.perf_counter()
                for _ in range(self.iters):
                    fn()
                ms = (time.perf_counter() - t0) * 1e3 / self.iters
        except Exception as e:  # a backend this GPU lacks, or a failed compile
            print(f"{name:<38s} unavailable: {str(e).splitlines()[0][:100]}", flush=True)
            return
        line = f"{name:<38s} {ms:9.3f} ms"
        if flops > 0:
            line += f"  {flops / (ms * 1e-3) / 1e12:8.1f} TFLOP/s"
        if nbytes > 0:
            line += f"  {nbytes / (ms * 1e-3) / 1e9:8.1f} GB/s"
        print(line, flush=True)


def noise(shape, device, dtype, scale=1.0):
    return (torch.rand(shape, device=device, dtype=torch.float32) - 0.5).mul_(scale).to(dtype)


def sdpa_backends():
    """(name, context manager) for the default choice and each backend."""
    out = [("default", contextlib.nullcontext)]
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return out
    for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
        if hasattr(SDPBackend, name):
            backend = getattr(SDPBackend, name)
            out.append((name.split("_")[0].lower(), lambda b=backend: sdpa_kernel(b)))
    return out


def bench_attention(b, batch, device):
    hs = C // NH
    fwd_flops = 4.0 * batch * NH * T * T * hs / 2
    q, k, v = (noise((batch, NH, T, hs), device, torch.bfloat16, 2).requires_grad_()
               for _ in range(3))
    dout = noise((batch, NH, T, hs), device, torch.bfloat16)
    for name, ctx in sdpa_backends():
        with ctx():
            b.run(f"attention fwd (torch sdpa, {name})", fwd_flops, 0,
                  lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            try:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            except (RuntimeError, NotImplementedError):
                continue  # reported by the forward's line
            b.run(f"attention bwd (torch sdpa, {name})", 2.5 * fwd_flops, 0,
                  lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))


def bench_gemms(b, bt, device):
    x = noise((bt, C), device, torch.bfloat16)
    w_qkv = noise((3 * C, C), device, torch.bfloat16, 0.1)
    w_fc = noise((4 * C, C), device, torch.bfloat16, 0.1)
    wte = noise((VP, C), device, torch.bfloat16, 0.1)
    dh = noise((bt, 4 * C), device, torch.bfloat16)
    f = 2.0 * bt * C
    b.run("gemm qkv fwd (torch)", f * 3 * C, 0, lambda: x @ w_qkv.T)
    b.run("gemm fc fwd (torch)", f * 4 * C, 0, lambda: x @ w_fc.T)
    b.run("gemm lm_head fwd (torch)", f * VP, 0, lambda: x @ wte.T)
    b.run("gemm fc dw (torch, bf16 out)", f * 4 * C, 0, lambda: dh.T @ x)


def layer_norm(x, w, bias):
    return F.layer_norm(x, (C,), w, bias)


def bench_norms(b, bt, device, compile_too):
    act = 2.0 * bt * C
    x = noise((bt, C), device, torch.bfloat16, 2).requires_grad_()
    w = noise((C,), device, torch.bfloat16, 1).requires_grad_()
    bias = noise((C,), device, torch.bfloat16, 1).requires_grad_()
    dy = noise((bt, C), device, torch.bfloat16)
    variants = [("torch", layer_norm)]
    if compile_too:
        variants.append(("torch.compile", torch.compile(layer_norm)))
    for tag, fn in variants:
        b.run(f"layernorm fwd ({tag})", 0, 2 * act, lambda: fn(x, w, bias))
        try:
            y = fn(x, w, bias)
        except Exception:  # reported by the forward's line
            continue
        b.run(f"layernorm bwd ({tag})", 0, 3 * act,
              lambda: torch.autograd.grad(y, (x, w, bias), dy, retain_graph=True))


def cross_entropy_bf16(logits, targets):
    return F.cross_entropy(logits[:, :V], targets)


def cross_entropy_as_model(logits, targets):
    # gpt_throughput_torch.py's loss: the real columns, upcast to f32.
    return F.cross_entropy(logits[:, :V].float(), targets)


def bench_cross_entropy(b, bt, device, compile_too):
    logits = noise((bt, VP), device, torch.bfloat16, 8).requires_grad_()
    targets = (torch.arange(bt, device=device) * 7919) % V
    # bf16 logits, as weft's fused kernel reads them; the reference model
    # upcasts to f32 first, which torch.compile fuses into its kernels.
    variants = [("torch, bf16", cross_entropy_bf16)]
    if compile_too:
        variants.append(("torch.compile, as the model", torch.compile(cross_entropy_as_model)))
    for tag, fn in variants:
        def step(fn=fn):
            loss = fn(logits, targets)
            torch.autograd.grad(loss, logits)
        b.run(f"cross-entropy fwd+bwd ({tag})", 0, 2 * 2.0 * bt * VP, step)


def bench_adamw(b, device):
    shapes = [(VP, C), (T, C)]
    for _ in range(LAYERS):
        shapes += [(C,), (C,), (3 * C, C), (3 * C,), (C, C), (C,), (C,), (C,), (4 * C, C),
                   (4 * C,), (C, 4 * C), (C,)]
    shapes += [(C,), (C,)]
    params = [torch.nn.Parameter(noise(s, device, torch.float32, 0.1)) for s in shapes]
    for p in params:
        p.grad = noise(p.shape, device, torch.float32, 0.01)
    n = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=1e-4, fused=device == "cuda")
    # Reads grad, param, m, v; writes param, m, v (weft also writes a bf16 copy).
    b.run("adamw (all params, torch fused)", 0, n * (4 * 4 + 3 * 4), opt.step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--no_compile", action="store_true",
                    help="skip the torch.compile variants (layernorm, cross-entropy)")
    args = ap.parse_args()
    device = args.device
    torch.manual_seed(0)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"PyTorch {torch.__version__} on {name}: GPT-2 124M shapes B={args.batch} T={T} C={C} "
          f"NH={NH} V={V}/{VP}, {args.iters} iterations", flush=True)
    b = Bench(device, args.iters, args.only)
    bt = args.batch * T
    bench_gemms(b, bt, device)
    bench_norms(b, bt, device, not args.no_compile)
    bench_attention(b, args.batch, device)
    bench_cross_entropy(b, bt, device, not args.no_compile)
    bench_adamw(b, device)


if __name__ == "__main__":
    main()
