// KernelOps: the compute kernels every device implements, behind one
// interface so layers dispatch on Device and never on #ifdef.
//
// Conventions (shared by the CPU reference and the CUDA kernels):
// - Tensors are row-major and contiguous; shapes are asserted by the caller
//   (layers) and checked again by implementations, which return
//   InvalidArgument naming the operand on mismatch.
// - "Compute" tensors (activations, weights used by forward) are f32 or bf16;
//   on CPU they are f32. Parameter gradients are f32 or bf16 ("grad dtype");
//   statistics saved for backward (layernorm mean/rstd, attention logsumexp)
//   and losses are always f32.
// - Ops named ...Backward ACCUMULATE into parameter gradients (+=), so
//   gradient accumulation over micro-batches needs no extra pass. Input
//   gradients (dx) are overwritten unless the op says otherwise.
// - Every op is enqueued on ctx.stream and never synchronizes the host.
// - Random numbers (dropout) come from Philox4x32-10 keyed by a DropoutKey
//   (core/kernels/philox.h): the step's seed, and a counter made of each
//   element's sample in the global batch and its place in that sample, so
//   masks do not depend on the launch shape, the device, or how the batch
//   was split over ranks and micro-batches.
#ifndef WEFT_CORE_KERNELS_KERNEL_OPS_H_
#define WEFT_CORE_KERNELS_KERNEL_OPS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/kernels/philox.h"
#include "core/kernels/token_chunks.h"
#include "core/tensor/device.h"
#include "core/tensor/tensor.h"

namespace weft {

struct KernelContext {
  Device device;
  NativeStream stream = nullptr;
  // Where kernels take their scratch memory; null: the device's default
  // allocator. A captured CUDA graph's step passes the graph's own.
  Allocator* allocator = nullptr;
};

enum class Epilogue {
  kNone,
  kBias,      // out = mm + bias (bias broadcast over rows)
  kBiasGelu,  // aux = mm + bias; out = gelu(aux)
  kDGelu,     // out = mm * gelu'(aux)  (aux: the pre-activation from forward)
};

// out (M, N) [+]= op(a) · op(b), then the epilogue.
//   op(a) = a (M, K) or, with trans_a, a^T where a is (K, M)
//   op(b) = b (K, N) or, with trans_b, b^T where b is (N, K)
// Linear forward: out = x · w^T           (a=x, b=w, trans_b)
// Linear dx:      dx = dy · w             (a=dy, b=w)
// Linear dw:      dw += dy^T · x          (a=dy, trans_a, b=x, accumulate)
struct GemmArgs {
  Tensor out;
  Tensor a;
  Tensor b;
  bool trans_a = false;
  bool trans_b = false;
  bool accumulate = false;  // out += result (kNone epilogue only)
  Epilogue epilogue = Epilogue::kNone;
  Tensor bias;       // (N): kBias, kBiasGelu
  Tensor aux;        // (M, N): written by kBiasGelu, read by kDGelu
  Tensor bias_grad;  // (N), optional with kDGelu: += column sums of `out`
  // (M), optional with trans_a and kNone: += column sums of a (K, M), i.e.
  // the bias gradient beside a weight gradient dW = dyᵀ·x, from the GEMM's
  // own read of dy (cuBLASLt's BGRAD epilogue) where the backend can (on
  // CUDA WEFT_BIAS_GRAD=column-sum makes it a second pass, for comparison).
  Tensor a_col_sums;
};

struct GemmDims {
  int64_t m = 0, n = 0, k = 0;
};
// Shape and argument rules every Gemm implementation enforces (rank 2,
// matching inner dimensions, accumulate only without an epilogue,
// bias_grad only with kDGelu, a_col_sums only with trans_a and kNone). Device and dtype checks are the backend's.
absl::StatusOr<GemmDims> CheckGemmArgs(const GemmArgs& args);

// One parameter (or shard of one) that an optimizer updates in place.
struct OptimSegment {
  Tensor master;    // f32 weights the update applies to (always defined)
  Tensor param;     // compute-dtype copy refreshed after the update; may be
                    // undefined when the master tensor is the parameter
  Tensor grad;      // same numel as master, f32 or bf16
  Tensor exp_avg;   // f32 first moment (AdamW) or momentum buffer (SGD)
  Tensor exp_avg_sq;  // f32 second moment (AdamW only)
  bool weight_decay = true;
};

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  int64_t step = 1;          // 1-based, for bias correction
  float grad_scale = 1.0f;   // multiplies every gradient (e.g. 1/accum)
  // Clipping without a host sync: when max_grad_norm > 0, gradients are
  // scaled by min(1, max_grad_norm / (sqrt(*grad_norm_sq) + 1e-6)) where
  // grad_norm_sq is a one-element f32 tensor on the device.
  float max_grad_norm = 0.0f;
  Tensor grad_norm_sq;
  // When defined: f32 [lr, 1 - beta1^step, 1 - beta2^step] on the device,
  // read by the update when it runs instead of lr and step. A replayed CUDA
  // graph keeps its kernels' arguments, so per-step values must be in memory.
  Tensor step_scalars;
};

// The per-step values of AdamW's update, one float expression for every
// device: {lr, 1 - beta1^step, 1 - beta2^step}.
std::array<float, 3> AdamWStepScalars(float lr, float beta1, float beta2, int64_t step);
// Host implementations: those values from `h.step_scalars` (a CPU tensor)
// when defined, else from lr and step.
absl::StatusOr<std::array<float, 3>> HostAdamWStepScalars(const AdamWHyper& h);

struct SgdHyper {
  float lr = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  float grad_scale = 1.0f;
  float max_grad_norm = 0.0f;
  Tensor grad_norm_sq;
  Tensor step_scalars;  // when defined: f32 [lr] on the device (see AdamWHyper)
};

// Host implementations: lr from `h.step_scalars` when defined, else h.lr.
absl::StatusOr<float> HostSgdLr(const SgdHyper& h);

class KernelOps {
 public:
  virtual ~KernelOps() = default;

  virtual absl::Status Gemm(const KernelContext& ctx, const GemmArgs& args) = 0;
  // dbias (N) += sum over rows of dy (M, N).
  virtual absl::Status BiasGrad(const KernelContext& ctx, Tensor& dbias, const Tensor& dy) = 0;

  // out, mean, rstd from x (N, C); weight, bias (C). mean/rstd are f32 (N).
  virtual absl::Status LayerNormForward(const KernelContext& ctx, Tensor& out, Tensor& mean,
                                        Tensor& rstd, const Tensor& x, const Tensor& weight,
                                        const Tensor& bias, float eps) = 0;
  // dx = residual + dL/dx, or dL/dx when residual is undefined; dweight += ,
  // dbias += . residual (same shape and dtype as x) may be dx itself, which
  // makes dx +=, or another tensor, so a residual gradient that must stay
  // unchanged needs no copy. dx may alias dy.
  virtual absl::Status LayerNormBackward(const KernelContext& ctx, Tensor& dx, Tensor& dweight,
                                         Tensor& dbias, const Tensor& dy, const Tensor& x,
                                         const Tensor& weight, const Tensor& mean,
                                         const Tensor& rstd, const Tensor& residual) = 0;
  // Fused: residual_out = a + b; out = layernorm(residual_out).
  virtual absl::Status ResidualLayerNormForward(const KernelContext& ctx, Tensor& residual_out,
                                                Tensor& out, Tensor& mean, Tensor& rstd,
                                                const Tensor& a, const Tensor& b,
                                                const Tensor& weight, const Tensor& bias,
                                                float eps) = 0;

  // GELU, tanh approximation (GPT-2's).
  virtual absl::Status GeluForward(const KernelContext& ctx, Tensor& out, const Tensor& x) = 0;
  virtual absl::Status GeluBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy,
                                    const Tensor& x) = 0;

  // out = a + b (elementwise; out may alias a or b).
  virtual absl::Status Add(const KernelContext& ctx, Tensor& out, const Tensor& a,
                           const Tensor& b) = 0;
  // x *= scale.
  virtual absl::Status Scale(const KernelContext& ctx, Tensor& x, float scale) = 0;

  // Causal self-attention. qkv (B, T, 3C) packs q, k, v; heads split C.
  // out (B, T, C); lse (B, NH, T) f32 logsumexp of the scaled scores, kept
  // for backward so the T x T matrix is never stored.
  virtual absl::Status AttentionForward(const KernelContext& ctx, Tensor& out, Tensor& lse,
                                        const Tensor& qkv, int num_heads) = 0;
  // dqkv (B, T, 3C) overwritten.
  virtual absl::Status AttentionBackward(const KernelContext& ctx, Tensor& dqkv,
                                         const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                         const Tensor& lse, int num_heads) = 0;

  // One block of blockwise (ring) attention, for context parallelism.
  // Queries are the first C columns of q (B, Tq, 3C or C); keys and values
  // come from kv, either a packed qkv (B, Tk, 3C: k and v at columns C and
  // 2C) or a K/V block (B, Tk, 2C: k then v). Key j is visible to query i
  // when its global position (kv_chunks) is <= the query's (q_chunks). The
  // block's result is merged into out (B, Tq, C) and lse (B, NH, Tq) by the
  // online-softmax (log-sum-exp) rule; accumulate=false overwrites them
  // instead. A row with no visible key so far has out 0 and lse -inf.
  // Defaults return Unimplemented (a device without blockwise kernels).
  virtual absl::Status AttentionBlockForward(const KernelContext& ctx, Tensor& out, Tensor& lse,
                                             const Tensor& q, const TokenChunks& q_chunks,
                                             const Tensor& kv, const TokenChunks& kv_chunks,
                                             int num_heads, bool accumulate);
  // The block's share of the gradient, given the MERGED out and lse of every
  // block: dq (shaped like q; its first C columns) += and dkv (shaped like
  // kv; its k and v columns) +=. Exact because softmax probabilities of a
  // block are exp(score - lse) with the global lse.
  virtual absl::Status AttentionBlockBackward(const KernelContext& ctx, Tensor& dq, Tensor& dkv,
                                              const Tensor& dout, const Tensor& q,
                                              const TokenChunks& q_chunks, const Tensor& kv,
                                              const TokenChunks& kv_chunks, const Tensor& out,
                                              const Tensor& lse, int num_heads);

  // out (B, T, C) = wte[tokens] + wpe[0..T). tokens i32 (B, T).
  virtual absl::Status EmbeddingForward(const KernelContext& ctx, Tensor& out,
                                        const Tensor& tokens, const Tensor& wte,
                                        const Tensor& wpe) = 0;
  // dwte += scatter of dout by token, dwpe += sum over batch. Deterministic.
  // wpe/dwpe may be undefined (no positional table).
  virtual absl::Status EmbeddingBackward(const KernelContext& ctx, Tensor& dwte, Tensor& dwpe,
                                         const Tensor& dout, const Tensor& tokens) = 0;

  // Fused softmax + cross-entropy over the first `vocab` columns of logits
  // (rows, padded_vocab). losses (rows) f32 get -log p[target]. When
  // compute_grad, logits are overwritten in place with
  // dloss_scale * (softmax - onehot) (padded columns get 0). Targets < 0 are
  // ignored: loss 0 and zero gradient.
  virtual absl::Status CrossEntropyForwardBackward(const KernelContext& ctx, Tensor& losses,
                                                   Tensor& logits, const Tensor& targets,
                                                   int64_t vocab, float dloss_scale,
                                                   bool compute_grad) = 0;

  // Vocabulary-parallel embedding and cross-entropy (tensor parallelism): a
  // shard holds global rows [vocab_begin, vocab_begin + rows) of the token
  // table and the same logit columns; columns >= `vocab` are padding
  // (vocab_shard.h).
  //
  // out (B, T, C) = wte_shard[token - vocab_begin] for tokens this shard
  // holds, 0 for the others; + wpe[t] when wpe is defined (rows >= T).
  virtual absl::Status VocabEmbeddingForward(const KernelContext& ctx, Tensor& out,
                                             const Tensor& tokens, const Tensor& wte_shard,
                                             int64_t vocab_begin, const Tensor& wpe) = 0;
  // dwte_shard[token - vocab_begin] += dout for tokens held here, dwpe +=
  // dout summed over the batch when defined. Deterministic.
  virtual absl::Status VocabEmbeddingBackward(const KernelContext& ctx, Tensor& dwte_shard,
                                              Tensor& dwpe, const Tensor& dout,
                                              const Tensor& tokens, int64_t vocab_begin) = 0;
  // The cross-entropy in three steps around two all-reduces over the shards
  // (the caller's), all per row of logits (N, cols), f32 statistics (N):
  //  1. Stats: over this shard's real columns, row_max (-inf when none),
  //     sum_exp = sum of exp(z - row_max), target_logit = z[target] when
  //     held here, else 0. Ignored rows (target < 0): -inf, 0, 0.
  //  [global_max = all-reduce max of row_max]
  //  2. Rescale: sum_exp *= exp(row_max - global_max) (0 for row_max -inf).
  //  [all-reduce sum of sum_exp and target_logit]
  //  3. Finish: losses = log(sum_exp) + global_max - target_logit, 0 for
  //     ignored rows; with compute_grad the logits become
  //     dloss_scale * (softmax - onehot) on real columns, 0 on padding and
  //     ignored rows.
  // One shard (vocab_begin 0, all columns) gives CrossEntropyForwardBackward.
  // Targets >= vocab: an error on CPU, NaN loss and zero row on CUDA.
  virtual absl::Status VocabCrossEntropyStats(const KernelContext& ctx, Tensor& row_max,
                                              Tensor& sum_exp, Tensor& target_logit,
                                              const Tensor& logits, const Tensor& targets,
                                              int64_t vocab_begin, int64_t vocab) = 0;
  virtual absl::Status VocabCrossEntropyRescale(const KernelContext& ctx, Tensor& sum_exp,
                                                const Tensor& row_max,
                                                const Tensor& global_max) = 0;
  virtual absl::Status VocabCrossEntropyFinish(const KernelContext& ctx, Tensor& losses,
                                               Tensor& logits, const Tensor& targets,
                                               int64_t vocab_begin, int64_t vocab,
                                               const Tensor& global_max, const Tensor& sum_exp,
                                               const Tensor& target_logit, float dloss_scale,
                                               bool compute_grad) = 0;

  // Inverted dropout: out = x * mask / (1 - p), element i kept when
  // DropoutKeep(key, i, p).
  virtual absl::Status DropoutForward(const KernelContext& ctx, Tensor& out, const Tensor& x,
                                      float p, const DropoutKey& key) = 0;
  virtual absl::Status DropoutBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy,
                                       float p, const DropoutKey& key) = 0;

  // out (one f32 element) = sum of x (any float dtype). With accumulate, +=.
  virtual absl::Status Sum(const KernelContext& ctx, Tensor& out, const Tensor& x,
                           bool accumulate) = 0;
  // out (one f32 element) = sum over tensors of sum(x^2), accumulated in f32.
  virtual absl::Status SumSquares(const KernelContext& ctx, Tensor& out,
                                  absl::Span<const Tensor> tensors) = 0;
  // Sets every element of every tensor to zero (the gradients at a step's
  // start). Default: one Tensor::Zero each; CUDA: one launch per 64 tensors
  // instead of a memset per parameter.
  virtual absl::Status ZeroTensors(const KernelContext& ctx, absl::Span<const Tensor> tensors);

  // Multi-tensor optimizers: one launch (on CUDA) for all segments.
  virtual absl::Status AdamW(const KernelContext& ctx, absl::Span<OptimSegment> segments,
                             const AdamWHyper& hyper) = 0;
  virtual absl::Status Sgd(const KernelContext& ctx, absl::Span<OptimSegment> segments,
                           const SgdHyper& hyper) = 0;

  // Host threads the kernels may use (CPU BLAS); <= 0 keeps the default.
  virtual void SetNumThreads(int threads) { (void)threads; }
};

// Kernel implementations register per device type, like DeviceBackends.
void RegisterKernelOps(DeviceType type, KernelOps* ops);
absl::StatusOr<KernelOps*> GetKernelOps(DeviceType type);
bool RegisterKernelOpsAtStartup(DeviceType type, KernelOps* ops);

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_KERNEL_OPS_H_
