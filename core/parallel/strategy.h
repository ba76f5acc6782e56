// Strategy: a parallelism plugin, registered by name.
//
// A strategy may do three things to the model: hook modules (before/after
// forward and backward), swap a module for a parallel version (including
// the root, through StrategyContext::model_slot), or re-place parameters.
// What it hands back to the trainer (its StepParticipant, notes, a step
// schedule, ...) is the StrategyResult that Apply returns.
//
// A strategy declares its own place in a job (parallel_plan.h reads it):
// its mesh axes, the strategies it follows (After), when it joins a plan
// without being named (JoinsUnnamed: pp when the pp axis has ranks) and
// what it implies (Implies: expert brings a data-parallel strategy). So no
// file outside a strategy's folder needs to name it.
//
// Strategies compose on one device mesh in a fixed order, by phase:
//   tensor/sequence parallel, expert, pipeline split, recompute, then the
//   data-parallel family (fsdp, zero, ddp, dp).
// A strategy depends only on comm/ and core/ (tensor, nn, kernels, optim,
// parallel); it never includes another strategy.
#ifndef WEFT_CORE_PARALLEL_STRATEGY_H_
#define WEFT_CORE_PARALLEL_STRATEGY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/device_mesh/device_mesh.h"
#include "comm/device_mesh/mesh_layout.h"
#include "core/nn/model.h"
#include "core/nn/run_context.h"
#include "core/parallel/option_schema.h"
#include "core/parallel/parallel_state.h"
#include "core/parallel/strategy_result.h"

namespace weft {

class PlanView;  // parallel_plan.h

// The composer applies strategies in this order. Later phases build on the
// model the earlier ones left: a pipeline splits the Stages() of the tp/cp
// model and runs them on its Model::LocalBatch (cp's chunks), and the
// data-parallel strategies reduce the parameters each stage holds.
enum class StrategyPhase {
  kTensorParallel = 0,
  kExpert = 1,
  kPipeline = 2,
  kRecompute = 3,
  kDataParallel = 4,
};

struct StrategyContext {
  // The root model; a strategy may replace it (e.g. dp wraps it).
  std::unique_ptr<Model>* model_slot = nullptr;
  Model& model() { return **model_slot; }
  // The job's mesh; null when the job is a single process.
  comm::DeviceMesh* mesh = nullptr;
  RunContext* run = nullptr;          // device, stream, kernels, compute dtype
  // Model state by category, so memory savings are measurable: parameter
  // values, gradients, and anything optimizer-side a strategy keeps.
  Allocator* param_allocator = nullptr;
  Allocator* grad_allocator = nullptr;
  DType grad_dtype = DType::kF32;
  // The applied strategy's own options (set by the composer per strategy).
  const StrategyOptionSet* options = nullptr;
  // What the strategies applied so far handed back, composed (the
  // composer writes it from their StrategyResults; a strategy only reads
  // it). It outlives the job, so a participant may keep the pointer and
  // read it at step time (what later strategies added).
  const ParallelState* applied = nullptr;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string Name() const = 0;
  virtual StrategyPhase Phase() const = 0;
  // Mesh axes the strategy works on (e.g. {"dp_shard"}). The composer
  // checks each exists in a multi-rank mesh, and rejects a mesh axis of
  // size > 1 that no applied strategy lists. An axis that is not one of
  // the training mesh's (comm/device_mesh/training_mesh.h) is the
  // strategy's own: the plan adds it outermost, sized by --mesh_axes.
  virtual std::vector<std::string> RequiredAxes() const = 0;
  // Strategies of the same phase this one is applied after, when the plan
  // holds them (cp after tp and sp, so ring attention adopts their layers).
  virtual std::vector<std::string> After() const { return {}; }
  // True when the plan should apply this strategy although --strategy does
  // not name it (pp when the pp axis has more than one rank).
  virtual bool JoinsUnnamed(const PlanView& plan) const {
    (void)plan;
    return false;
  }
  // Strategies this one needs beside it: each is added unless the plan
  // already holds a strategy of its phase (expert brings ddp for the dense
  // weights unless a data-parallel strategy is named).
  virtual std::vector<std::string> Implies(const PlanView& plan) const {
    (void)plan;
    return {};
  }
  // The options the strategy reads, with types, defaults and help; the
  // composer parses the job's values against it (option_schema.h).
  virtual OptionSchema Options() const { return OptionSchema(); }
  // Checks options against the mesh (null: single process) before anything
  // is applied; errors say what was wrong, what was expected and a hint.
  virtual absl::Status Validate(const StrategyOptionSet& options,
                                const comm::MeshLayout* mesh) const = 0;
  virtual absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) = 0;
  // True when every rank still holds every parameter whole after Apply
  // under these options (ddp, dp, recompute, zero-1/2), so a rank can, for
  // example, sample text from its own model.
  virtual bool KeepsParametersWhole(const StrategyOptionSet& options) const {
    (void)options;
    return false;
  }
  // True when one process's step under it can be captured as a CUDA graph
  // (--cuda_graph): it only rewraps modules (recompute).
  virtual bool CapturableInStepGraph() const { return false; }
  // A hint for a job that names a second data-parallel strategy beside
  // this one (fsdp: its dp_replicate already gives HSDP); empty: none.
  virtual std::string HintBesideDataParallel() const { return ""; }
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_STRATEGY_H_
