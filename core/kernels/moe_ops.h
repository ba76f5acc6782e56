// MoeKernelOps: the routing and data-movement kernels of a mixture-of-experts
// layer, behind one interface per device type like KernelOps (the CPU
// reference lives in cpu/moe.cc, the CUDA kernels in cuda/moe.cu).
//
// Vocabulary (N tokens, E experts, k choices per token, C channels):
//   probs (N, E) f32     the router's scores: the softmax of the logits, or
//                        each logit's sigmoid (RouterSpec::score)
//   lse   (N) f32        logsumexp of the logits (router z-loss)
//   idx   (N, k) i32     chosen experts, best first (ties: the lower index)
//   gates (N, k) f32     their weights: the scores renormalised over the k
//                        choices (RouterSpec::normalize), or the raw scores
//   slots (N, k) i32     row of each choice in the expert-grouped buffer, or
//                        -1 when the choice was dropped (capacity overflow)
//   assign (M) i32       choice (t * k + j) of each row of the grouped buffer
// Index tensors live on the device like the data. Every op is deterministic:
// outputs are computed per output row, never by scattered atomics.
#ifndef WEFT_CORE_KERNELS_MOE_OPS_H_
#define WEFT_CORE_KERNELS_MOE_OPS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/kernels/kernel_ops.h"
#include "core/tensor/tensor.h"

namespace weft {

enum class RouterScore { kSoftmax, kSigmoid };

struct RouterSpec {
  int k = 2;
  RouterScore score = RouterScore::kSoftmax;
  // Gates renormalised over the k choices (Mixtral; Qwen3-MoE's
  // norm_topk_prob); otherwise the raw scores (Switch's top-1).
  bool normalize = true;
};

// The most choices per token the CUDA router keeps in registers.
inline constexpr int kMaxRouterTopK = 16;

class MoeKernelOps {
 public:
  virtual ~MoeKernelOps() = default;

  // probs, lse, idx, gates from logits (N, E) (compute dtype).
  virtual absl::Status RouterTopK(const KernelContext& ctx, Tensor& probs, Tensor& lse,
                                  Tensor& idx, Tensor& gates, const Tensor& logits,
                                  const RouterSpec& spec) = 0;
  // dlogits (N, E) (compute dtype, overwritten) from dgates (N, k), plus two
  // auxiliary terms added to dL/dprobs and dL/dlse before the scores'
  // backward: dprobs_extra (N, E) f32 (the load-balancing loss), or
  // undefined; and dL/dlse[n] = lse_scale * lse[n] (the z-loss; 0 with
  // sigmoid scores, which do not pass through the logsumexp).
  virtual absl::Status RouterTopKBackward(const KernelContext& ctx, Tensor& dlogits,
                                          const Tensor& dgates, const Tensor& probs,
                                          const Tensor& lse, const Tensor& idx,
                                          const Tensor& dprobs_extra, float lse_scale,
                                          const RouterSpec& spec) = 0;

  // Permutation into expert order: out (M, C) row i = w[a_i] * x (N, C)
  // row a_i / k, where a_i = assign[i] indexes the flattened (N, k) choices
  // (k = 1: a plain row gather). weights (N, k) f32, or undefined for 1:
  // the gates give the combine's backward.
  virtual absl::Status GatherRows(const KernelContext& ctx, Tensor& out, const Tensor& x,
                                  const Tensor& assign, int k, const Tensor& weights) = 0;
  // Its inverse, weighted: out (N, C) row n [+]= sum_j w[n, j] * src[slots[n, j]]
  // over the kept choices (slots >= 0); weights (N, k) f32, or undefined
  // for 1 (the gradient of GatherRows).
  virtual absl::Status CombineRows(const KernelContext& ctx, Tensor& out, const Tensor& src,
                                   const Tensor& slots, const Tensor& weights,
                                   bool accumulate) = 0;
  // dgates (N, k) f32 = <dy[n], src[slots[n, j]]>, 0 for dropped choices.
  virtual absl::Status RowDots(const KernelContext& ctx, Tensor& out, const Tensor& dy,
                               const Tensor& src, const Tensor& slots) = 0;
};

void RegisterMoeKernelOps(DeviceType type, MoeKernelOps* ops);
absl::StatusOr<MoeKernelOps*> GetMoeKernelOps(DeviceType type);
bool RegisterMoeKernelOpsAtStartup(DeviceType type, MoeKernelOps* ops);

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_MOE_OPS_H_
