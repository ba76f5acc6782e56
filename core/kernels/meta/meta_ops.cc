// Kernels for the meta device (core/tensor/meta_backend.cc): every op
// accepts its arguments and computes nothing. Shapes are already checked by
// the modules that call them, and a dry run only needs the allocations the
// modules make around the kernels, never their values.
#include "core/kernels/kernel_ops.h"

namespace weft {
namespace {

class MetaKernelOps : public KernelOps {
 public:
  absl::Status Gemm(const KernelContext&, const GemmArgs&) override { return Ok(); }
  absl::Status BiasGrad(const KernelContext&, Tensor&, const Tensor&) override { return Ok(); }
  absl::Status LayerNormForward(const KernelContext&, Tensor&, Tensor&, Tensor&, const Tensor&,
                                const Tensor&, const Tensor&, float) override {
    return Ok();
  }
  absl::Status LayerNormBackward(const KernelContext&, Tensor&, Tensor&, Tensor&, const Tensor&,
                                 const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&) override {
    return Ok();
  }
  absl::Status ResidualLayerNormForward(const KernelContext&, Tensor&, Tensor&, Tensor&, Tensor&,
                                        const Tensor&, const Tensor&, const Tensor&,
                                        const Tensor&, float) override {
    return Ok();
  }
  absl::Status GeluForward(const KernelContext&, Tensor&, const Tensor&) override { return Ok(); }
  absl::Status GeluBackward(const KernelContext&, Tensor&, const Tensor&,
                            const Tensor&) override {
    return Ok();
  }
  absl::Status Add(const KernelContext&, Tensor&, const Tensor&, const Tensor&) override {
    return Ok();
  }
  absl::Status Scale(const KernelContext&, Tensor&, float) override { return Ok(); }
  absl::Status AttentionForward(const KernelContext&, Tensor&, Tensor&, const Tensor&,
                                int) override {
    return Ok();
  }
  absl::Status AttentionBackward(const KernelContext&, Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&, const Tensor&, int) override {
    return Ok();
  }
  // Blockwise (ring) attention: context parallelism's dry runs.
  absl::Status AttentionBlockForward(const KernelContext&, Tensor&, Tensor&, const Tensor&,
                                     const TokenChunks&, const Tensor&, const TokenChunks&, int,
                                     bool) override {
    return Ok();
  }
  absl::Status AttentionBlockBackward(const KernelContext&, Tensor&, Tensor&, const Tensor&,
                                      const Tensor&, const TokenChunks&, const Tensor&,
                                      const TokenChunks&, const Tensor&, const Tensor&,
                                      int) override {
    return Ok();
  }
  absl::Status EmbeddingForward(const KernelContext&, Tensor&, const Tensor&, const Tensor&,
                                const Tensor&) override {
    return Ok();
  }
  absl::Status EmbeddingBackward(const KernelContext&, Tensor&, Tensor&, const Tensor&,
                                 const Tensor&) override {
    return Ok();
  }
  absl::Status CrossEntropyForwardBackward(const KernelContext&, Tensor&, Tensor&, const Tensor&,
                                           int64_t, float, bool) override {
    return Ok();
  }
  absl::Status VocabEmbeddingForward(const KernelContext&, Tensor&, const Tensor&, const Tensor&,
                                     int64_t, const Tensor&) override {
    return Ok();
  }
  absl::Status VocabEmbeddingBackward(const KernelContext&, Tensor&, Tensor&, const Tensor&,
                                      const Tensor&, int64_t) override {
    return Ok();
  }
  absl::Status VocabCrossEntropyStats(const KernelContext&, Tensor&, Tensor&, Tensor&,
                                      const Tensor&, const Tensor&, int64_t, int64_t) override {
    return Ok();
  }
  absl::Status VocabCrossEntropyRescale(const KernelContext&, Tensor&, const Tensor&,
                                        const Tensor&) override {
    return Ok();
  }
  absl::Status VocabCrossEntropyFinish(const KernelContext&, Tensor&, Tensor&, const Tensor&,
                                       int64_t, int64_t, const Tensor&, const Tensor&,
                                       const Tensor&, float, bool) override {
    return Ok();
  }
  absl::Status DropoutForward(const KernelContext&, Tensor&, const Tensor&, float, const DropoutKey&) override {
    return Ok();
  }
  absl::Status DropoutBackward(const KernelContext&, Tensor&, const Tensor&, float, const DropoutKey&) override {
    return Ok();
  }
  absl::Status Sum(const KernelContext&, Tensor&, const Tensor&, bool) override { return Ok(); }
  absl::Status SumSquares(const KernelContext&, Tensor&, absl::Span<const Tensor>) override {
    return Ok();
  }
  absl::Status AdamW(const KernelContext&, absl::Span<OptimSegment>,
                     const AdamWHyper&) override {
    return Ok();
  }
  absl::Status Sgd(const KernelContext&, absl::Span<OptimSegment>, const SgdHyper&) override {
    return Ok();
  }

 private:
  static absl::Status Ok() { return absl::OkStatus(); }
};

const bool kRegistered = RegisterKernelOpsAtStartup(DeviceType::kMeta, new MetaKernelOps());

}  // namespace
}  // namespace weft
