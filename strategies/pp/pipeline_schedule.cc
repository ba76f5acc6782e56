#include "strategies/pp/pipeline_schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "strategies/pp/schedule_simulator.h"

namespace weft::pp {
namespace {

using Kind = PipeAction::Kind;

PipeAction F(int m, int c = 0) { return {Kind::kForward, m, c}; }
PipeAction B(int m, int c = 0) { return {Kind::kBackward, m, c}; }
PipeAction W(int m, int c = 0) { return {Kind::kWeight, m, c}; }

absl::Status CheckBasic(const PipelineShape& s, const std::string& name) {
  if (s.stages < 1 || s.micro < 1 || s.chunks < 1) {
    return InvalidArgument(absl::StrCat(name, " with ", s.stages, " stages, ", s.chunks,
                                        " chunks, ", s.micro, " micro-batches"),
                           "all >= 1");
  }
  return absl::OkStatus();
}

absl::Status OneChunk(const PipelineShape& s, const std::string& name) {
  if (s.chunks != 1) {
    return InvalidArgument(absl::StrCat("--pp_schedule=", name, " with --pp_virtual_stages=", s.chunks),
                           "1 virtual stage per rank", "use --pp_schedule=interleaved for more");
  }
  return absl::OkStatus();
}

class GPipe : public PipelineSchedule {
 public:
  std::string Name() const override { return "gpipe"; }
  absl::StatusOr<Timeline> Build(const PipelineShape& s) const override {
    if (absl::Status st = CheckBasic(s, Name()); !st.ok()) return st;
    if (absl::Status st = OneChunk(s, Name()); !st.ok()) return st;
    Timeline t(s.stages);
    for (auto& rank : t) {
      for (int m = 0; m < s.micro; ++m) rank.push_back(F(m));
      for (int m = 0; m < s.micro; ++m) rank.push_back(B(m));
    }
    return t;
  }
};

// 1F1B's steady state needs the pipeline full: with fewer micro-batches
// than ranks it degenerates into GPipe with a bigger bubble.
absl::Status FillsPipeline(const PipelineShape& s, const std::string& name) {
  if (s.micro >= s.stages) return absl::OkStatus();
  return InvalidArgument(
      absl::StrCat("--pp_schedule=", name, " with ", s.micro, " micro-batch(es) per step on ",
                   s.stages, " pipeline ranks"),
      "at least --pp micro-batches per step (global_batch / (micro_batch x dp) >= pp)",
      "lower --micro_batch or raise --global_batch; --pp_schedule=gpipe runs any count");
}

// 1F1B, optionally with backwards split into B and W where rank r keeps up
// to `pending(r)` W's waiting (zbh1: r).
Timeline OneFOneB(const PipelineShape& s, bool split) {
  Timeline t(s.stages);
  for (int r = 0; r < s.stages; ++r) {
    std::vector<PipeAction>& o = t[r];
    const int warmup = std::min(s.stages - r - 1, s.micro);
    std::deque<int> waiting;  // micro-batches whose W has not run
    auto backward = [&](int m) {
      o.push_back(B(m));
      if (!split) return;
      waiting.push_back(m);
      while (static_cast<int>(waiting.size()) > r) {
        o.push_back(W(waiting.front()));
        waiting.pop_front();
      }
    };
    for (int m = 0; m < warmup; ++m) o.push_back(F(m));
    for (int i = 0; i < s.micro - warmup; ++i) {
      o.push_back(F(warmup + i));
      backward(i);
    }
    for (int m = s.micro - warmup; m < s.micro; ++m) backward(m);
    for (int m : waiting) o.push_back(W(m));
  }
  return t;
}

class OneFOneBSchedule : public PipelineSchedule {
 public:
  std::string Name() const override { return "1f1b"; }
  absl::StatusOr<Timeline> Build(const PipelineShape& s) const override {
    if (absl::Status st = CheckBasic(s, Name()); !st.ok()) return st;
    if (absl::Status st = OneChunk(s, Name()); !st.ok()) return st;
    if (absl::Status st = FillsPipeline(s, Name()); !st.ok()) return st;
    return OneFOneB(s, /*split=*/false);
  }
};

class ZeroBubbleH1 : public PipelineSchedule {
 public:
  std::string Name() const override { return "zbh1"; }
  bool SplitsBackward() const override { return true; }
  absl::StatusOr<Timeline> Build(const PipelineShape& s) const override {
    if (absl::Status st = CheckBasic(s, Name()); !st.ok()) return st;
    if (absl::Status st = OneChunk(s, Name()); !st.ok()) return st;
    if (absl::Status st = FillsPipeline(s, Name()); !st.ok()) return st;
    return OneFOneB(s, /*split=*/true);
  }
};

// Megatron-style interleaving: micro-batches go through the chunks in
// groups of `stages`; forward k of a rank is micro-batch
// (k / (p v)) p + k % p on chunk (k / p) % v, backward k the same
// micro-batch on chunk v - 1 - (k / p) % v.
class Interleaved : public PipelineSchedule {
 public:
  std::string Name() const override { return "interleaved"; }
  absl::StatusOr<Timeline> Build(const PipelineShape& s) const override {
    if (absl::Status st = CheckBasic(s, Name()); !st.ok()) return st;
    if (s.micro % s.stages != 0) {
      return InvalidArgument(absl::StrCat("--pp_schedule=interleaved with ", s.micro,
                                          " micro-batches on ", s.stages, " pipeline ranks"),
                             "micro-batches per step a multiple of --pp",
                             "change --global_batch or --micro_batch");
    }
    const int p = s.stages, v = s.chunks, total = s.micro * v;
    auto at = [&](int k, bool forward) {
      const int group = k / (p * v), pos = k % (p * v);
      const int chunk = forward ? pos / p : v - 1 - pos / p;
      return PipeAction{forward ? Kind::kForward : Kind::kBackward, group * p + pos % p, chunk};
    };
    Timeline t(p);
    for (int r = 0; r < p; ++r) {
      int warmup = (p - r - 1) * 2 + (v - 1) * p;
      if (v == 1) warmup = p - r - 1;
      warmup = std::min(warmup, total);
      std::vector<PipeAction>& o = t[r];
      for (int k = 0; k < warmup; ++k) o.push_back(at(k, true));
      for (int k = 0; k < total - warmup; ++k) {
        o.push_back(at(warmup + k, true));
        o.push_back(at(k, false));
      }
      for (int k = total - warmup; k < total; ++k) o.push_back(at(k, false));
    }
    return t;
  }
};

}  // namespace

std::string PipeAction::ToString(bool with_chunk) const {
  const char* k = kind == Kind::kForward ? "F" : kind == Kind::kBackward ? "B" : "W";
  return with_chunk ? absl::StrCat(k, micro, ":", chunk) : absl::StrCat(k, micro);
}

std::vector<std::string> PipelineScheduleNames() { return {"gpipe", "1f1b", "interleaved", "zbh1"}; }

absl::StatusOr<std::unique_ptr<PipelineSchedule>> MakePipelineSchedule(const std::string& name) {
  if (name == "gpipe") return std::unique_ptr<PipelineSchedule>(new GPipe());
  if (name == "1f1b") return std::unique_ptr<PipelineSchedule>(new OneFOneBSchedule());
  if (name == "interleaved") return std::unique_ptr<PipelineSchedule>(new Interleaved());
  if (name == "zbh1") return std::unique_ptr<PipelineSchedule>(new ZeroBubbleH1());
  return NotFound(absl::StrCat("--pp_schedule=", name),
                  absl::StrCat("one of ", absl::StrJoin(PipelineScheduleNames(), ", ")));
}

absl::Status ValidateTimeline(const Timeline& timeline, const PipelineShape& shape, bool split) {
  if (static_cast<int>(timeline.size()) != shape.stages) {
    return InvalidArgument(absl::StrCat("a timeline for ", timeline.size(), " ranks"),
                           absl::StrCat(shape.stages, " ranks"));
  }
  // (rank, kind, micro, chunk) -> times seen.
  std::map<std::tuple<int, int, int, int>, int> seen;
  for (int r = 0; r < shape.stages; ++r) {
    for (const PipeAction& a : timeline[r]) {
      if (a.micro < 0 || a.micro >= shape.micro || a.chunk < 0 || a.chunk >= shape.chunks ||
          (a.kind == Kind::kWeight && !split)) {
        return InvalidArgument(absl::StrCat("rank ", r, " action ", a.ToString(shape.chunks > 1)),
                               absl::StrCat("micro-batches < ", shape.micro, ", chunks < ",
                                            shape.chunks, split ? "" : ", no W without a split"));
      }
      ++seen[{r, static_cast<int>(a.kind), a.micro, a.chunk}];
    }
  }
  for (int r = 0; r < shape.stages; ++r) {
    for (int c = 0; c < shape.chunks; ++c) {
      for (int m = 0; m < shape.micro; ++m) {
        for (Kind k : {Kind::kForward, Kind::kBackward, Kind::kWeight}) {
          if (k == Kind::kWeight && !split) continue;
          const int n = seen[{r, static_cast<int>(k), m, c}];
          if (n != 1) {
            return InvalidArgument(absl::StrCat("rank ", r, " runs ", PipeAction{k, m, c}.ToString(shape.chunks > 1),
                                                " ", n, " times"),
                                   "exactly once");
          }
        }
      }
    }
  }
  // Dependencies (within a rank and across stages) must be satisfiable.
  absl::StatusOr<Simulation> sim = Simulate(timeline, shape, split);
  return sim.status();
}

std::string FormatTimeline(const Timeline& timeline, const PipelineShape& shape) {
  std::string out;
  for (size_t r = 0; r < timeline.size(); ++r) {
    std::vector<std::string> items;
    for (const PipeAction& a : timeline[r]) items.push_back(a.ToString(shape.chunks > 1));
    absl::StrAppend(&out, "rank ", r, ": ", absl::StrJoin(items, " "), "\n");
  }
  return out;
}

}  // namespace weft::pp
