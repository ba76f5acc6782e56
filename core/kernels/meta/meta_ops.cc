// Kernels for the meta device (core/tensor/meta_backend.cc): every op
// accepts its arguments and computes nothing. Shapes are already checked by
// the modules that call them, and a dry run only needs the allocations the
// modules make around the kernels, never their values.
#include "core/kernels/kernel_ops.h"

namespace weft {
namespace {

class MetaKernelOps : public KernelOps {
 public:
  // Every op of kernel_ops_list.inc does nothing.
#define WEFT_KERNEL_OP(name, params) \
  absl::Status name params override { return Ok(); }
#define WEFT_KERNEL_OP_WITH_DEFAULT WEFT_KERNEL_OP
#include "core/kernels/kernel_ops_list.inc"
#undef WEFT_KERNEL_OP
#undef WEFT_KERNEL_OP_WITH_DEFAULT

 private:
  static absl::Status Ok() { return absl::OkStatus(); }
};

const bool kRegistered = RegisterKernelOpsAtStartup(DeviceType::kMeta, new MetaKernelOps());

}  // namespace
}  // namespace weft
