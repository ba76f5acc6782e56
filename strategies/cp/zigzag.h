// Zigzag layout of context parallelism: the sequence is cut into 2 x cp
// equal chunks and cp rank r holds chunks r and 2cp-1-r. Under a causal
// mask an early chunk attends to few keys and a late chunk to many; pairing
// them gives every rank the same work, so no rank idles in the ring.
#ifndef WEFT_STRATEGIES_CP_ZIGZAG_H_
#define WEFT_STRATEGIES_CP_ZIGZAG_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/kernels/token_chunks.h"
#include "core/nn/run_context.h"

namespace weft::cp {

// seq_len must split into 2 x cp equal chunks; the error names both numbers
// and the nearest lengths that work.
absl::Status CheckSeqLen(int64_t seq_len, int cp);

// The chunks of `rank` when chunks are chunk_len tokens long.
TokenChunks ZigzagOf(int rank, int cp, int64_t chunk_len);

// The chunks of `rank` for a sequence of seq_len tokens (checked).
absl::StatusOr<TokenChunks> ZigzagChunks(int rank, int cp, int64_t seq_len);

// The columns of `full` (B, T, ...) at `chunks`' positions, contiguous
// (B, chunks.size(), ...), on full's device.
absl::StatusOr<Tensor> TakeChunks(const RunContext& ctx, const Tensor& full,
                                  const TokenChunks& chunks);

}  // namespace weft::cp

#endif  // WEFT_STRATEGIES_CP_ZIGZAG_H_
