// The layouts --strategy=auto compares for N ranks: the data-parallel
// family over all of them, and every split of N into pipeline, context-
// and tensor-parallel axes, with fsdp over the ranks left (if any).
#ifndef WEFT_TOOLS_ESTIMATE_LAYOUTS_H_
#define WEFT_TOOLS_ESTIMATE_LAYOUTS_H_

#include <string>
#include <vector>

#include "core/runtime/train_config.pb.h"

namespace weft {

struct Layout {
  std::string label;     // "zero-2", "pp2 x fsdp2", "tp2 x pp2"
  std::string strategy;  // --strategy ("" for one process, or pp/cp alone)
  int zero_stage = 0;    // > 0 with strategy "zero"
  int pp = 1, cp = 1, tp = 1;
};

// In order of communication: data-parallel (none, ddp, zero-1..3, fsdp),
// then model-parallel layouts by tp, then cp, then pp, fewest ranks first
// (a pipeline exchanges one activation per micro-batch and stage, context
// parallelism keys and values per layer, tensor parallelism activations
// several times per layer). Whether the model admits each is for the
// estimate to say.
std::vector<Layout> CandidateLayouts(int nproc);

// The job's parallel config set to `layout` (mesh sizes, strategy, zero
// stage); other settings (pp schedule, bucket sizes) stay the user's.
void ApplyLayout(const Layout& layout, ParallelConfig* config);

}  // namespace weft

#endif  // WEFT_TOOLS_ESTIMATE_LAYOUTS_H_
