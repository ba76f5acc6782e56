// Gradient bucketing shared by the data-parallel strategies: parameters in
// reverse registration order (the order backward produces their gradients),
// cut into buckets of at least `bucket_mb` of `element_bytes` elements each
// (the last may be smaller). Every parameter lands in exactly one bucket.
#ifndef WEFT_CORE_PARALLEL_BUCKETING_H_
#define WEFT_CORE_PARALLEL_BUCKETING_H_

#include <cstddef>
#include <vector>

#include "core/nn/parameter.h"

namespace weft {

std::vector<std::vector<Parameter*>> BucketInBackwardOrder(const std::vector<Parameter*>& params,
                                                           double bucket_mb,
                                                           size_t element_bytes);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_BUCKETING_H_
