#include "core/parallel/reduce_dtype.h"

namespace weft {

absl::StatusOr<DType> ReduceDType(const StrategyOptionSet& options, DType grad_dtype) {
  const std::string& name = options.GetEnum("reduce_dtype");
  if (name == "auto") return grad_dtype;
  return ParseDType(name);
}

}  // namespace weft
