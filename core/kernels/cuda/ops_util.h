// Operand checks and scratch memory for CudaKernelOps. Every op validates its
// tensors on the host (cheap: shapes and dtypes only, never data) and names
// the operand that is wrong, so a layer bug surfaces as a Status instead of a
// fault inside a kernel.
#ifndef WEFT_CORE_KERNELS_CUDA_OPS_UTIL_H_
#define WEFT_CORE_KERNELS_CUDA_OPS_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/kernels/kernel_ops.h"
#include "core/tensor/tensor.h"

namespace weft::cuda {

inline cudaStream_t StreamOf(const KernelContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

// ctx names a CUDA device.
absl::Status CheckContext(const KernelContext& ctx);

// Defined, contiguous, on ctx.device.
absl::Status CheckTensor(const KernelContext& ctx, const Tensor& t, absl::string_view name);
// CheckTensor plus dtype f32 or bf16 (the dtypes the CUDA kernels compute in).
absl::Status CheckFloat(const KernelContext& ctx, const Tensor& t, absl::string_view name);
// CheckTensor plus an exact dtype.
absl::Status CheckDType(const KernelContext& ctx, const Tensor& t, absl::string_view name,
                        DType dtype);

// Shape and size checks on a tensor already checked above.
absl::Status CheckNumel(const Tensor& t, absl::string_view name, int64_t numel);
absl::Status CheckShape(const Tensor& t, absl::string_view name,
                        std::initializer_list<int64_t> shape);
// t has the same dtype as `like` (named like_name in the message).
absl::Status CheckSameDType(const Tensor& t, absl::string_view name, const Tensor& like,
                            absl::string_view like_name);

// Device scratch of at least `bytes`, stream-ordered on ctx.stream: the
// caching allocator reuses it only for later work on that stream, so the
// tensor may be dropped as soon as the kernels using it are enqueued.
absl::StatusOr<Tensor> Scratch(const KernelContext& ctx, int64_t bytes);

// A row-wise op's operand as rows of `cols` (the last dimension).
struct RowsCols {
  int64_t rows, cols;
};

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_OPS_UTIL_H_
