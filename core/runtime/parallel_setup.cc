#include "core/runtime/parallel_setup.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {

absl::StatusOr<std::unique_ptr<ParallelState>> InitParallel(const TrainConfig& config,
                                                            Device device) {
  (void)device;
  int world = 1;
  if (const char* w = std::getenv("WORLD_SIZE")) {
    if (!absl::SimpleAtoi(w, &world)) world = 1;
  }
  if (!config.parallel().strategy().empty() || world > 1) {
    return Unavailable(
        absl::StrCat("parallel training requested (strategy='", config.parallel().strategy(),
                     "', WORLD_SIZE=", world, ")"),
        "a single process with no --strategy in this build",
        "the strategy runtime is not linked into this binary yet");
  }
  return std::make_unique<ParallelState>();
}

absl::Status ApplyStrategies(const TrainConfig& config, Model& model, RunContext& ctx,
                             Allocator* state_allocator, ParallelState& state) {
  (void)config;
  (void)model;
  (void)ctx;
  (void)state_allocator;
  (void)state;
  return absl::OkStatus();
}

}  // namespace weft
