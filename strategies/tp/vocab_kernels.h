// Kernels of the vocabulary-parallel layers: a rank holds rows
// [vocab_begin, vocab_begin + rows) of the embedding table and the same
// columns of the logits. CPU (f32) only for now: on other devices they
// return Unimplemented, so tp runs on gloo ranks but not yet on CUDA.
#ifndef WEFT_STRATEGIES_TP_VOCAB_KERNELS_H_
#define WEFT_STRATEGIES_TP_VOCAB_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/tensor/tensor.h"

namespace weft::tp {

// out (B, T, C) = wte_local[token - vocab_begin] for tokens this rank holds,
// 0 for the others; plus wpe[t] when wpe is defined (one rank adds it).
absl::Status VocabEmbeddingForward(Tensor& out, const Tensor& tokens, const Tensor& wte_local,
                                   int64_t vocab_begin, const Tensor& wpe);
// dwte_local[token - vocab_begin] += dout for tokens this rank holds;
// dwpe[t] += dout summed over the batch when dwpe is defined.
absl::Status VocabEmbeddingBackward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                    const Tensor& tokens, int64_t vocab_begin);

// Per row of logits (N, Vl) whose columns are global [vocab_begin, +Vl),
// over the columns below `vocab` (the rest is padding):
//   row_max[i] = max logit (-inf when this rank has no real column)
//   target_logit[i] = the target's logit if this rank holds it, else 0
absl::Status LocalMaxAndTarget(const Tensor& logits, const Tensor& targets, int64_t vocab_begin,
                               int64_t vocab, Tensor& row_max, Tensor& target_logit);
// sum_exp[i] = sum over real local columns of exp(logit - global_max[i]).
absl::Status LocalSumExp(const Tensor& logits, const Tensor& global_max, int64_t vocab_begin,
                         int64_t vocab, Tensor& sum_exp);
// losses[i] = log(sum_exp) + max - target_logit (0 for targets < 0); with
// compute_grad the logits become scale * (softmax - onehot) over this
// rank's columns (0 on padding and ignored rows).
absl::Status VocabCrossEntropyFinish(Tensor& logits, const Tensor& targets, int64_t vocab_begin,
                                     int64_t vocab, const Tensor& global_max,
                                     const Tensor& sum_exp, const Tensor& target_logit,
                                     float scale, bool compute_grad, Tensor& losses);

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_VOCAB_KERNELS_H_
