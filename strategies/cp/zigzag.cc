#include "strategies/cp/zigzag.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::cp {

absl::Status CheckSeqLen(int64_t seq_len, int cp) {
  const int64_t parts = 2 * int64_t{cp};
  if (cp >= 1 && seq_len > 0 && seq_len % parts == 0) return absl::OkStatus();
  const int64_t below = seq_len / parts * parts, above = below + parts;
  return InvalidArgument(
      absl::StrCat("seq_len=", seq_len, " with --cp=", cp),
      absl::StrCat("seq_len divisible by 2 x cp = ", parts,
                   " (each cp rank holds two equal chunks of every sequence, zigzag)"),
      absl::StrCat("use --seq_len=", below > 0 ? absl::StrCat(below, " or ") : "", above));
}

absl::StatusOr<TokenChunks> ZigzagChunks(int rank, int cp, int64_t seq_len) {
  WEFT_RETURN_IF_ERROR(CheckSeqLen(seq_len, cp));
  if (rank < 0 || rank >= cp) {
    return InvalidArgument(absl::StrCat("cp rank ", rank), absl::StrCat("in [0, ", cp, ")"));
  }
  return ZigzagOf(rank, cp, seq_len / (2 * cp));
}

TokenChunks ZigzagOf(int rank, int cp, int64_t chunk_len) {
  TokenChunks c;
  c.chunk_len = chunk_len;
  c.count = 2;
  c.offsets[0] = rank * chunk_len;
  c.offsets[1] = (2 * cp - 1 - rank) * chunk_len;
  c.seq_len = 2 * cp * chunk_len;
  return c;
}

absl::StatusOr<Tensor> TakeChunks(const RunContext& ctx, const Tensor& full,
                                  const TokenChunks& chunks) {
  if (full.ndim() < 2) {
    return InvalidArgument("a sequence tensor " + full.DebugString(), "(B, T, ...)");
  }
  Shape shape = full.shape();
  shape[1] = chunks.size();
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty(shape, full.dtype()));
  const int64_t len = chunks.chunk_len;
  for (int i = 0; i < chunks.count; ++i) {
    Tensor dst = out.Slice(1, i * len, (i + 1) * len);
    WEFT_RETURN_IF_ERROR(
        dst.CopyFrom(full.Slice(1, chunks.offsets[i], chunks.offsets[i] + len), ctx.stream));
  }
  return out;
}

}  // namespace weft::cp
