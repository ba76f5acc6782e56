// GroupedGemm: one GEMM per expert over consecutive row blocks of a grouped
// activation buffer, with that expert's weight (and bias) slice.
//
// It is a loop of KernelOps::Gemm calls (cuBLASLt on CUDA, one call per
// non-empty group), not a single grouped kernel: group sizes are known on
// the host anyway (the all_to_all_v that feeds experts needs them there),
// and the loop keeps the fused epilogues (bias, GELU and their gradients).
#ifndef WEFT_CORE_KERNELS_GROUPED_GEMM_H_
#define WEFT_CORE_KERNELS_GROUPED_GEMM_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/kernels/kernel_ops.h"

namespace weft {

// Group g owns rows [r_g, r_g + counts[g]) of every row operand (M rows in
// all, r_g = counts[0] + ... + counts[g-1]) and slice g of the grouped ones.
enum class GroupedGemmKind {
  // out rows (M, N) = a rows (M, K) . w[g]^T, w (G, N, K): Linear forward.
  kForward,
  // out rows (M, K) = a rows (M, N) . w[g], w (G, N, K): Linear dx.
  kInputGrad,
  // w_grad[g] (N, K) += a rows (M, N)^T . b rows (M, K): Linear dW.
  kWeightGrad,
};

struct GroupedGemmArgs {
  GroupedGemmKind kind = GroupedGemmKind::kForward;
  Tensor out;  // kForward, kInputGrad: (M, .); kWeightGrad: (G, N, K) accumulated
  Tensor a;
  Tensor b;    // kWeightGrad only: (M, K)
  Tensor w;    // (G, N, K): kForward, kInputGrad
  Epilogue epilogue = Epilogue::kNone;  // kForward: kBias / kBiasGelu; kInputGrad: kDGelu
  Tensor bias;       // (G, N)
  Tensor aux;        // (M, N) pre-activation: written by kBiasGelu, read by kDGelu
  Tensor bias_grad;  // (G, K) with kDGelu: += column sums (of the producer's bias)
};

absl::Status GroupedGemm(KernelOps& ops, const KernelContext& ctx, const GroupedGemmArgs& args,
                         const std::vector<int64_t>& counts);

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_GROUPED_GEMM_H_
