#include "models/gpt/moe_resume_note.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace weft {

std::string MoeRoutingResumeNote(const GptJob& saved, int saved_dp, const GptJob& now,
                                 int now_dp) {
  if (now.model().moe_every() <= 0) return "";
  const int64_t saved_samples = saved_dp * saved.train().micro_batch();
  const int64_t now_samples = now_dp * now.train().micro_batch();
  const int64_t saved_groups = int64_t{saved_dp} * saved.model().moe_routing_groups();
  const int64_t now_groups = int64_t{now_dp} * now.model().moe_routing_groups();
  if (saved_samples == now_samples && saved_groups == now_groups) return "";
  std::string note = absl::StrCat(
      "MoE routing continues in other groups than the checkpoint's run: it routed ",
      saved_samples, " samples a forward in ", saved_groups, " groups (", saved_dp,
      " data-parallel rank(s) x micro-batch ", saved.train().micro_batch(), " x ",
      saved.model().moe_routing_groups(), " routing group(s)), this run routes ", now_samples,
      " in ", now_groups, "; capacity and balance losses follow the groups");
  if (now_samples != saved_samples) {
    absl::StrAppend(&note, "; --micro_batch=", saved_samples / now_dp,
                    saved_samples % now_dp == 0 ? "" : " (not whole: another layout)",
                    " keeps the samples");
  }
  if (saved_groups % now_dp == 0 && saved_groups != now_groups) {
    absl::StrAppend(&note, "; --moe_routing_groups=", saved_groups / now_dp,
                    " keeps the groups");
  }
  return note;
}

}  // namespace weft
