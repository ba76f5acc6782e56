// The layouts --strategy=auto compares for N ranks: the data-parallel
// family over all of them, for mixture-of-experts models the same with the
// experts sharded over ep of the data-parallel ranks, and every split of N
// into pipeline, context- and tensor-parallel axes, with fsdp over the
// ranks left (if any).
#ifndef WEFT_TOOLS_ESTIMATE_LAYOUTS_H_
#define WEFT_TOOLS_ESTIMATE_LAYOUTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/train_config.pb.h"

namespace weft {

struct Layout {
  std::string label;     // "zero-2", "pp2 x fsdp2", "tp2 x pp2"
  std::string strategy;  // --strategy ("" for one process, or pp/cp alone)
  int zero_stage = 0;    // > 0 with strategy "zero"
  int pp = 1, cp = 1, tp = 1;
  int ep = 1;  // experts sharded over ep of the data-parallel ranks (--ep)
};

// In order of communication: data-parallel (none, ddp, zero-1..3, fsdp);
// with num_experts > 1 (an MoE model) also ddp and fsdp with the experts
// over ep = 2, 4, ... of the ranks (ep dividing both N and num_experts):
// the routed tokens go to their experts' ranks and back in every MoE layer,
// and the experts' parameters, gradients and optimizer state are 1/ep a
// rank and leave the gradient reduction. ep x ddp comes after zero-2 (the
// last with ddp's reduction volume) and before zero-3 and fsdp, which
// gather every parameter, experts included, every step; ep x fsdp after
// fsdp. Then model-parallel layouts by tp, then cp, then pp, fewest ranks first
// (a pipeline exchanges one activation per micro-batch and stage, context
// parallelism keys and values per layer, tensor parallelism activations
// several times per layer); for an MoE model each split with fsdp over
// dp > 1 ranks is followed by the same split with the experts over ep of
// those dp ranks ("tp2 x ep2 x fsdp2"). Whether the model admits each is
// for the estimate to say.
std::vector<Layout> CandidateLayouts(int nproc, int num_experts = 0);

// The data-parallel ranks `layout` leaves of nproc.
int DataParallelRanks(const Layout& layout, int nproc);

// The micro-batch a layout runs the user's global batch with: the largest
// m <= micro_batch such that every one of `dp` data-parallel ranks gets
// whole micro-batches (global_batch divisible by m x dp) and a pipeline of
// `pp` stages gets at least pp of them per step; 0 when no m does.
int FitMicroBatch(int64_t global_batch, int micro_batch, int dp, int pp);

// The //models/gpt:train flags that select `layout` with `micro_batch`, e.g.
// "--strategy=tp,fsdp --tp=2 --micro_batch=4".
std::string LayoutFlags(const Layout& layout, int micro_batch);

// The job's parallel config set to `layout` (mesh sizes, strategy, zero
// stage); other settings (pp schedule, bucket sizes) stay the user's.
void ApplyLayout(const Layout& layout, ParallelConfig* config);

}  // namespace weft

#endif  // WEFT_TOOLS_ESTIMATE_LAYOUTS_H_
