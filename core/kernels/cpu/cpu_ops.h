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
  // Every op of kernel_ops_list.inc, defined in one .cc per kernel family.
#define WEFT_KERNEL_OP(name, params) absl::Status name params override;
#define WEFT_KERNEL_OP_WITH_DEFAULT WEFT_KERNEL_OP
#include "core/kernels/kernel_ops_list.inc"
#undef WEFT_KERNEL_OP
#undef WEFT_KERNEL_OP_WITH_DEFAULT

  void SetNumThreads(int threads) override;
};

}  // namespace weft::cpu

#endif  // WEFT_CORE_KERNELS_CPU_CPU_OPS_H_
