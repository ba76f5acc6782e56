#include "data/loader_state.h"

#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"

namespace weft::data {
namespace {
constexpr char kHeader[] = "weft-loader-state v1";
}  // namespace

std::string LoaderState::Serialize() const {
  return absl::StrCat(kHeader, " epoch=", epoch, " batch=", batch, " seed=", seed,
                      " samples=", num_samples, " batch_size=", batch_size, " world=", world_size,
                      " shuffle=", shuffle ? 1 : 0, " drop_last=", drop_last ? 1 : 0,
                      " global_batch=", global_batch);
}

absl::StatusOr<LoaderState> LoaderState::Parse(absl::string_view text) {
  const auto bad = [&](absl::string_view why) {
    return InvalidArgument(absl::StrCat("loader state '", text, "': ", why),
                           absl::StrCat("'", kHeader, " epoch=.. batch=.. seed=.. samples=.. "
                                        "batch_size=.. world=.. shuffle=0|1 drop_last=0|1'"));
  };
  if (!absl::ConsumePrefix(&text, kHeader)) return bad("missing header");
  LoaderState s;
  int found = 0;
  // A repeated key would count for a missing one.
  std::set<absl::string_view> seen;
  for (absl::string_view kv : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    std::vector<absl::string_view> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (p.size() != 2) return bad(absl::StrCat("bad item '", kv, "'"));
    if (!seen.insert(p[0]).second) return bad(absl::StrCat("repeated key '", p[0], "'"));
    bool ok = false;
    if (p[0] == "epoch") ok = absl::SimpleAtoi(p[1], &s.epoch);
    else if (p[0] == "batch") ok = absl::SimpleAtoi(p[1], &s.batch);
    else if (p[0] == "seed") ok = absl::SimpleAtoi(p[1], &s.seed);
    else if (p[0] == "samples") ok = absl::SimpleAtoi(p[1], &s.num_samples);
    else if (p[0] == "batch_size") ok = absl::SimpleAtoi(p[1], &s.batch_size);
    else if (p[0] == "world") ok = absl::SimpleAtoi(p[1], &s.world_size);
    else if (p[0] == "shuffle") ok = absl::SimpleAtob(p[1], &s.shuffle);
    else if (p[0] == "drop_last") ok = absl::SimpleAtob(p[1], &s.drop_last);
    else if (p[0] == "global_batch") {
      ok = absl::SimpleAtoi(p[1], &s.global_batch) && s.global_batch >= 0;
      --found;  // optional: states written before it existed lack it
    } else return bad(absl::StrCat("unknown key '", p[0], "'"));
    if (!ok) return bad(absl::StrCat("bad value in '", kv, "'"));
    ++found;
  }
  if (found != 8) return bad("missing keys");
  if (s.epoch < 0 || s.batch < 0) return bad("negative position");
  return s;
}

absl::StatusOr<LoaderState> LoaderState::Rescaled(int64_t new_batch_size,
                                                 int new_world_size) const {
  if (new_batch_size < 1 || new_world_size < 1) {
    return InvalidArgument(absl::StrCat("batch size ", new_batch_size, ", world ", new_world_size),
                           "both >= 1");
  }
  const int64_t consumed = batch * batch_size * world_size;
  const int64_t global = new_batch_size * new_world_size;
  if (consumed % global != 0) {
    return InvalidArgument(
        absl::StrCat("a loader position of ", consumed, " samples into epoch ", epoch,
                     " (batch ", batch, " x ", batch_size, " per rank x ", world_size, " ranks)"),
        absl::StrCat("a multiple of the new global micro-batch ", new_batch_size, " x ",
                     new_world_size, " = ", global),
        "resume with a micro_batch x data-parallel size that divides the saved position");
  }
  LoaderState s = *this;
  s.batch = consumed / global;
  s.batch_size = new_batch_size;
  s.world_size = new_world_size;
  return s;
}

}  // namespace weft::data
