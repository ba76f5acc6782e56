// CpuKernelOps: the reference implementation of KernelOps, in f32.
//
// Straightforward loops (GEMMs through OpenBLAS) that favour clarity and
// determinism over speed: they are the ground truth for gradient checks and
// for the CUDA parity tests, and they train the tiny CPU configurations.
// Methods are defined in one .cc per kernel family.
#ifndef WEFT_CORE_KERNELS_CPU_CPU_OPS_H_
#define WEFT_CORE_KERNELS_CPU_CPU_OPS_H_

#include "core/kernels/kernel_ops.h"

namespace weft::cpu {

class CpuKernelOps : public KernelOps {
 public:
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
  absl::Status Scale(const KernelContext& ctx, Tensor& x, float scale) override;

  absl::Status AttentionForward(const KernelContext& ctx, Tensor& out, Tensor& lse,
                                const Tensor& qkv, int num_heads) override;
  absl::Status AttentionBackward(const KernelContext& ctx, Tensor& dqkv, const Tensor& dout,
                                 const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                 int num_heads) override;

  absl::Status AttentionBlockForward(const KernelContext& ctx, Tensor& out, Tensor& lse,
                                     const Tensor& q, const TokenChunks& q_chunks,
                                     const Tensor& kv, const TokenChunks& kv_chunks,
                                     int num_heads, bool accumulate) override;
  absl::Status AttentionBlockBackward(const KernelContext& ctx, Tensor& dq, Tensor& dkv,
                                      const Tensor& dout, const Tensor& q,
                                      const TokenChunks& q_chunks, const Tensor& kv,
                                      const TokenChunks& kv_chunks, const Tensor& out,
                                      const Tensor& lse, int num_heads) override;

  absl::Status EmbeddingForward(const KernelContext& ctx, Tensor& out, const Tensor& tokens,
                                const Tensor& wte, const Tensor& wpe) override;
  absl::Status EmbeddingBackward(const KernelContext& ctx, Tensor& dwte, Tensor& dwpe,
                                 const Tensor& dout, const Tensor& tokens) override;

  absl::Status CrossEntropyForwardBackward(const KernelContext& ctx, Tensor& losses,
                                           Tensor& logits, const Tensor& targets, int64_t vocab,
                                           float dloss_scale, bool compute_grad) override;

  absl::Status VocabEmbeddingForward(const KernelContext& ctx, Tensor& out, const Tensor& tokens,
                                     const Tensor& wte_shard, int64_t vocab_begin,
                                     const Tensor& wpe) override;
  absl::Status VocabEmbeddingBackward(const KernelContext& ctx, Tensor& dwte_shard, Tensor& dwpe,
                                      const Tensor& dout, const Tensor& tokens,
                                      int64_t vocab_begin) override;
  absl::Status VocabCrossEntropyStats(const KernelContext& ctx, Tensor& row_max,
                                      Tensor& sum_exp, Tensor& target_logit,
                                      const Tensor& logits, const Tensor& targets,
                                      int64_t vocab_begin, int64_t vocab) override;
  absl::Status VocabCrossEntropyRescale(const KernelContext& ctx, Tensor& sum_exp,
                                        const Tensor& row_max, const Tensor& global_max) override;
  absl::Status VocabCrossEntropyFinish(const KernelContext& ctx, Tensor& losses, Tensor& logits,
                                       const Tensor& targets, int64_t vocab_begin, int64_t vocab,
                                       const Tensor& global_max, const Tensor& sum_exp,
                                       const Tensor& target_logit, float dloss_scale,
                                       bool compute_grad) override;

  absl::Status DropoutForward(const KernelContext& ctx, Tensor& out, const Tensor& x, float p,
                              const DropoutKey& key) override;
  absl::Status DropoutBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy, float p,
                               const DropoutKey& key) override;

  absl::Status Sum(const KernelContext& ctx, Tensor& out, const Tensor& x,
                   bool accumulate) override;
  absl::Status SumSquares(const KernelContext& ctx, Tensor& out,
                          absl::Span<const Tensor> tensors) override;

  absl::Status AdamW(const KernelContext& ctx, absl::Span<OptimSegment> segments,
                     const AdamWHyper& hyper) override;
  absl::Status Sgd(const KernelContext& ctx, absl::Span<OptimSegment> segments,
                   const SgdHyper& hyper) override;
  void SetNumThreads(int threads) override;
};

}  // namespace weft::cpu

#endif  // WEFT_CORE_KERNELS_CPU_CPU_OPS_H_
