#include "core/nn/stage.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

std::string StageTensor::ToString() const {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ") ", DTypeName(dtype));
}

std::vector<Parameter*> Stage::Parameters() const {
  std::vector<Parameter*> out;
  absl::flat_hash_set<Parameter*> seen;
  std::vector<Module*> all = modules;
  if (loss != nullptr) all.push_back(loss);
  for (Module* top : all) {
    for (Module* m : top->Modules()) {
      for (const auto& p : m->own_parameters()) {
        if (seen.insert(p.get()).second) out.push_back(p.get());
      }
      for (Parameter* p : m->BorrowedParameters()) {
        if (seen.insert(p).second) out.push_back(p);
      }
    }
  }
  return out;
}

absl::StatusOr<Tensor> ForwardStage(RunContext& ctx, const Stage& stage, const Tensor& x,
                                    const LossInputs& loss) {
  Tensor h = x;
  for (Module* m : stage.modules) {
    WEFT_ASSIGN_OR_RETURN(h, m->CallForward(ctx, h));
  }
  if (stage.loss == nullptr) return h;
  if (loss.targets == nullptr) {
    return InvalidArgument(absl::StrCat("stage '", stage.name, "' ends in a loss"),
                           "targets for the loss stage");
  }
  return stage.loss->CallLoss(ctx, h, *loss.targets, loss.dloss_scale);
}

absl::StatusOr<Tensor> BackwardStage(RunContext& ctx, const Stage& stage, const Tensor& dy) {
  Tensor g = dy;
  if (stage.loss != nullptr) {
    WEFT_ASSIGN_OR_RETURN(g, stage.loss->CallBackward(ctx, Tensor()));
  }
  for (auto it = stage.modules.rbegin(); it != stage.modules.rend(); ++it) {
    WEFT_ASSIGN_OR_RETURN(g, (*it)->CallBackward(ctx, g));
  }
  return g;
}

namespace {
absl::Status CheckRange(const std::vector<Stage>& stages, int first, int last) {
  if (first < 0 || last > static_cast<int>(stages.size()) || first >= last) {
    return InvalidArgument(absl::StrCat("stage range [", first, ", ", last, ")"),
                           absl::StrCat("0 <= first < last <= ", stages.size()));
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<Tensor> ForwardStages(RunContext& ctx, const std::vector<Stage>& stages, int first,
                                     int last, const Tensor& x, const LossInputs& loss) {
  WEFT_RETURN_IF_ERROR(CheckRange(stages, first, last));
  Tensor h = x;
  for (int s = first; s < last; ++s) {
    WEFT_ASSIGN_OR_RETURN(h, ForwardStage(ctx, stages[s], h, loss));
  }
  return h;
}

absl::StatusOr<Tensor> BackwardStages(RunContext& ctx, const std::vector<Stage>& stages,
                                      int first, int last, const Tensor& dy) {
  WEFT_RETURN_IF_ERROR(CheckRange(stages, first, last));
  Tensor g = dy;
  for (int s = last - 1; s >= first; --s) {
    WEFT_ASSIGN_OR_RETURN(g, BackwardStage(ctx, stages[s], g));
  }
  return g;
}

std::vector<SharedParameter> ParametersSharedAcrossStages(const std::vector<Stage>& stages) {
  absl::flat_hash_map<Parameter*, std::vector<int>> users;
  std::vector<Parameter*> order;
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    for (Parameter* p : stages[s].Parameters()) {
      std::vector<int>& u = users[p];
      if (u.empty()) order.push_back(p);
      u.push_back(s);
    }
  }
  std::vector<SharedParameter> out;
  for (Parameter* p : order) {
    if (users[p].size() > 1) out.push_back({p, users[p]});
  }
  return out;
}

}  // namespace weft
