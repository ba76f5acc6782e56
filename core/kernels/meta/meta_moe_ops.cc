// Mixture-of-experts kernels for the meta device: like meta_ops.cc, every op
// accepts its arguments and computes nothing. What a dry run routes where
// is the MoE layer's choice (core/nn/moe.cc), not these kernels'.
#include "core/kernels/moe_ops.h"

namespace weft {
namespace {

class MetaMoeKernelOps : public MoeKernelOps {
 public:
  absl::Status RouterTopK(const KernelContext&, Tensor&, Tensor&, Tensor&, Tensor&,
                          const Tensor&, const RouterSpec&) override {
    return absl::OkStatus();
  }
  absl::Status RouterTopKBackward(const KernelContext&, Tensor&, const Tensor&, const Tensor&,
                                  const Tensor&, const Tensor&, const Tensor&, float,
                                  const RouterSpec&) override {
    return absl::OkStatus();
  }
  absl::Status GatherRows(const KernelContext&, Tensor&, const Tensor&, const Tensor&, int,
                          const Tensor&) override {
    return absl::OkStatus();
  }
  absl::Status CombineRows(const KernelContext&, Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, bool) override {
    return absl::OkStatus();
  }
  absl::Status RowDots(const KernelContext&, Tensor&, const Tensor&, const Tensor&,
                       const Tensor&) override {
    return absl::OkStatus();
  }
};

const bool kRegistered =
    RegisterMoeKernelOpsAtStartup(DeviceType::kMeta, new MetaMoeKernelOps());

}  // namespace
}  // namespace weft
