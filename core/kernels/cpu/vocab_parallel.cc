// Vocabulary-parallel embedding and cross-entropy (tensor parallelism): the
// reference loops. A shard holds token-table rows and logit columns
// [vocab_begin, +cols); see KernelOps and vocab_shard.h.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/vocab_shard.h"

namespace weft::cpu {
namespace {

// Rows of logits (N, cols) and their statistics' shapes.
absl::StatusOr<int64_t> CheckRows(const Tensor& logits, const Tensor& targets,
                                  std::initializer_list<const Tensor*> stats) {
  WEFT_RETURN_IF_ERROR(CheckCpu(logits, "vocab cross_entropy logits"));
  if (logits.ndim() < 1 || logits.dim(-1) == 0) {
    return InvalidArgument("vocab cross_entropy logits " + ShapeString(logits.shape()),
                           "(N, columns) with columns > 0");
  }
  const int64_t n = logits.numel() / logits.dim(-1);
  WEFT_RETURN_IF_ERROR(CheckNumel(targets, "vocab cross_entropy targets", n, DType::kI32));
  for (const Tensor* t : stats) {
    WEFT_RETURN_IF_ERROR(CheckNumel(*t, "vocab cross_entropy row statistics", n));
  }
  return n;
}

}  // namespace

absl::Status CpuKernelOps::VocabEmbeddingForward(const KernelContext&, Tensor& out,
                                                 const Tensor& tokens, const Tensor& wte_shard,
                                                 int64_t vocab_begin, const Tensor& wpe) {
  WEFT_RETURN_IF_ERROR(CheckCpu(wte_shard, "vocab embedding wte"));
  WEFT_RETURN_IF_ERROR(CheckCpu(tokens, "vocab embedding tokens", DType::kI32));
  if (wte_shard.ndim() != 2 || tokens.ndim() != 2) {
    return InvalidArgument("vocab embedding shapes", "tokens (B, T) and wte (rows, C)");
  }
  const int64_t rows = wte_shard.dim(0), c = wte_shard.dim(1);
  const int64_t bt = tokens.numel(), t = tokens.dim(1);
  WEFT_RETURN_IF_ERROR(CheckShape(out, "vocab embedding out", {tokens.dim(0), t, c}));
  if (wpe.defined()) {
    WEFT_RETURN_IF_ERROR(CheckCpu(wpe, "vocab embedding wpe"));
    if (wpe.ndim() != 2 || wpe.dim(1) != c || wpe.dim(0) < t) {
      return InvalidArgument("wpe has shape " + ShapeString(wpe.shape()),
                             absl::StrCat("(>= ", t, ", ", c, ")"));
    }
  }
  const int32_t* ids = tokens.data<int32_t>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < bt; ++i) {
    const int64_t row = VocabLocalRow(ids[i], vocab_begin, rows);
    const float* e = row >= 0 ? wte_shard.data<float>() + row * c : nullptr;
    const float* p = wpe.defined() ? wpe.data<float>() + (i % t) * c : nullptr;
    for (int64_t k = 0; k < c; ++k) po[i * c + k] = (e ? e[k] : 0.f) + (p ? p[k] : 0.f);
  }
  return absl::OkStatus();
}

absl::Status CpuKernelOps::VocabEmbeddingBackward(const KernelContext&, Tensor& dwte_shard,
                                                  Tensor& dwpe, const Tensor& dout,
                                                  const Tensor& tokens, int64_t vocab_begin) {
  WEFT_RETURN_IF_ERROR(CheckCpu(dwte_shard, "vocab embedding dwte"));
  WEFT_RETURN_IF_ERROR(CheckCpu(tokens, "vocab embedding tokens", DType::kI32));
  if (dwte_shard.ndim() != 2 || tokens.ndim() != 2) {
    return InvalidArgument("vocab embedding shapes", "tokens (B, T) and dwte (rows, C)");
  }
  const int64_t rows = dwte_shard.dim(0), c = dwte_shard.dim(1);
  const int64_t bt = tokens.numel(), t = tokens.dim(1);
  WEFT_RETURN_IF_ERROR(CheckShape(dout, "vocab embedding dout", {tokens.dim(0), t, c}));
  if (dwpe.defined()) {
    WEFT_RETURN_IF_ERROR(CheckCpu(dwpe, "vocab embedding dwpe"));
    if (dwpe.ndim() != 2 || dwpe.dim(1) != c || dwpe.dim(0) < t) {
      return InvalidArgument("dwpe has shape " + ShapeString(dwpe.shape()),
                             absl::StrCat("(>= ", t, ", ", c, ")"));
    }
  }
  const int32_t* ids = tokens.data<int32_t>();
  const float* g = dout.data<float>();
  for (int64_t i = 0; i < bt; ++i) {
    const int64_t row = VocabLocalRow(ids[i], vocab_begin, rows);
    float* e = row >= 0 ? dwte_shard.data<float>() + row * c : nullptr;
    float* p = dwpe.defined() ? dwpe.data<float>() + (i % t) * c : nullptr;
    for (int64_t k = 0; k < c; ++k) {
      if (e) e[k] += g[i * c + k];
      if (p) p[k] += g[i * c + k];
    }
  }
  return absl::OkStatus();
}

absl::Status CpuKernelOps::VocabCrossEntropyStats(const KernelContext&, Tensor& row_max,
                                                  Tensor& sum_exp, Tensor& target_logit,
                                                  const Tensor& logits, const Tensor& targets,
                                                  int64_t vocab_begin, int64_t vocab) {
  WEFT_ASSIGN_OR_RETURN(const int64_t n,
                        CheckRows(logits, targets, {&row_max, &sum_exp, &target_logit}));
  const int64_t cols = logits.dim(-1);
  const int64_t real = VocabRealColumns(vocab_begin, cols, vocab);
  const float* z = logits.data<float>();
  const int32_t* y = targets.data<int32_t>();
  float* mx = row_max.data<float>();
  float* se = sum_exp.data<float>();
  float* tl = target_logit.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] >= vocab) {
      return InvalidArgument(absl::StrCat("target id ", y[i], " in row ", i),
                             absl::StrCat("ids < vocab ", vocab));
    }
    mx[i] = -INFINITY;
    se[i] = 0;
    tl[i] = 0;
    if (y[i] < 0) continue;  // ignored position
    const float* row = z + i * cols;
    float m = -INFINITY;
    for (int64_t j = 0; j < real; ++j) m = std::max(m, row[j]);
    double s = 0;
    if (m != -INFINITY) {
      for (int64_t j = 0; j < real; ++j) s += std::exp(double(row[j] - m));
    }
    mx[i] = m;
    se[i] = static_cast<float>(s);
    const int64_t col = VocabLocalColumn(y[i], vocab_begin, real);
    if (col >= 0) tl[i] = row[col];
  }
  return absl::OkStatus();
}

absl::Status CpuKernelOps::VocabCrossEntropyRescale(const KernelContext&, Tensor& sum_exp,
                                                    const Tensor& row_max,
                                                    const Tensor& global_max) {
  WEFT_RETURN_IF_ERROR(CheckCpu(sum_exp, "vocab cross_entropy sum_exp"));
  const int64_t n = sum_exp.numel();
  WEFT_RETURN_IF_ERROR(CheckNumel(row_max, "vocab cross_entropy row_max", n));
  WEFT_RETURN_IF_ERROR(CheckNumel(global_max, "vocab cross_entropy global_max", n));
  float* se = sum_exp.data<float>();
  const float* m = row_max.data<float>();
  const float* g = global_max.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    // A shard without real columns (or an ignored row) adds nothing.
    se[i] = m[i] == -INFINITY ? 0.f
                              : static_cast<float>(double(se[i]) * std::exp(double(m[i]) - g[i]));
  }
  return absl::OkStatus();
}

absl::Status CpuKernelOps::VocabCrossEntropyFinish(const KernelContext&, Tensor& losses,
                                                   Tensor& logits, const Tensor& targets,
                                                   int64_t vocab_begin, int64_t vocab,
                                                   const Tensor& global_max,
                                                   const Tensor& sum_exp,
                                                   const Tensor& target_logit,
                                                   float dloss_scale, bool compute_grad) {
  WEFT_ASSIGN_OR_RETURN(const int64_t n, CheckRows(logits, targets, {&global_max, &sum_exp,
                                                                     &target_logit, &losses}));
  const int64_t cols = logits.dim(-1);
  const int64_t real = VocabRealColumns(vocab_begin, cols, vocab);
  float* z = logits.data<float>();
  const int32_t* y = targets.data<int32_t>();
  const float* mx = global_max.data<float>();
  const float* se = sum_exp.data<float>();
  const float* tl = target_logit.data<float>();
  float* loss = losses.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    float* row = z + i * cols;
    if (y[i] < 0 || y[i] >= vocab) {  // ignored (Stats rejected ids >= vocab)
      loss[i] = 0;
      if (compute_grad) std::fill(row, row + cols, 0.f);
      continue;
    }
    const float log_sum = static_cast<float>(std::log(double(se[i])));
    loss[i] = -(tl[i] - mx[i] - log_sum);
    if (!compute_grad) continue;
    const int64_t col = VocabLocalColumn(y[i], vocab_begin, real);
    for (int64_t j = 0; j < real; ++j) {
      const float p = std::exp(row[j] - mx[i] - log_sum);
      row[j] = dloss_scale * (p - (j == col ? 1.f : 0.f));
    }
    std::fill(row + real, row + cols, 0.f);
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
