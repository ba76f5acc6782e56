// ReduceOp: how AllReduce and ReduceScatter combine the ranks' values.
//
// kAvg is the sum divided by the group size after summing (not a mean of
// partial means), and is defined for floating-point dtypes only: integer
// averages would need a rounding rule, and callers that want one can
// divide a kSum result themselves.
#ifndef WEFT_COMM_PROCESS_GROUP_REDUCE_OP_H_
#define WEFT_COMM_PROCESS_GROUP_REDUCE_OP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::comm {

enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin };

absl::string_view ReduceOpName(ReduceOp op);  // "sum", "avg", "max", "min"
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_REDUCE_OP_H_
