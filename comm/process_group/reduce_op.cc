#include "comm/process_group/reduce_op.h"

#include "core/base/errors.h"

namespace weft::comm {

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    if (ReduceOpName(op) == name) return op;
  }
  return InvalidArgument("unknown reduce op '" + std::string(name) + "'",
                         "one of sum, avg, max, min");
}

}  // namespace weft::comm
