// Contiguous splits of a model's stage list (Model::Stages: embed, blocks,
// head) over the pipeline's chunks. By count: parts differ by at most one
// stage. By cost (parameters, or times measured over a few steps): the
// split that minimizes the most expensive part, the pipeline's bottleneck.
// A split is given as part boundaries: part i holds stages
// [bounds[i], bounds[i + 1]).
#ifndef WEFT_STRATEGIES_PP_STAGE_SPLIT_H_
#define WEFT_STRATEGIES_PP_STAGE_SPLIT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::pp {

absl::StatusOr<std::vector<int>> SplitByCount(int num_stages, int parts);
absl::StatusOr<std::vector<int>> SplitByCost(const std::vector<double>& costs, int parts);

// "part 0: embed..blocks.2 (3 stages, cost 1.2e6) | part 1: ..." for logs.
std::string DescribeSplit(const std::vector<std::string>& names, const std::vector<double>& costs,
                          const std::vector<int>& bounds);

}  // namespace weft::pp

#endif  // WEFT_STRATEGIES_PP_STAGE_SPLIT_H_
