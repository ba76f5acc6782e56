#include "strategies/cp/cp_routing_exchange.h"

#include <bit>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/cp/zigzag.h"

namespace weft::cp {

std::vector<int64_t> ZigzagTokenIndex(int rank, int cp, int64_t chunk_len, int64_t samples) {
  const TokenChunks chunks = ZigzagOf(rank, cp, chunk_len);
  const int64_t local = chunks.size(), seq_len = chunks.seq_len;
  std::vector<int64_t> index(samples * local);
  for (int64_t b = 0; b < samples; ++b) {
    for (int64_t r = 0; r < local; ++r) index[b * local + r] = b * seq_len + chunks.Position(r);
  }
  return index;
}

std::vector<int32_t> OrderZigzagChoices(const std::vector<int32_t>& gathered, int cp,
                                        int64_t chunk_len, int64_t samples, int k) {
  std::vector<int32_t> ordered(gathered.size());
  const size_t block = gathered.size() / cp;
  for (int r = 0; r < cp; ++r) {
    const std::vector<int64_t> index = ZigzagTokenIndex(r, cp, chunk_len, samples);
    for (size_t t = 0; t < index.size(); ++t) {
      for (int j = 0; j < k; ++j) ordered[index[t] * k + j] = gathered[r * block + t * k + j];
    }
  }
  return ordered;
}

absl::StatusOr<RoutingExchange::Choices> CpRoutingExchange::Gather(RunContext& ctx,
                                                                   const Tensor& idx,
                                                                   int64_t samples) {
  const int cp = group_->size(), rank = group_->rank();
  const int64_t n = idx.dim(0), k = idx.dim(1);
  if (!ctx.sequence.has_value() || samples < 1 || n % samples != 0) {
    return FailedPrecondition(
        absl::StrCat("MoE routing under cp with ", n, " tokens in ", samples,
                     " samples and ", ctx.sequence.has_value() ? "" : "no ",
                     "sequence chunks set"),
        "the cp model's forward (RunContext::sequence: this rank's zigzag chunks)",
        "run the model through ForwardLoss of the cp wrapper");
  }
  const TokenChunks& mine = *ctx.sequence;
  const int64_t chunk_len = mine.chunk_len;
  const TokenChunks expected = ZigzagOf(rank, cp, chunk_len);
  bool zigzag = mine.count == expected.count && n / samples == expected.size();
  for (int i = 0; zigzag && i < mine.count; ++i) zigzag = mine.offsets[i] == expected.offsets[i];
  if (!zigzag) {
    return FailedPrecondition(
        absl::StrCat("MoE layer under cp rank ", rank, " of ", cp, " sees ", n / samples,
                     " tokens per sample at positions other than its zigzag chunks"),
        "MoE input of whole zigzag chunks (2 chunks of seq_len / (2 x cp) tokens)",
        "a strategy that splits the chunks further must hand the MoE layer the whole chunks "
        "(sp does: tp::SequenceGathered)");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor all, ctx.Empty({cp * n, k}, DType::kI32));
  absl::Status s = group_->AllGather(idx, all, {.stream = ctx.stream})->Wait();
  if (!s.ok()) return Annotate(s, "MoE routing choices all_gather over the cp group");
  WEFT_ASSIGN_OR_RETURN(std::vector<int32_t> gathered, all.ToVector<int32_t>());
  bytes_ += (cp - 1) * n * k * static_cast<int64_t>(sizeof(int32_t));
  Choices c;
  c.experts_of = OrderZigzagChoices(gathered, cp, chunk_len, samples, static_cast<int>(k));
  c.local_index = ZigzagTokenIndex(rank, cp, chunk_len, samples);
  return c;
}

absl::Status CpRoutingExchange::Sum(RunContext& ctx, std::vector<double>& values) {
  const int cp = group_->size();
  const int64_t m = static_cast<int64_t>(values.size());
  // Doubles travel as their bits (no f64 dtype); each rank adds the parts in
  // rank order, so all get the same sum.
  std::vector<int64_t> bits(m);
  for (int64_t i = 0; i < m; ++i) bits[i] = std::bit_cast<int64_t>(values[i]);
  WEFT_ASSIGN_OR_RETURN(Tensor mine, Tensor::FromVector<int64_t>(bits, {m}));
  if (!ctx.device.is_cpu()) {
    WEFT_ASSIGN_OR_RETURN(mine, mine.To(ctx.device, ctx.stream));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor all, ctx.Empty({cp * m}, DType::kI64));
  absl::Status s = group_->AllGather(mine, all, {.stream = ctx.stream})->Wait();
  if (!s.ok()) return Annotate(s, "MoE routing statistics all_gather over the cp group");
  WEFT_ASSIGN_OR_RETURN(bits, all.ToVector<int64_t>());
  bytes_ += (cp - 1) * m * static_cast<int64_t>(sizeof(int64_t));
  for (int64_t i = 0; i < m; ++i) {
    double sum = 0;
    for (int r = 0; r < cp; ++r) sum += std::bit_cast<double>(bits[r * m + i]);
    values[i] = sum;
  }
  return absl::OkStatus();
}

}  // namespace weft::cp
