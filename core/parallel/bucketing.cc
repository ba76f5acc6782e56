#include "core/parallel/bucketing.h"

#include <algorithm>

namespace weft {

std::vector<std::vector<Parameter*>> BucketInBackwardOrder(const std::vector<Parameter*>& params,
                                                           double bucket_mb,
                                                           size_t element_bytes) {
  const int64_t limit = std::max<int64_t>(
      1, static_cast<int64_t>(bucket_mb * (1 << 20)) / static_cast<int64_t>(element_bytes));
  std::vector<std::vector<Parameter*>> buckets;
  std::vector<Parameter*> current;
  int64_t numel = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    current.push_back(*it);
    numel += (*it)->numel();
    if (numel >= limit) {
      buckets.push_back(std::move(current));
      current.clear();
      numel = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace weft
