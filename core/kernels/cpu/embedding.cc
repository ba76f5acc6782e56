// Token + position embedding, of a whole table or of a vocabulary-parallel
// shard (tensor parallelism): one loop for both, as in cuda/embedding.cu.
// Backward visits positions in order, so the scatter-add into the token
// table is deterministic.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/vocab_shard.h"

namespace weft::cpu {
namespace {

// A whole table must hold every token; a shard adds 0 for the ones it lacks.
absl::Status CheckTokens(const Tensor& tokens, int64_t vocab_rows) {
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

// Operands of forward (wte, out, wpe) or backward (dwte, dout, dwpe): tokens
// (B, T), table (rows, C), activations (B, T, C), positions (>= T, C) or none.
absl::Status CheckArgs(absl::string_view op, bool backward, const Tensor& table,
                       const Tensor& tokens, const Tensor& act, const Tensor& pos) {
  const std::string d = backward ? "d" : "";
  WEFT_RETURN_IF_ERROR(CheckCpu(table, absl::StrCat(op, " ", d, "wte")));
  WEFT_RETURN_IF_ERROR(CheckCpu(tokens, absl::StrCat(op, " tokens"), DType::kI32));
  if (table.ndim() != 2 || tokens.ndim() != 2) {
    return InvalidArgument(absl::StrCat(op, " shapes"),
                           absl::StrCat("tokens (B, T) and ", d, "wte (rows, C)"));
  }
  const int64_t t = tokens.dim(1), c = table.dim(1);
  WEFT_RETURN_IF_ERROR(CheckShape(act, absl::StrCat(op, backward ? " dout" : " out"),
                                  {tokens.dim(0), t, c}));
  if (!pos.defined()) return absl::OkStatus();
  WEFT_RETURN_IF_ERROR(CheckCpu(pos, absl::StrCat(op, " ", d, "wpe")));
  if (pos.ndim() != 2 || pos.dim(1) != c || pos.dim(0) < t) {
    return InvalidArgument(absl::StrCat(d, "wpe has shape ", ShapeString(pos.shape())),
                           absl::StrCat("(>= ", t, ", ", c, ")"),
                           "the sequence is longer than max_seq_len");
  }
  return absl::OkStatus();
}

// The table holds global rows [vocab_begin, vocab_begin + rows).
void Forward(Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t vocab_begin,
             const Tensor& wpe) {
  const int64_t rows = wte.dim(0), c = wte.dim(1), t = tokens.dim(1);
  const int32_t* ids = tokens.data<int32_t>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    const int64_t row = VocabLocalRow(ids[i], vocab_begin, rows);
    const float* e = row >= 0 ? wte.data<float>() + row * c : nullptr;
    const float* p = wpe.defined() ? wpe.data<float>() + (i % t) * c : nullptr;
    for (int64_t k = 0; k < c; ++k) po[i * c + k] = (e ? e[k] : 0.f) + (p ? p[k] : 0.f);
  }
}

void Backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
              int64_t vocab_begin) {
  const int64_t rows = dwte.dim(0), c = dwte.dim(1), t = tokens.dim(1);
  const int32_t* ids = tokens.data<int32_t>();
  const float* g = dout.data<float>();
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    const int64_t row = VocabLocalRow(ids[i], vocab_begin, rows);
    float* e = row >= 0 ? dwte.data<float>() + row * c : nullptr;
    float* p = dwpe.defined() ? dwpe.data<float>() + (i % t) * c : nullptr;
    for (int64_t k = 0; k < c; ++k) {
      if (e) e[k] += g[i * c + k];
      if (p) p[k] += g[i * c + k];
    }
  }
}

}  // namespace

absl::Status CpuKernelOps::EmbeddingForward(const KernelContext&, Tensor& out,
                                            const Tensor& tokens, const Tensor& wte,
                                            const Tensor& wpe) {
  WEFT_RETURN_IF_ERROR(CheckArgs("embedding", false, wte, tokens, out, wpe));
  WEFT_RETURN_IF_ERROR(CheckTokens(tokens, wte.dim(0)));
  Forward(out, tokens, wte, 0, wpe);
  return absl::OkStatus();
}

absl::Status CpuKernelOps::EmbeddingBackward(const KernelContext&, Tensor& dwte, Tensor& dwpe,
                                             const Tensor& dout, const Tensor& tokens) {
  WEFT_RETURN_IF_ERROR(CheckArgs("embedding", true, dwte, tokens, dout, dwpe));
  WEFT_RETURN_IF_ERROR(CheckTokens(tokens, dwte.dim(0)));
  Backward(dwte, dwpe, dout, tokens, 0);
  return absl::OkStatus();
}

absl::Status CpuKernelOps::VocabEmbeddingForward(const KernelContext&, Tensor& out,
                                                 const Tensor& tokens, const Tensor& wte_shard,
                                                 int64_t vocab_begin, const Tensor& wpe) {
  WEFT_RETURN_IF_ERROR(CheckArgs("vocab embedding", false, wte_shard, tokens, out, wpe));
  Forward(out, tokens, wte_shard, vocab_begin, wpe);
  return absl::OkStatus();
}

absl::Status CpuKernelOps::VocabEmbeddingBackward(const KernelContext&, Tensor& dwte_shard,
                                                  Tensor& dwpe, const Tensor& dout,
                                                  const Tensor& tokens, int64_t vocab_begin) {
  WEFT_RETURN_IF_ERROR(CheckArgs("vocab embedding", true, dwte_shard, tokens, dout, dwpe));
  Backward(dwte_shard, dwpe, dout, tokens, vocab_begin);
  return absl::OkStatus();
}

}  // namespace weft::cpu
