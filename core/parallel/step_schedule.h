// StepSchedule: the order of one optimizer step's forwards and backwards.
//
//   Trainer ──batches──▶ StepSchedule ──F/B of micro-batch m──▶ model stages
//                            │ "last backward of this step"
//                            └──────▶ StepParticipants (ddp, zero, fsdp...) ──▶ comm
//
// A schedule is a list of actions (F0 B0 F1 B1 ... for gradient
// accumulation; a pipeline interleaves F and B across micro-batches). The
// executor tells participants, before each backward, which micro-batch it
// is and whether it is the last backward of the step, so they never count
// micro-batches themselves. Saved activations live in slot m of the run
// context's activation store between F m and B m, so any order that runs
// each F m before its B m is valid.
#ifndef WEFT_CORE_PARALLEL_STEP_SCHEDULE_H_
#define WEFT_CORE_PARALLEL_STEP_SCHEDULE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/run_context.h"
#include "core/parallel/step_participant.h"

namespace weft {

struct ScheduleAction {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int micro = 0;
  std::string ToString() const;  // "F0", "B3"
};

// What a schedule drives; the trainer implements it.
class MicroBatchRunner {
 public:
  virtual ~MicroBatchRunner() = default;
  // Forward of micro-batch `micro`: its batch, its loss, its activations in
  // slot `micro`.
  virtual absl::Status Forward(int micro) = 0;
  // Backward of micro-batch `micro` from its loss; frees slot `micro`.
  virtual absl::Status Backward(int micro) = 0;

  // For schedules that run the model piecewise (pipelines): load
  // micro-batch `micro`'s batch (once, in micro-batch order), enter its
  // context (activation slot, dropout keys), and add the losses its last
  // stage produced to the step's loss.
  struct MicroBatch {
    Tensor inputs, targets;
    float dloss_scale = 1.f;
  };
  virtual absl::StatusOr<MicroBatch> Load(int micro) {
    (void)micro;
    return absl::UnimplementedError("this runner cannot run a model piecewise");
  }
  virtual RunContext* Enter(int micro) {
    (void)micro;
    return nullptr;
  }
  virtual absl::Status AddLosses(const Tensor& losses) {
    (void)losses;
    return absl::UnimplementedError("this runner cannot run a model piecewise");
  }
  // Bracket each piece a piecewise schedule runs ("F3", "B3:1", "W3"), so
  // the runner can time it as forward or backward and show it in traces.
  virtual void BeginAction(ScheduleAction::Kind kind, const std::string& label) {
    (void)kind;
    (void)label;
  }
  virtual void EndAction() {}
};

class StepSchedule {
 public:
  virtual ~StepSchedule() = default;
  virtual std::string Name() const = 0;
  // The actions of one step over `num_micro` micro-batches.
  virtual std::vector<ScheduleAction> Actions(int num_micro) const = 0;

  // Runs Actions(num_micro) in order: checks them, and calls every
  // participant's BeforeBackward before each backward. Pipelines, which
  // also exchange activations, override it.
  virtual absl::Status Run(int num_micro, MicroBatchRunner& runner,
                           const std::vector<std::unique_ptr<StepParticipant>>& participants) const;
};

// F0 B0 F1 B1 ...: gradient accumulation, one micro-batch in flight.
class GradAccumSchedule : public StepSchedule {
 public:
  std::string Name() const override { return "grad_accum"; }
  std::vector<ScheduleAction> Actions(int num_micro) const override;
};

// A fixed order given as text ("F0 F1 B1 B0"), for tests and experiments;
// it must hold every micro-batch's F and B once, each F before its B.
class FixedOrderSchedule : public StepSchedule {
 public:
  static absl::StatusOr<std::unique_ptr<FixedOrderSchedule>> Parse(const std::string& order);
  std::string Name() const override { return "fixed"; }
  std::vector<ScheduleAction> Actions(int num_micro) const override;

 private:
  explicit FixedOrderSchedule(std::vector<ScheduleAction> actions)
      : actions_(std::move(actions)) {}
  std::vector<ScheduleAction> actions_;
};

// Checks that `actions` run each of `num_micro` micro-batches forward once
// and backward once, forward first.
absl::Status ValidateActions(const std::vector<ScheduleAction>& actions, int num_micro);
std::string ActionsToString(const std::vector<ScheduleAction>& actions);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_STEP_SCHEDULE_H_
