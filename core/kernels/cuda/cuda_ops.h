// CudaKernelOps: KernelOps on NVIDIA GPUs (bf16 and f32). Each method checks
// its operands on the host, makes ctx.device current and enqueues kernels on
// ctx.stream; none synchronizes the host. Temporary buffers come from the
// stream-ordered caching allocator. Launchers live in one file per kernel
// family (matmul.h, layernorm.h, attention.h, ...); methods are defined in
// ops_layers.cc (dense layers), ops_model.cc (embedding, loss, dropout,
// reductions, optimizers) and ops_vocab.cc (vocabulary-parallel layers). Registered for DeviceType::kCUDA by register.cc.
#ifndef WEFT_CORE_KERNELS_CUDA_CUDA_OPS_H_
#define WEFT_CORE_KERNELS_CUDA_CUDA_OPS_H_

#include "core/kernels/kernel_ops.h"

namespace weft::cuda {

class CudaKernelOps : public KernelOps {
 public:
  // Every op of kernel_ops_list.inc, defined in one .cu per kernel family.
#define WEFT_KERNEL_OP(name, params) absl::Status name params override;
#define WEFT_KERNEL_OP_WITH_DEFAULT WEFT_KERNEL_OP
#include "core/kernels/kernel_ops_list.inc"
#undef WEFT_KERNEL_OP
#undef WEFT_KERNEL_OP_WITH_DEFAULT

  absl::Status ZeroTensors(const KernelContext& ctx, absl::Span<const Tensor> tensors) override;
};

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_CUDA_OPS_H_
