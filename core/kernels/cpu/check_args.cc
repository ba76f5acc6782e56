#include "core/kernels/cpu/check_args.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft::cpu {

absl::Status CheckCpu(const Tensor& t, absl::string_view name, DType dtype) {
  if (!t.defined()) return InvalidArgument(absl::StrCat(name, " is undefined"), "a tensor");
  if (!t.device().is_cpu()) {
    return InvalidArgument(absl::StrCat(name, " is on ", t.device().ToString()),
                           "a CPU tensor for the CPU kernels");
  }
  if (t.dtype() != dtype) {
    return InvalidArgument(absl::StrCat(name, " has dtype ", DTypeName(t.dtype())),
                           DTypeName(dtype),
                           dtype == DType::kF32 ? "CPU kernels compute in f32: use --dtype=f32"
                                                : "");
  }
  if (!t.is_contiguous()) {
    return InvalidArgument(absl::StrCat(name, " is not contiguous"), "a contiguous tensor",
                           "call Contiguous() first");
  }
  return absl::OkStatus();
}

absl::Status CheckShape(const Tensor& t, absl::string_view name,
                        std::initializer_list<int64_t> shape, DType dtype) {
  absl::Status s = CheckCpu(t, name, dtype);
  if (!s.ok()) return s;
  Shape want(shape.begin(), shape.end());
  if (t.shape() != want) {
    return InvalidArgument(absl::StrCat(name, " has shape ", ShapeString(t.shape())),
                           ShapeString(want));
  }
  return absl::OkStatus();
}

absl::Status CheckNumel(const Tensor& t, absl::string_view name, int64_t numel, DType dtype) {
  absl::Status s = CheckCpu(t, name, dtype);
  if (!s.ok()) return s;
  if (t.numel() != numel) {
    return InvalidArgument(absl::StrCat(name, " has ", t.numel(), " elements"),
                           absl::StrCat(numel));
  }
  return absl::OkStatus();
}

absl::Status CheckFloat(const Tensor& t, absl::string_view name) {
  if (t.defined() && t.dtype() == DType::kBF16) return CheckCpu(t, name, DType::kBF16);
  return CheckCpu(t, name, DType::kF32);
}

float LoadF(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kF32) return t.data<float>()[i];
  return Bf16BitsToFloat(t.data<BFloat16>()[i].bits);
}

void StoreF(Tensor& t, int64_t i, float v) {
  if (t.dtype() == DType::kF32) {
    t.data<float>()[i] = v;
  } else {
    t.data<BFloat16>()[i].bits = FloatToBf16Bits(v);
  }
}

}  // namespace weft::cpu
