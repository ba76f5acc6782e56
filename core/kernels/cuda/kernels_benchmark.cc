// Microbenchmark of the CUDA kernels at GPT-2 124M shapes (C = 768, 12
// heads, T = 1024, vocab 50257 padded to 50304, bf16 activations, f32
// gradients of weights), one line per kernel with the mean time over
// --iters launches (after warm-up) from CUDA events, and TFLOP/s for GEMMs
// and attention or GB/s (bytes a perfect kernel must move) for the rest.
//
//   kernels_benchmark [--batch=8] [--iters=20] [--only=attention]
//
// --only keeps the kernels whose line contains the text. Attention runs once
// per flash tiling (WEFT_FLASH_FWD_TILING / WEFT_FLASH_BWD_TILING, see
// attention_internal.h), so the tilings compare in one process.
//
// Attention FLOPs use the FlashAttention convention: causal forward
// 2 * 2 * B * NH * T^2 * HS / 2, backward 2.5x forward (our deterministic
// backward does 3.5x forward's work, so its raw throughput is 1.4x higher).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/base/check.h"
#include "core/kernels/kernel_ops.h"
#include "core/tensor/stream.h"
#include "core/tensor/tensor.h"

namespace weft {
namespace {

struct Options {
  int64_t batch = 8;
  int iters = 20;
  std::string only;  // run the kernels whose name contains this
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--batch=", 8) == 0) o.batch = std::atoll(argv[i] + 8);
    else if (std::strncmp(argv[i], "--iters=", 8) == 0) o.iters = std::atoi(argv[i] + 8);
    else if (std::strncmp(argv[i], "--only=", 7) == 0) o.only = argv[i] + 7;
    else {
      std::fprintf(stderr, "usage: %s [--batch=8] [--iters=20] [--only=TEXT]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

const Device kGpu = Device::Cuda(0);

Tensor Filled(Shape shape, DType dtype, float value) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)), value);
  absl::StatusOr<Tensor> host = Tensor::FromFloats(v, shape, dtype);
  WEFT_CHECK(host.ok()) << host.status();
  absl::StatusOr<Tensor> dev = host->To(kGpu);
  WEFT_CHECK(dev.ok()) << dev.status();
  return *dev;
}

// Small pseudo-random values, so softmax and GELU see realistic inputs.
Tensor Noise(Shape shape, DType dtype, float scale, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  uint32_t x = seed * 2654435761u + 1;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = scale * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
  }
  absl::StatusOr<Tensor> host = Tensor::FromFloats(v, shape, dtype);
  WEFT_CHECK(host.ok()) << host.status();
  absl::StatusOr<Tensor> dev = host->To(kGpu);
  WEFT_CHECK(dev.ok()) << dev.status();
  return *dev;
}

class Bench {
 public:
  Bench(const Options& o, KernelOps* ops)
      : opts_(o), ops_(ops), stream_(*Stream::Create(kGpu)), ctx_{kGpu, stream_.native()} {}

  const KernelContext& ctx() const { return ctx_; }
  KernelOps& ops() { return *ops_; }

  // Times fn; reports TFLOP/s when flops > 0, GB/s when bytes > 0.
  void Run(const std::string& name, double flops, double bytes,
           const std::function<absl::Status()>& fn) {
    if (name.find(opts_.only) == std::string::npos) return;
    for (int i = 0; i < 3; ++i) WEFT_CHECK_OK(fn());
    Event start = *Event::Create(kGpu, true), stop = *Event::Create(kGpu, true);
    WEFT_CHECK_OK(start.Record(stream_));
    for (int i = 0; i < opts_.iters; ++i) WEFT_CHECK_OK(fn());
    WEFT_CHECK_OK(stop.Record(stream_));
    WEFT_CHECK_OK(stop.Synchronize());
    const double ms = *Event::ElapsedMs(start, stop) / opts_.iters;
    std::printf("%-38s %9.3f ms", name.c_str(), ms);
    if (flops > 0) std::printf("  %8.1f TFLOP/s", flops / (ms * 1e-3) / 1e12);
    if (bytes > 0) std::printf("  %8.1f GB/s", bytes / (ms * 1e-3) / 1e9);
    std::printf("\n");
    std::fflush(stdout);
  }

 private:
  Options opts_;
  KernelOps* ops_;
  Stream stream_;
  KernelContext ctx_;
};

constexpr int64_t kC = 768, kNH = 12, kT = 1024, kV = 50257, kVp = 50304, kLayers = 12;
constexpr DType kBf16 = DType::kBF16, kF32 = DType::kF32;

void BenchGemms(Bench& b, int64_t bt) {
  Tensor x = Noise({bt, kC}, kBf16, 1, 1), h = Noise({bt, 4 * kC}, kBf16, 1, 2);
  Tensor w_qkv = Noise({3 * kC, kC}, kBf16, 0.05f, 3), b_qkv = Noise({3 * kC}, kBf16, 0.1f, 4);
  Tensor w_fc = Noise({4 * kC, kC}, kBf16, 0.05f, 5), b_fc = Noise({4 * kC}, kBf16, 0.1f, 6);
  Tensor w_proj = Noise({kC, 4 * kC}, kBf16, 0.05f, 7), b_proj = Noise({kC}, kBf16, 0.1f, 8);
  Tensor wte = Noise({kVp, kC}, kBf16, 0.05f, 9);
  Tensor qkv = Filled({bt, 3 * kC}, kBf16, 0), fc = Filled({bt, 4 * kC}, kBf16, 0);
  Tensor pre = Filled({bt, 4 * kC}, kBf16, 0), y = Filled({bt, kC}, kBf16, 0);
  Tensor logits = Filled({bt, kVp}, kBf16, 0), dh = Filled({bt, 4 * kC}, kBf16, 0);
  Tensor dw_fc = Filled({4 * kC, kC}, kF32, 0), db_fc = Filled({4 * kC}, kF32, 0);
  const double f = 2.0 * bt * kC;
  KernelOps& ops = b.ops();
  b.Run("gemm qkv fwd +bias", f * 3 * kC, 0, [&] {
    return ops.Gemm(b.ctx(), {.out = qkv, .a = x, .b = w_qkv, .trans_b = true,
                              .epilogue = Epilogue::kBias, .bias = b_qkv});
  });
  b.Run("gemm fc fwd +bias+gelu", f * 4 * kC, 0, [&] {
    return ops.Gemm(b.ctx(), {.out = fc, .a = x, .b = w_fc, .trans_b = true,
                              .epilogue = Epilogue::kBiasGelu, .bias = b_fc, .aux = pre});
  });
  b.Run("gemm proj fwd +bias (K=3072)", f * 4 * kC, 0, [&] {
    return ops.Gemm(b.ctx(), {.out = y, .a = h, .b = w_proj, .trans_b = true,
                              .epilogue = Epilogue::kBias, .bias = b_proj});
  });
  b.Run("gemm lm_head fwd", f * kVp, 0, [&] {
    return ops.Gemm(b.ctx(), {.out = logits, .a = x, .b = wte, .trans_b = true});
  });
  b.Run("gemm fc dx +dgelu+dbias", f * 4 * kC, 0, [&] {
    return ops.Gemm(b.ctx(), {.out = dh, .a = x, .b = w_proj, .epilogue = Epilogue::kDGelu,
                              .aux = pre, .bias_grad = db_fc});
  });
  b.Run("gemm fc dw (bf16 -> f32 +=)", f * 4 * kC, 0, [&] {
    return ops.Gemm(b.ctx(), {.out = dw_fc, .a = dh, .b = x, .trans_a = true,
                              .accumulate = true});
  });
  b.Run("bias grad (M x 3072)", 0, 2.0 * bt * 4 * kC, [&] {
    return ops.BiasGrad(b.ctx(), db_fc, dh);
  });
  // A weight gradient with its bias gradient, from cuBLASLt's BGRADB
  // epilogue or from our column sums after the plain GEMM (WEFT_BIAS_GRAD,
  // read at each call): qkv's and proj's shapes.
  Tensor dqkv = Noise({bt, 3 * kC}, kBf16, 1, 10), dy = Noise({bt, kC}, kBf16, 1, 11);
  Tensor dw_qkv = Filled({3 * kC, kC}, kF32, 0), db_qkv = Filled({3 * kC}, kF32, 0);
  Tensor dw_proj = Filled({kC, 4 * kC}, kF32, 0), db_proj = Filled({kC}, kF32, 0);
  for (const char* source : {"epilogue", "column-sum"}) {
    setenv("WEFT_BIAS_GRAD", source, 1);
    b.Run(std::string("gemm qkv dw +dbias (") + source + ")", f * 3 * kC, 0, [&] {
      return ops.Gemm(b.ctx(), {.out = dw_qkv, .a = dqkv, .b = x, .trans_a = true,
                                .accumulate = true, .a_col_sums = db_qkv});
    });
    b.Run(std::string("gemm proj dw +dbias (") + source + ")", f * 4 * kC, 0, [&] {
      return ops.Gemm(b.ctx(), {.out = dw_proj, .a = dy, .b = h, .trans_a = true,
                                .accumulate = true, .a_col_sums = db_proj});
    });
  }
  unsetenv("WEFT_BIAS_GRAD");
  b.Run("gemm qkv dw (plain)", f * 3 * kC, 0, [&] {
    return ops.Gemm(b.ctx(), {.out = dw_qkv, .a = dqkv, .b = x, .trans_a = true,
                              .accumulate = true});
  });
}

void BenchNorms(Bench& b, int64_t bt) {
  const double act = 2.0 * bt * kC;  // bytes of one bf16 activation
  Tensor x = Noise({bt, kC}, kBf16, 2, 1), r = Noise({bt, kC}, kBf16, 2, 2);
  Tensor w = Noise({kC}, kBf16, 1, 3), bias = Noise({kC}, kBf16, 1, 4);
  Tensor out = Filled({bt, kC}, kBf16, 0), res = Filled({bt, kC}, kBf16, 0);
  Tensor mean = Filled({bt}, kF32, 0), rstd = Filled({bt}, kF32, 1);
  Tensor dx = Filled({bt, kC}, kBf16, 0), dw = Filled({kC}, kF32, 0), db = Filled({kC}, kF32, 0);
  KernelOps& ops = b.ops();
  // Rows kept in registers (the default at C = 768) and reread each sweep
  // (WEFT_LN_KERNEL=reread, read at each launch).
  for (const char* rows : {"resident", "reread"}) {
    setenv("WEFT_LN_KERNEL", rows, 1);
    const std::string tag = std::string(" (") + rows + ")";
    b.Run("layernorm fwd" + tag, 0, 2 * act, [&] {
      return ops.LayerNormForward(b.ctx(), out, mean, rstd, x, w, bias, 1e-5f);
    });
    b.Run("residual + layernorm fwd" + tag, 0, 4 * act, [&] {
      return ops.ResidualLayerNormForward(b.ctx(), res, out, mean, rstd, x, r, w, bias, 1e-5f);
    });
    // One pass: reads dy and x, writes dx (+ the residual read).
    b.Run("layernorm bwd" + tag, 0, 3 * act, [&] {
      return ops.LayerNormBackward(b.ctx(), dx, dw, db, r, x, w, mean, rstd, Tensor());
    });
    b.Run("layernorm bwd + residual grad" + tag, 0, 4 * act, [&] {
      return ops.LayerNormBackward(b.ctx(), dx, dw, db, r, x, w, mean, rstd, res);
    });
  }
  unsetenv("WEFT_LN_KERNEL");
  Tensor big = Noise({bt, 4 * kC}, kBf16, 4, 5), big_out = Filled({bt, 4 * kC}, kBf16, 0);
  b.Run("gelu fwd (M x 3072)", 0, 8 * act, [&] { return ops.GeluForward(b.ctx(), big_out, big); });
  b.Run("gelu bwd (M x 3072)", 0, 12 * act, [&] {
    return ops.GeluBackward(b.ctx(), big_out, big_out, big);
  });
  b.Run("residual add", 0, 3 * act, [&] { return ops.Add(b.ctx(), res, x, r); });
  b.Run("dropout p=0.1 (M x 3072)", 0, 8 * act, [&] {
    return ops.DropoutForward(b.ctx(), big_out, big, 0.1f, {.seed = 42, .sample_size = 1024 * 3072});
  });
}

void BenchAttention(Bench& b, int64_t batch) {
  const int64_t hs = kC / kNH;
  Tensor qkv = Noise({batch, kT, 3 * kC}, kBf16, 2, 1), dout = Noise({batch, kT, kC}, kBf16, 1, 2);
  Tensor out = Filled({batch, kT, kC}, kBf16, 0), lse = Filled({batch, kNH, kT}, kF32, 0);
  Tensor dqkv = Filled({batch, kT, 3 * kC}, kBf16, 0);
  const double fwd = 4.0 * batch * kNH * kT * kT * hs / 2;
  KernelOps& ops = b.ops();
  // Each tiling through the environment variable the dispatch reads at
  // every launch; unset again afterwards (the default).
  int device = 0, major = 0;
  WEFT_CHECK(cudaGetDevice(&device) == cudaSuccess);
  WEFT_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
             cudaSuccess);
  for (const char* tiling :
       {"4x16", "8x16", "4x32", "wgmma-64", "wgmma-128", "wgmma-64-nmajor", "wgmma-128-nmajor",
        "wgmma-64-pipe", "wgmma-128-pipe", "wgmma-64-nmajor-pipe", "wgmma-128-nmajor-pipe",
        "wgmma-64-pipe-k128", "wgmma-128-pipe-k128", "wgmma-64-nmajor-pipe-k128",
        "wgmma-128-nmajor-pipe-k128"}) {
    if (std::strncmp(tiling, "wgmma", 5) == 0 && major != 9) continue;  // sm_90a only
    setenv("WEFT_FLASH_FWD_TILING", tiling, 1);
    b.Run(std::string("attention fwd (flash, bf16, ") + tiling + ")", fwd, 0, [&] {
      return ops.AttentionForward(b.ctx(), out, lse, qkv, kNH);
    });
  }
  unsetenv("WEFT_FLASH_FWD_TILING");
  for (const char* tiling :
       {"4x16", "8x16", "wgmma-64", "wgmma-128", "wgmma-64-nmajor", "wgmma-128-nmajor",
        "wgmma-64-pipe", "wgmma-128-pipe", "wgmma-64-nmajor-pipe", "wgmma-128-nmajor-pipe",
        "fused-dq"}) {
    if (std::strncmp(tiling, "wgmma", 5) == 0 && major != 9) continue;  // sm_90a only
    setenv("WEFT_FLASH_BWD_TILING", tiling, 1);
    b.Run(std::string("attention bwd (flash, bf16, ") + tiling + ")", 2.5 * fwd, 0, [&] {
      return ops.AttentionBackward(b.ctx(), dqkv, dout, qkv, out, lse, kNH);
    });
  }
  unsetenv("WEFT_FLASH_BWD_TILING");
}

void BenchModelEnds(Bench& b, int64_t batch) {
  const int64_t bt = batch * kT;
  std::vector<int32_t> ids(bt);
  for (int64_t i = 0; i < bt; ++i) ids[i] = static_cast<int32_t>((i * 7919) % kV);
  Tensor tokens = *(*Tensor::FromVector<int32_t>(ids, {batch, kT})).To(kGpu);
  Tensor wte = Noise({kVp, kC}, kBf16, 0.1f, 1), wpe = Noise({kT, kC}, kBf16, 0.1f, 2);
  Tensor emb = Filled({batch, kT, kC}, kBf16, 0);
  Tensor dwte = Filled({kVp, kC}, kF32, 0), dwpe = Filled({kT, kC}, kF32, 0);
  KernelOps& ops = b.ops();
  const double act = 2.0 * bt * kC;
  b.Run("embedding fwd", 0, 2 * act, [&] {
    return ops.EmbeddingForward(b.ctx(), emb, tokens, wte, wpe);
  });
  b.Run("embedding bwd (sorted)", 0, act + 8.0 * bt * kC, [&] {
    return ops.EmbeddingBackward(b.ctx(), dwte, dwpe, emb, tokens);
  });
  Tensor logits = Noise({bt, kVp}, kBf16, 8, 3), losses = Filled({bt}, kF32, 0);
  Tensor targets = *(*Tensor::FromVector<int32_t>(ids, {bt})).To(kGpu);
  // Bytes: the logits read once and the gradient written once (the two-pass
  // kernel reads them twice, partly from L2). Unset WEFT_CE_KERNEL is the
  // default: resident where two rows fit an SM.
  for (const char* kernel : {"default", "two-pass", "resident"}) {
    if (std::strcmp(kernel, "default") == 0) {
      unsetenv("WEFT_CE_KERNEL");
    } else {
      setenv("WEFT_CE_KERNEL", kernel, 1);
    }
    b.Run(std::string("cross-entropy fwd+bwd (in place, ") + kernel + ")", 0, 2 * 2.0 * bt * kVp,
          [&] {
            return ops.CrossEntropyForwardBackward(b.ctx(), losses, logits, targets, kV,
                                                   1.0f / bt, true);
          });
  }
  unsetenv("WEFT_CE_KERNEL");
}

void BenchOptimizer(Bench& b) {
  // GPT-2 124M's parameter tensors (tied embedding).
  std::vector<Shape> shapes = {{kVp, kC}, {kT, kC}};
  for (int l = 0; l < kLayers; ++l) {
    for (Shape s : std::vector<Shape>{{kC}, {kC}, {3 * kC, kC}, {3 * kC}, {kC, kC}, {kC},
                                      {kC}, {kC}, {4 * kC, kC}, {4 * kC}, {kC, 4 * kC}, {kC}}) {
      shapes.push_back(s);
    }
  }
  shapes.push_back({kC});
  shapes.push_back({kC});
  std::vector<OptimSegment> segs;
  std::vector<Tensor> grads;
  double n = 0;
  for (const Shape& s : shapes) {
    OptimSegment seg{.master = Noise(s, kF32, 0.1f, 1), .param = Filled(s, kBf16, 0),
                     .grad = Noise(s, kF32, 0.01f, 2), .exp_avg = Filled(s, kF32, 0),
                     .exp_avg_sq = Filled(s, kF32, 0), .weight_decay = s.size() == 2};
    grads.push_back(seg.grad);
    n += static_cast<double>(NumElements(s));
    segs.push_back(std::move(seg));
  }
  Tensor norm = Filled({1}, kF32, 0);
  KernelOps& ops = b.ops();
  std::printf("(%zu parameter tensors, %.1fM parameters)\n", segs.size(), n / 1e6);
  b.Run("grad norm (sum of squares)", 0, 4 * n, [&] {
    return ops.SumSquares(b.ctx(), norm, grads);
  });
  AdamWHyper h;
  h.max_grad_norm = 1.0f;
  h.grad_norm_sq = norm;
  // Reads grad, master, m, v; writes master, m, v and the bf16 copy.
  b.Run("adamw (all params, clipped)", 0, n * (4 * 4 + 3 * 4 + 2), [&] {
    return ops.AdamW(b.ctx(), absl::MakeSpan(segs), h);
  });
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  using namespace weft;
  const Options opts = Parse(argc, argv);
  absl::StatusOr<KernelOps*> ops = GetKernelOps(DeviceType::kCUDA);
  if (!ops.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ops.status().message()).c_str());
    return 1;
  }
  Bench bench(opts, *ops);
  const int64_t bt = opts.batch * kT;
  std::printf("GPT-2 124M shapes: B=%lld T=%lld C=%lld NH=%lld V=%lld/%lld, %d iterations\n",
              static_cast<long long>(opts.batch), static_cast<long long>(kT),
              static_cast<long long>(kC), static_cast<long long>(kNH),
              static_cast<long long>(kV), static_cast<long long>(kVp), opts.iters);
  BenchGemms(bench, bt);
  BenchNorms(bench, bt);
  BenchAttention(bench, opts.batch);
  BenchModelEnds(bench, opts.batch);
  BenchOptimizer(bench);
  return 0;
}
