// Softmax + cross-entropy, fused over a whole row or in three steps over a
// vocabulary-parallel shard of its columns (tensor parallelism; see KernelOps
// and vocab_shard.h). Both use the same row helpers, as cuda/cross_entropy.cu
// does, so a single shard computes what the fused op does. The gradient
// overwrites the logits so the (rows, vocab) probabilities are never stored
// twice.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/vocab_shard.h"

namespace weft::cpu {
namespace {

absl::Status CheckTarget(int32_t y, int64_t row, int64_t vocab) {
  if (y < vocab) return absl::OkStatus();
  return InvalidArgument(absl::StrCat("target id ", y, " in row ", row),
                         absl::StrCat("ids < vocab ", vocab));
}

// Max of z[0, real) and the sum of exp relative to it, in double; (-inf, 0)
// for a shard without real columns.
struct MaxSum {
  float max = -INFINITY;
  double sum = 0;
};
MaxSum RowMaxSum(const float* z, int64_t real) {
  MaxSum r;
  for (int64_t j = 0; j < real; ++j) r.max = std::max(r.max, z[j]);
  if (r.max == -INFINITY) return r;
  for (int64_t j = 0; j < real; ++j) r.sum += std::exp(double(z[j] - r.max));
  return r;
}

float LogSum(double sum) { return static_cast<float>(std::log(sum)); }

// Row z (cols) becomes scale * (softmax - onehot(target_col)) on columns
// [0, real) and 0 on the padding.
void WriteRowGrad(float* z, int64_t cols, int64_t real, int64_t target_col, float max,
                  float log_sum, float scale) {
  for (int64_t j = 0; j < real; ++j) {
    const float p = std::exp(z[j] - max - log_sum);
    z[j] = scale * (p - (j == target_col ? 1.f : 0.f));
  }
  std::fill(z + real, z + cols, 0.f);
}

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

absl::Status CpuKernelOps::CrossEntropyForwardBackward(const KernelContext&, Tensor& losses,
                                                       Tensor& logits, const Tensor& targets,
                                                       int64_t vocab, float dloss_scale,
                                                       bool compute_grad) {
  WEFT_RETURN_IF_ERROR(CheckCpu(logits, "cross_entropy logits"));
  const int64_t vp = logits.dim(-1), rows = logits.numel() / vp;
  if (vocab <= 0 || vocab > vp) {
    return InvalidArgument(absl::StrCat("vocab ", vocab, " with ", vp, " logit columns"),
                           "0 < vocab <= padded vocab");
  }
  WEFT_RETURN_IF_ERROR(CheckNumel(targets, "cross_entropy targets", rows, DType::kI32));
  WEFT_RETURN_IF_ERROR(CheckNumel(losses, "cross_entropy losses", rows));
  float* pl = logits.data<float>();
  const int32_t* tg = targets.data<int32_t>();
  float* loss = losses.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float* z = pl + r * vp;
    const int32_t y = tg[r];
    WEFT_RETURN_IF_ERROR(CheckTarget(y, r, vocab));
    if (y < 0) {  // ignored position
      loss[r] = 0;
      if (compute_grad) std::fill(z, z + vp, 0.f);
      continue;
    }
    const MaxSum s = RowMaxSum(z, vocab);
    const float log_sum = LogSum(s.sum);
    loss[r] = -(z[y] - s.max - log_sum);
    if (compute_grad) WriteRowGrad(z, vp, vocab, y, s.max, log_sum, dloss_scale);
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
    WEFT_RETURN_IF_ERROR(CheckTarget(y[i], i, vocab));
    mx[i] = -INFINITY;
    se[i] = 0;
    tl[i] = 0;
    if (y[i] < 0) continue;  // ignored position
    const float* row = z + i * cols;
    const MaxSum s = RowMaxSum(row, real);
    mx[i] = s.max;
    se[i] = static_cast<float>(s.sum);
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
    const float log_sum = LogSum(se[i]);
    loss[i] = -(tl[i] - mx[i] - log_sum);
    if (compute_grad) {
      WriteRowGrad(row, cols, real, VocabLocalColumn(y[i], vocab_begin, real), mx[i], log_sum,
                   dloss_scale);
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
