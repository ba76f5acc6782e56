// Launchers for the token + position embedding, of a whole table or of a
// vocabulary-parallel shard (rows [vocab_begin, +rows) of the table: tensor
// parallelism). tokens are i32 (B, T);
// tables and activations share the compute dtype (kF32 or kBF16); gradient
// tables are kF32 or kBF16 and accumulate (+=). wpe/dwpe may be null.
//
// Token ids outside [0, vocab_rows) cannot be reported without a host sync:
// forward writes NaN for their rows (the loss turns NaN, visibly) and
// backward skips them.
#ifndef WEFT_CORE_KERNELS_CUDA_EMBEDDING_H_
#define WEFT_CORE_KERNELS_CUDA_EMBEDDING_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

// out (B, T, C) = wte[tokens] + wpe[0..T).
absl::Status LaunchEmbeddingForward(void* out, const int32_t* tokens, const void* wte,
                                    const void* wpe, DType dtype, int64_t batch, int64_t seq,
                                    int64_t channels, int64_t vocab_rows, cudaStream_t stream);

// The shard's part of the embedding: out (B, T, C) = wte_shard[token -
// vocab_begin] for tokens it holds, 0 for the others (no NaN: they belong to
// other shards), + wpe[0..T) when wpe is not null.
absl::Status LaunchVocabEmbeddingForward(void* out, const int32_t* tokens, const void* wte_shard,
                                         const void* wpe, DType dtype, int64_t batch,
                                         int64_t seq, int64_t channels, int64_t shard_rows,
                                         int64_t vocab_begin, cudaStream_t stream);

// Bytes of device scratch LaunchEmbeddingBackward needs for B*T positions.
absl::StatusOr<size_t> EmbeddingBackwardScratchBytes(int64_t positions, int64_t vocab_rows);

// dwte[v - vocab_begin] += sum of dout over positions holding token v, in
// position order, for the vocab_rows tokens the table holds (vocab_begin 0
// for a whole table; others are skipped); dwpe[t] += sum over the batch of
// dout[:, t]. Deterministic: positions are bucketed by a stable radix sort on
// the row, then one block per distinct row sums its positions in order (no
// atomics).
absl::Status LaunchEmbeddingBackward(void* dwte, void* dwpe, DType grad_dtype, const void* dout,
                                     DType dtype, const int32_t* tokens, int64_t batch,
                                     int64_t seq, int64_t channels, int64_t vocab_rows,
                                     int64_t vocab_begin, void* scratch, size_t scratch_bytes,
                                     cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_EMBEDDING_H_
