// The reduce_dtype option shared by the sharded data-parallel strategies
// (fsdp, zero): the dtype gradients are reduced in. "auto" keeps the
// gradient dtype; "f32" / "bf16" force one.
#ifndef WEFT_CORE_PARALLEL_REDUCE_DTYPE_H_
#define WEFT_CORE_PARALLEL_REDUCE_DTYPE_H_

#include "absl/status/statusor.h"
#include "core/parallel/option_schema.h"
#include "core/tensor/dtype.h"

namespace weft {

inline void AddReduceDTypeOption(OptionSchema& schema) {
  schema.Enum("reduce_dtype", "auto", {"auto", "f32", "bf16"},
              "dtype gradients are reduced in (auto: the gradient dtype)");
}

// The dtype to reduce in, from the option added by AddReduceDTypeOption.
absl::StatusOr<DType> ReduceDType(const StrategyOptionSet& options, DType grad_dtype);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_REDUCE_DTYPE_H_
