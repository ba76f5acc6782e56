// Trainer::InitStepGraph: what --cuda_graph refuses, and the step graph it
// makes (the capture and the replays are in trainer.cc's step loop).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/trainer.h"

namespace weft {

absl::Status Trainer::InitStepGraph() {
  if (!ctx_.device.is_cuda()) {
    return FailedPrecondition(absl::StrCat("--cuda_graph on ", ctx_.device.ToString()),
                              "a CUDA device (--device=cuda)",
                              "graphs replay GPU work; drop --cuda_graph off the GPU");
  }
  // Strategies that only rewrap modules say so (CapturableInStepGraph).
  if (parallel_->world_size != 1 || !parallel_->step_graph_capturable ||
      !parallel_->participants.empty() ||
      parallel_->sums_loss() || parallel_->step_schedule != nullptr) {
    return FailedPrecondition(
        absl::StrCat("--cuda_graph with world size ", parallel_->world_size, " and strategy '",
                     absl::StrJoin(parallel_->strategy_names, ","), "'"),
        "one process with no strategy but recompute",
        "collectives and the strategies' step hooks are not captured yet; drop --cuda_graph");
  }
  for (Module* m : model_->Modules()) {
    if (m->type_name() == "MoeLayer") {
      return FailedPrecondition(absl::StrCat("--cuda_graph with the mixture-of-experts layer ",
                                             m->name()),
                                "a dense model",
                                "expert routing reads its token counts on the host every step");
    }
  }
  WEFT_ASSIGN_OR_RETURN(graph_, StepGraph::Create(compute_stream()));
  WEFT_RETURN_IF_ERROR(optimizer_->KeepStepScalarsInMemory(ctx_.device, optim_alloc_.get(),
                                                           ctx_.stream));
  logger_->Print(absl::StrCat(
      "cuda_graph: the first ", kEagerStepsBeforeCapture,
      " steps run eagerly, the next is captured and every later step replays it (the step's "
      "parts show as other)"));
  return absl::OkStatus();
}

}  // namespace weft
