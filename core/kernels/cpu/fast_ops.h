// FastCpuKernelOps: the production CPU kernels (what DeviceType::kCPU
// registers). CpuKernelOps stays the simple reference: gradient checks and the
// CUDA parity tests compare against it, and fast_ops_test compares these
// kernels against it with stated tolerances.
//
// - Vectorised: hot loops are written so GCC vectorises them at -O3 (explicit
//   8-lane accumulators for reductions, a polynomial expf) and compiled twice
//   with target_clones("avx2", "default"), picked at load time, so the binary
//   runs on any x86-64. -ffp-contract stays off (ISO C++ mode), so both clones
//   compute bitwise-identical results.
// - Multi-threaded on one pool (thread_pool.h) that also drives the GEMMs:
//   OpenBLAS is set to one thread and each pool thread runs sgemm on its own
//   block of output rows, so there is never more than one busy thread per
//   core. Work is split only over independent outputs (rows, (batch, head)
//   pairs, columns for the column sums), so results are bitwise identical for
//   any thread count.
// - Fused: GEMM + bias (+ GELU, + dGELU and bias grad) applied per row block
//   right after that block's sgemm; residual add + layernorm in one pass;
//   softmax + cross-entropy in one pass; multi-tensor AdamW.
#ifndef WEFT_CORE_KERNELS_CPU_FAST_OPS_H_
#define WEFT_CORE_KERNELS_CPU_FAST_OPS_H_

#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {

class FastCpuKernelOps : public CpuKernelOps {
 public:
  FastCpuKernelOps();

  absl::Status Gemm(const KernelContext& ctx, const GemmArgs& args) override;
  absl::Status BiasGrad(const KernelContext& ctx, Tensor& dbias, const Tensor& dy) override;

  absl::Status LayerNormForward(const KernelContext& ctx, Tensor& out, Tensor& mean,
                                Tensor& rstd, const Tensor& x, const Tensor& weight,
                                const Tensor& bias, float eps) override;
  absl::Status LayerNormBackward(const KernelContext& ctx, Tensor& dx, Tensor& dweight,
                                 Tensor& dbias, const Tensor& dy, const Tensor& x,
                                 const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& residual) override;
  absl::Status ResidualLayerNormForward(const KernelContext& ctx, Tensor& residual_out,
                                        Tensor& out, Tensor& mean, Tensor& rstd,
                                        const Tensor& a, const Tensor& b, const Tensor& weight,
                                        const Tensor& bias, float eps) override;

  absl::Status GeluForward(const KernelContext& ctx, Tensor& out, const Tensor& x) override;
  absl::Status GeluBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy,
                            const Tensor& x) override;
  absl::Status Add(const KernelContext& ctx, Tensor& out, const Tensor& a,
                   const Tensor& b) override;

  absl::Status AttentionForward(const KernelContext& ctx, Tensor& out, Tensor& lse,
                                const Tensor& qkv, int num_heads) override;
  absl::Status AttentionBackward(const KernelContext& ctx, Tensor& dqkv, const Tensor& dout,
                                 const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                 int num_heads) override;

  absl::Status CrossEntropyForwardBackward(const KernelContext& ctx, Tensor& losses,
                                           Tensor& logits, const Tensor& targets, int64_t vocab,
                                           float dloss_scale, bool compute_grad) override;

  absl::Status SumSquares(const KernelContext& ctx, Tensor& out,
                          absl::Span<const Tensor> tensors) override;
  absl::Status AdamW(const KernelContext& ctx, absl::Span<OptimSegment> segments,
                     const AdamWHyper& hyper) override;
  // Sets the pool's thread count; OpenBLAS itself stays at one thread.
  void SetNumThreads(int threads) override;
};

}  // namespace weft::cpu

#endif  // WEFT_CORE_KERNELS_CPU_FAST_OPS_H_
