#include "core/parallel/step_schedule.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

std::string ScheduleAction::ToString() const {
  return absl::StrCat(kind == Kind::kForward ? "F" : "B", micro);
}

std::string ActionsToString(const std::vector<ScheduleAction>& actions) {
  return absl::StrJoin(actions, " ", [](std::string* out, const ScheduleAction& a) {
    out->append(a.ToString());
  });
}

absl::Status ValidateActions(const std::vector<ScheduleAction>& actions, int num_micro) {
  std::vector<int> state(num_micro, 0);  // 0: nothing yet, 1: forward done, 2: both
  for (const ScheduleAction& a : actions) {
    if (a.micro < 0 || a.micro >= num_micro) {
      return InvalidArgument(absl::StrCat("schedule action ", a.ToString()),
                             absl::StrCat("micro-batches 0..", num_micro - 1));
    }
    const int want = a.kind == ScheduleAction::Kind::kForward ? 0 : 1;
    if (state[a.micro] != want) {
      return InvalidArgument(
          absl::StrCat("schedule ", ActionsToString(actions), " at ", a.ToString()),
          "each micro-batch's forward once, then its backward once");
    }
    state[a.micro] = want + 1;
  }
  for (int m = 0; m < num_micro; ++m) {
    if (state[m] != 2) {
      return InvalidArgument(absl::StrCat("schedule ", ActionsToString(actions)),
                             absl::StrCat("F", m, " and B", m, " for every micro-batch"));
    }
  }
  return absl::OkStatus();
}

absl::Status StepSchedule::Run(
    int num_micro, MicroBatchRunner& runner,
    const std::vector<std::unique_ptr<StepParticipant>>& participants) const {
  const std::vector<ScheduleAction> actions = Actions(num_micro);
  WEFT_RETURN_IF_ERROR(ValidateActions(actions, num_micro));
  int backwards_left = num_micro;
  for (const ScheduleAction& a : actions) {
    if (a.kind == ScheduleAction::Kind::kForward) {
      WEFT_RETURN_IF_ERROR(runner.Forward(a.micro));
      continue;
    }
    --backwards_left;
    const BackwardInfo info{.micro = a.micro, .last = backwards_left == 0};
    for (auto& p : participants) WEFT_RETURN_IF_ERROR(p->BeforeBackward(info));
    WEFT_RETURN_IF_ERROR(runner.Backward(a.micro));
  }
  return absl::OkStatus();
}

std::vector<ScheduleAction> GradAccumSchedule::Actions(int num_micro) const {
  std::vector<ScheduleAction> out;
  for (int m = 0; m < num_micro; ++m) {
    out.push_back({ScheduleAction::Kind::kForward, m});
    out.push_back({ScheduleAction::Kind::kBackward, m});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<FixedOrderSchedule>> FixedOrderSchedule::Parse(
    const std::string& order) {
  std::vector<ScheduleAction> actions;
  int max_micro = -1;
  for (absl::string_view tok : absl::StrSplit(order, ' ', absl::SkipEmpty())) {
    int m = 0;
    if (tok.size() < 2 || (tok[0] != 'F' && tok[0] != 'B') ||
        !absl::SimpleAtoi(tok.substr(1), &m)) {
      return InvalidArgument(absl::StrCat("schedule token '", tok, "' in '", order, "'"),
                             "F<micro> or B<micro>, e.g. \"F0 F1 B1 B0\"");
    }
    actions.push_back(
        {tok[0] == 'F' ? ScheduleAction::Kind::kForward : ScheduleAction::Kind::kBackward, m});
    max_micro = std::max(max_micro, m);
  }
  WEFT_RETURN_IF_ERROR(ValidateActions(actions, max_micro + 1));
  return std::unique_ptr<FixedOrderSchedule>(new FixedOrderSchedule(std::move(actions)));
}

std::vector<ScheduleAction> FixedOrderSchedule::Actions(int num_micro) const {
  (void)num_micro;  // Run validates the count against the fixed order
  return actions_;
}

}  // namespace weft
