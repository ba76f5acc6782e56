// Pipeline schedules: the order in which each pipeline rank runs the
// forwards (F), backwards (B) and, for zero-bubble schedules, the weight-
// gradient halves of backwards (W) of one optimizer step's micro-batches.
//
// A schedule is a per-rank timeline over `stages` ranks, each holding
// `chunks` model chunks (virtual stages, round-robin: chunk c of rank r is
// virtual stage c * stages + r). Micro-batch m's F on virtual stage s needs
// its F on s - 1; its B on s needs its F on s and its B on s + 1; W needs B.
//
//   gpipe        all forwards, then all backwards
//   1f1b         warm-up forwards, then one forward one backward, then cool-down
//   interleaved  1F1B over `chunks` virtual stages per rank (Megatron's
//                order; micro-batches a multiple of the ranks)
//   zbh1         1F1B with each backward split into B (input gradient, on the
//                critical path) and W (weight gradient); rank r keeps up to r
//                W's pending, so W's fill the cool-down bubble: with equal
//                F, B and W costs the bubble is (p - 1) units instead of
//                1F1B's 3 (p - 1), and no rank holds more than p micro-batches
//                (1F1B's peak, on rank 0)
#ifndef WEFT_STRATEGIES_PP_PIPELINE_SCHEDULE_H_
#define WEFT_STRATEGIES_PP_PIPELINE_SCHEDULE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::pp {

struct PipeAction {
  enum class Kind { kForward, kBackward, kWeight };
  Kind kind = Kind::kForward;
  int micro = 0;
  int chunk = 0;
  // "F3", "B3", "W3"; with chunks, "F3:1" (micro-batch 3 on chunk 1).
  std::string ToString(bool with_chunk = false) const;
};

struct PipelineShape {
  int stages = 1;  // pipeline ranks
  int chunks = 1;  // model chunks per rank (virtual stages)
  int micro = 1;   // micro-batches per optimizer step
  int virtual_stages() const { return stages * chunks; }
};

using Timeline = std::vector<std::vector<PipeAction>>;  // one action list per rank

class PipelineSchedule {
 public:
  virtual ~PipelineSchedule() = default;
  virtual std::string Name() const = 0;
  // True when B computes only the input gradient and W the weights'.
  virtual bool SplitsBackward() const { return false; }
  // The timeline for `shape`; an error says which shapes the schedule takes.
  virtual absl::StatusOr<Timeline> Build(const PipelineShape& shape) const = 0;
};

// gpipe | 1f1b | interleaved | zbh1; NotFound lists the names.
absl::StatusOr<std::unique_ptr<PipelineSchedule>> MakePipelineSchedule(const std::string& name);
std::vector<std::string> PipelineScheduleNames();

// Checks a timeline against the definitions above: every (virtual stage,
// micro-batch) has exactly one F, one B and (split) one W on the right
// rank, and the ranks' orders can run together without deadlock.
absl::Status ValidateTimeline(const Timeline& timeline, const PipelineShape& shape, bool split);

// One line per rank: "rank 0: F0 F1 B0 F2 B1 ...".
std::string FormatTimeline(const Timeline& timeline, const PipelineShape& shape);

}  // namespace weft::pp

#endif  // WEFT_STRATEGIES_PP_PIPELINE_SCHEDULE_H_
