// CudaKernelOps: the vocabulary-parallel embedding and cross-entropy (tensor
// parallelism). Operand checks here; kernels in embedding.cu (shared with the
// whole-table embedding, including its deterministic sort-based backward)
// and cross_entropy.cu (the fused kernel's row passes).
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cuda/cross_entropy.h"
#include "core/kernels/cuda/cuda_ops.h"
#include "core/kernels/cuda/embedding.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/tensor/cuda/device_guard.h"

namespace weft::cuda {
namespace {

// tokens (B, T) i32 and a table shard (rows, C) in a compute dtype.
absl::Status CheckTable(const KernelContext& ctx, const Tensor& tokens, const Tensor& table,
                        const char* name) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, tokens, "vocab embedding tokens", DType::kI32));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, table, name));
  if (table.ndim() != 2 || tokens.ndim() != 2) {
    return InvalidArgument(absl::StrCat("vocab embedding shapes: tokens ",
                                        ShapeString(tokens.shape()), ", ", name, " ",
                                        ShapeString(table.shape())),
                           "tokens (B, T) and a table shard (rows, C)");
  }
  return absl::OkStatus();
}

// The position table (or its gradient), when defined: (>= T, C), like `like`.
absl::Status CheckPositions(const KernelContext& ctx, const Tensor& wpe, const Tensor& like,
                            int64_t t, int64_t c, const char* name) {
  if (!wpe.defined()) return absl::OkStatus();
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, wpe, name));
  WEFT_RETURN_IF_ERROR(CheckSameDType(wpe, name, like, "the table"));
  if (wpe.ndim() != 2 || wpe.dim(1) != c || wpe.dim(0) < t) {
    return InvalidArgument(absl::StrCat(name, " has shape ", ShapeString(wpe.shape())),
                           absl::StrCat("(>= ", t, ", ", c, ")"),
                           "the sequence is longer than max_seq_len");
  }
  return absl::OkStatus();
}

// logits (N, cols) in a compute dtype, N i32 targets, f32 (N) statistics.
absl::StatusOr<VocabShardArgs> CheckShard(const KernelContext& ctx, const Tensor& logits,
                                          const Tensor& targets, int64_t vocab_begin,
                                          int64_t vocab,
                                          std::initializer_list<const Tensor*> stats) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, logits, "vocab cross_entropy logits"));
  if (logits.ndim() < 1 || logits.dim(-1) == 0) {
    return InvalidArgument("vocab cross_entropy logits " + ShapeString(logits.shape()),
                           "(N, columns) with columns > 0");
  }
  if (vocab_begin < 0 || vocab <= 0) {
    return InvalidArgument(absl::StrCat("vocab shard at column ", vocab_begin, " of vocab ", vocab),
                           "vocab_begin >= 0 and vocab > 0");
  }
  VocabShardArgs a;
  a.cols = logits.dim(-1);
  a.rows = logits.numel() / a.cols;
  a.dtype = logits.dtype();
  a.vocab_begin = vocab_begin;
  a.vocab = vocab;
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, targets, "vocab cross_entropy targets", DType::kI32));
  WEFT_RETURN_IF_ERROR(CheckNumel(targets, "vocab cross_entropy targets", a.rows));
  for (const Tensor* t : stats) {
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, *t, "vocab cross_entropy row statistics", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckNumel(*t, "vocab cross_entropy row statistics", a.rows));
  }
  a.targets = targets.data<int32_t>();
  return a;
}

}  // namespace

absl::Status CudaKernelOps::VocabEmbeddingForward(const KernelContext& ctx, Tensor& out,
                                                  const Tensor& tokens, const Tensor& wte_shard,
                                                  int64_t vocab_begin, const Tensor& wpe) {
  WEFT_RETURN_IF_ERROR(CheckTable(ctx, tokens, wte_shard, "vocab embedding wte"));
  const int64_t b = tokens.dim(0), t = tokens.dim(1), c = wte_shard.dim(1);
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "vocab embedding out"));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "vocab embedding out", {b, t, c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "vocab embedding out", wte_shard, "the table"));
  WEFT_RETURN_IF_ERROR(CheckPositions(ctx, wpe, wte_shard, t, c, "vocab embedding wpe"));
  DeviceGuard guard(ctx.device.index);
  return LaunchVocabEmbeddingForward(out.raw_data(), tokens.data<int32_t>(), wte_shard.raw_data(),
                                     wpe.defined() ? wpe.raw_data() : nullptr, wte_shard.dtype(),
                                     b, t, c, wte_shard.dim(0), vocab_begin, StreamOf(ctx));
}

absl::Status CudaKernelOps::VocabEmbeddingBackward(const KernelContext& ctx, Tensor& dwte_shard,
                                                   Tensor& dwpe, const Tensor& dout,
                                                   const Tensor& tokens, int64_t vocab_begin) {
  WEFT_RETURN_IF_ERROR(CheckTable(ctx, tokens, dwte_shard, "vocab embedding dwte"));
  const int64_t b = tokens.dim(0), t = tokens.dim(1), c = dwte_shard.dim(1);
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dout, "vocab embedding dout"));
  WEFT_RETURN_IF_ERROR(CheckShape(dout, "vocab embedding dout", {b, t, c}));
  WEFT_RETURN_IF_ERROR(CheckPositions(ctx, dwpe, dwte_shard, t, c, "vocab embedding dwpe"));
  DeviceGuard guard(ctx.device.index);
  WEFT_ASSIGN_OR_RETURN(size_t bytes, EmbeddingBackwardScratchBytes(b * t, dwte_shard.dim(0)));
  WEFT_ASSIGN_OR_RETURN(Tensor scratch, Scratch(ctx, static_cast<int64_t>(bytes)));
  return LaunchEmbeddingBackward(dwte_shard.raw_data(), dwpe.defined() ? dwpe.raw_data() : nullptr,
                                 dwte_shard.dtype(), dout.raw_data(), dout.dtype(),
                                 tokens.data<int32_t>(), b, t, c, dwte_shard.dim(0), vocab_begin,
                                 scratch.raw_data(), bytes, StreamOf(ctx));
}

absl::Status CudaKernelOps::VocabCrossEntropyStats(const KernelContext& ctx, Tensor& row_max,
                                                   Tensor& sum_exp, Tensor& target_logit,
                                                   const Tensor& logits, const Tensor& targets,
                                                   int64_t vocab_begin, int64_t vocab) {
  WEFT_ASSIGN_OR_RETURN(VocabShardArgs a, CheckShard(ctx, logits, targets, vocab_begin, vocab,
                                                     {&row_max, &sum_exp, &target_logit}));
  DeviceGuard guard(ctx.device.index);
  return LaunchVocabCrossEntropyStats(a, logits.raw_data(), row_max.data<float>(),
                                      sum_exp.data<float>(), target_logit.data<float>(),
                                      StreamOf(ctx));
}

absl::Status CudaKernelOps::VocabCrossEntropyRescale(const KernelContext& ctx, Tensor& sum_exp,
                                                     const Tensor& row_max,
                                                     const Tensor& global_max) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, sum_exp, "vocab cross_entropy sum_exp", DType::kF32));
  const int64_t n = sum_exp.numel();
  for (const Tensor* t : {&row_max, &global_max}) {
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, *t, "vocab cross_entropy row max", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckNumel(*t, "vocab cross_entropy row max", n));
  }
  DeviceGuard guard(ctx.device.index);
  return LaunchVocabCrossEntropyRescale(sum_exp.data<float>(), row_max.data<float>(),
                                        global_max.data<float>(), n, StreamOf(ctx));
}

absl::Status CudaKernelOps::VocabCrossEntropyFinish(const KernelContext& ctx, Tensor& losses,
                                                    Tensor& logits, const Tensor& targets,
                                                    int64_t vocab_begin, int64_t vocab,
                                                    const Tensor& global_max,
                                                    const Tensor& sum_exp,
                                                    const Tensor& target_logit,
                                                    float dloss_scale, bool compute_grad) {
  WEFT_ASSIGN_OR_RETURN(VocabShardArgs a,
                        CheckShard(ctx, logits, targets, vocab_begin, vocab,
                                   {&losses, &global_max, &sum_exp, &target_logit}));
  DeviceGuard guard(ctx.device.index);
  return LaunchVocabCrossEntropyFinish(a, logits.raw_data(), losses.data<float>(),
                                       global_max.data<float>(), sum_exp.data<float>(),
                                       target_logit.data<float>(), dloss_scale, compute_grad,
                                       StreamOf(ctx));
}

}  // namespace weft::cuda
