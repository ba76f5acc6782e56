// StepTimer: splits one training step into data wait, forward, backward,
// exposed communication, optimizer and other.
//
// The trainer enters a part when it starts one (Enter/Leave nest: a comm
// wait inside a backward is comm, not backward). Each switch records an
// Event on the compute stream, so on CUDA the parts are device time between
// stream positions and the host never blocks: the events are read after the
// step's one synchronization (Finish). On CPU events are host timestamps.
//
// Exposed communication is the time the compute stream (CPU: the training
// thread) waits for a collective: ops that overlap compute cost nothing.
// Data wait is likewise what the consumer waits for the loader.
//
// The parts add up to step_ms: what no mark covers (the host time before the
// first event and the final read) is "other". The only slack is float
// rounding of event times: |sum - step_ms| <= kSumSlackMs.
#ifndef WEFT_CORE_RUNTIME_STEP_TIMER_H_
#define WEFT_CORE_RUNTIME_STEP_TIMER_H_

#include <array>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor/stream.h"

namespace weft {

enum class StepPart : int { kDataWait, kForward, kBackward, kExposedComm, kOptimizer, kOther };
inline constexpr int kNumStepParts = 6;
inline constexpr double kSumSlackMs = 0.01;

// "data_wait", "forward", "backward", "exposed_comm", "optimizer", "other".
absl::string_view StepPartName(StepPart part);

struct StepBreakdown {
  std::array<double, kNumStepParts> ms{};
  double operator[](StepPart p) const { return ms[static_cast<int>(p)]; }
  double Sum() const;
};

// One stretch of the step in a single part, relative to the first mark.
struct PartSpan {
  StepPart part;
  double begin_ms;
  double dur_ms;
};

class StepTimer {
 public:
  // Records on `stream` (which must outlive the timer).
  explicit StepTimer(const Stream& stream) : stream_(stream) {}

  // Starts a step on the calling thread, in part kOther. Only that thread
  // moves the timer (comm waits on other threads are not the step's).
  void BeginStep();
  void Enter(StepPart part);
  void Leave();
  // The last mark: call before the step's synchronization.
  void MarkEnd();
  // After the synchronization: the parts (summing to step_ms) and, if
  // `spans` is given, the stretches in order. Returns the first error any
  // mark hit (event creation or recording).
  absl::StatusOr<StepBreakdown> Finish(double step_ms, std::vector<PartSpan>* spans = nullptr);

  bool InStepOnThisThread() const { return active_ && owner_ == std::this_thread::get_id(); }
  // While off, parts are entered and left without events: a stream being
  // captured into a graph must not record them (a replay runs as one part).
  void SetRecording(bool on) { recording_ = on; }

  // Enter on construction, Leave on destruction.
  class Scope {
   public:
    Scope(StepTimer* timer, StepPart part) : timer_(timer) {
      if (timer_ != nullptr) timer_->Enter(part);
    }
    ~Scope() {
      if (timer_ != nullptr) timer_->Leave();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepTimer* timer_;
  };

 private:
  void Mark(StepPart part_after);

  const Stream& stream_;
  std::vector<Event> events_;         // reused across steps
  std::vector<StepPart> part_after_;  // the part each mark starts
  std::vector<StepPart> stack_;
  size_t used_ = 0;
  bool active_ = false;
  bool recording_ = true;
  std::thread::id owner_;
  absl::Status error_;
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_STEP_TIMER_H_
