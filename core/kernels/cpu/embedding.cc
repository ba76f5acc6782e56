// Token + position embedding. Backward visits positions in order, so the
// scatter-add into the token table is deterministic.
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {
namespace {

absl::Status CheckTokens(const Tensor& tokens, int64_t vocab_rows) {
  WEFT_RETURN_IF_ERROR(CheckCpu(tokens, "embedding tokens", DType::kI32));
  const int32_t* t = tokens.data<int32_t>();
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    if (t[i] < 0 || t[i] >= vocab_rows) {
      return InvalidArgument(absl::StrCat("token id ", t[i], " at position ", i),
                             absl::StrCat("ids in [0, ", vocab_rows, ")"),
                             "the data was tokenized with a larger vocabulary than the model");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CpuKernelOps::EmbeddingForward(const KernelContext&, Tensor& out,
                                            const Tensor& tokens, const Tensor& wte,
                                            const Tensor& wpe) {
  WEFT_RETURN_IF_ERROR(CheckCpu(wte, "embedding wte"));
  if (wte.ndim() != 2 || tokens.ndim() != 2) {
    return InvalidArgument("embedding shapes", "tokens (B, T) and wte (V, C)");
  }
  WEFT_RETURN_IF_ERROR(CheckTokens(tokens, wte.dim(0)));
  const int64_t b = tokens.dim(0), t = tokens.dim(1), c = wte.dim(1);
  WEFT_RETURN_IF_ERROR(CheckShape(out, "embedding out", {b, t, c}));
  const bool positional = wpe.defined();
  if (positional) {
    WEFT_RETURN_IF_ERROR(CheckCpu(wpe, "embedding wpe"));
    if (wpe.ndim() != 2 || wpe.dim(1) != c || wpe.dim(0) < t) {
      return InvalidArgument("wpe has shape " + ShapeString(wpe.shape()),
                             absl::StrCat("(>= ", t, ", ", c, ")"),
                             "the sequence is longer than max_seq_len");
    }
  }
  const int32_t* ids = tokens.data<int32_t>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < b * t; ++i) {
    const float* e = wte.data<float>() + int64_t{ids[i]} * c;
    const float* p = positional ? wpe.data<float>() + (i % t) * c : nullptr;
    for (int64_t k = 0; k < c; ++k) po[i * c + k] = e[k] + (p ? p[k] : 0.f);
  }
  return absl::OkStatus();
}

absl::Status CpuKernelOps::EmbeddingBackward(const KernelContext&, Tensor& dwte, Tensor& dwpe,
                                             const Tensor& dout, const Tensor& tokens) {
  WEFT_RETURN_IF_ERROR(CheckCpu(dwte, "embedding dwte"));
  WEFT_RETURN_IF_ERROR(CheckTokens(tokens, dwte.dim(0)));
  const int64_t b = tokens.dim(0), t = tokens.dim(1), c = dwte.dim(1);
  WEFT_RETURN_IF_ERROR(CheckShape(dout, "embedding dout", {b, t, c}));
  if (dwpe.defined()) WEFT_RETURN_IF_ERROR(CheckCpu(dwpe, "embedding dwpe"));
  const int32_t* ids = tokens.data<int32_t>();
  const float* g = dout.data<float>();
  for (int64_t i = 0; i < b * t; ++i) {
    float* e = dwte.data<float>() + int64_t{ids[i]} * c;
    float* p = dwpe.defined() ? dwpe.data<float>() + (i % t) * c : nullptr;
    for (int64_t k = 0; k < c; ++k) {
      e[k] += g[i * c + k];
      if (p) p[k] += g[i * c + k];
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
