#include "core/kernels/cuda/ops_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::cuda {

absl::Status CheckContext(const KernelContext& ctx) {
  if (!ctx.device.is_cuda()) {
    return InvalidArgument(absl::StrCat("CUDA kernels called with device ", ctx.device.ToString()),
                           "a cuda:N device in the KernelContext");
  }
  return absl::OkStatus();
}

absl::Status CheckTensor(const KernelContext& ctx, const Tensor& t, absl::string_view name) {
  if (!t.defined()) return InvalidArgument(absl::StrCat(name, " is undefined"), "a tensor");
  if (t.device() != ctx.device) {
    return InvalidArgument(absl::StrCat(name, " is on ", t.device().ToString()),
                           absl::StrCat("a tensor on ", ctx.device.ToString()),
                           "move it with To(device) first");
  }
  if (!t.is_contiguous()) {
    return InvalidArgument(absl::StrCat(name, " is not contiguous"), "a contiguous tensor",
                           "call Contiguous() first");
  }
  return absl::OkStatus();
}

absl::Status CheckFloat(const KernelContext& ctx, const Tensor& t, absl::string_view name) {
  WEFT_RETURN_IF_ERROR(CheckTensor(ctx, t, name));
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) {
    return InvalidArgument(absl::StrCat(name, " has dtype ", DTypeName(t.dtype())),
                           "f32 or bf16", "the CUDA kernels compute in f32 or bf16");
  }
  return absl::OkStatus();
}

absl::Status CheckDType(const KernelContext& ctx, const Tensor& t, absl::string_view name,
                        DType dtype) {
  WEFT_RETURN_IF_ERROR(CheckTensor(ctx, t, name));
  if (t.dtype() != dtype) {
    return InvalidArgument(absl::StrCat(name, " has dtype ", DTypeName(t.dtype())),
                           DTypeName(dtype));
  }
  return absl::OkStatus();
}

absl::Status CheckNumel(const Tensor& t, absl::string_view name, int64_t numel) {
  if (t.numel() != numel) {
    return InvalidArgument(absl::StrCat(name, " has ", t.numel(), " elements (shape ",
                                        ShapeString(t.shape()), ")"),
                           absl::StrCat(numel, " elements"));
  }
  return absl::OkStatus();
}

absl::Status CheckShape(const Tensor& t, absl::string_view name,
                        std::initializer_list<int64_t> shape) {
  const Shape want(shape.begin(), shape.end());
  if (t.shape() != want) {
    return InvalidArgument(absl::StrCat(name, " has shape ", ShapeString(t.shape())),
                           ShapeString(want));
  }
  return absl::OkStatus();
}

absl::Status CheckSameDType(const Tensor& t, absl::string_view name, const Tensor& like,
                            absl::string_view like_name) {
  if (t.dtype() != like.dtype()) {
    return InvalidArgument(absl::StrCat(name, " has dtype ", DTypeName(t.dtype()), " but ",
                                        like_name, " has ", DTypeName(like.dtype())),
                           "the same dtype", "convert one of them with ToDType first");
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Scratch(const KernelContext& ctx, int64_t bytes) {
  const int64_t floats = std::max<int64_t>((bytes + 3) / 4, 1);
  return Tensor::Empty({floats}, DType::kF32, ctx.device, ctx.allocator, ctx.stream);
}

}  // namespace weft::cuda
