#include "strategies/recompute/recompute.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/recompute.h"

namespace weft {

namespace {

// The module types each policy recomputes (core/nn types, no model's).
std::string PolicyModules(const StrategyOptionSet& options) {
  const std::string& policy = options.GetEnum("recompute_policy");
  if (policy == "full") return "TransformerBlock";
  // GPT's and Llama's attention layers (cp swaps only their cores).
  if (policy == "attention") return "CausalSelfAttention|GroupedQueryAttention";
  return options.GetString("recompute_modules");  // "modules"
}

}  // namespace

OptionSchema RecomputeStrategy::Options() const {
  OptionSchema s;
  s.Enum("recompute_policy", "full", {"full", "attention", "modules"},
         "full: whole transformer blocks; attention: only the attention (selective, "
         "Megatron-style); modules: the types in recompute_modules");
  s.String("recompute_modules", "",
           "with recompute_policy=modules: module types to recompute, separated by '|'");
  return s;
}

absl::Status RecomputeStrategy::Validate(const StrategyOptionSet& options,
                                         const comm::MeshLayout*) const {
  const bool custom = options.GetEnum("recompute_policy") == "modules";
  if (custom && options.GetString("recompute_modules").empty()) {
    return InvalidArgument("recompute_policy=modules with no recompute_modules",
                           "module type names separated by '|'",
                           "e.g. recompute_modules=Mlp|CausalSelfAttention");
  }
  if (!custom && !options.GetString("recompute_modules").empty()) {
    return InvalidArgument("recompute_modules given with recompute_policy=" +
                               options.GetEnum("recompute_policy"),
                           "recompute_modules only with recompute_policy=modules");
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> RecomputeStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  const std::string spec = PolicyModules(*ctx.options);
  const std::set<std::string> types = absl::StrSplit(spec, '|', absl::SkipEmpty());
  // Collect first: wrapping changes the children being walked.
  std::vector<std::pair<Module*, std::string>> targets;
  std::vector<std::string> pinned;
  std::set<std::string> seen_types;
  for (Module* m : ctx.model().Modules()) {
    // The model itself has no parent to swap it in: only its parts count.
    if (m != &ctx.model()) seen_types.insert(m->type_name());
    if (m->type_name() == "Recompute") continue;  // never wrap twice
    for (Module* child : m->children()) {
      if (types.count(child->type_name()) == 0) continue;
      if (m->swappable(child->local_name())) {
        targets.push_back({m, child->local_name()});
      } else {
        pinned.push_back(child->name());
      }
    }
  }
  if (!pinned.empty()) {
    return FailedPrecondition(
        absl::StrCat("cannot recompute ", absl::StrJoin(pinned, ", "),
                     ": their parents call them through their own types"),
        "module types whose parents call them through Module (swappable children)",
        "recompute the parent type instead (e.g. TransformerBlock)");
  }
  if (targets.empty()) {
    if (types.count(ctx.model().type_name()) > 0) {
      return InvalidArgument(
          absl::StrCat("recompute_modules=", spec, " names the model itself (",
                       ctx.model().type_name(), "), which nothing calls through Module"),
          absl::StrCat("types of the model's parts: ", absl::StrJoin(seen_types, ", ")),
          "recompute its blocks: recompute_modules=TransformerBlock, or the default policy");
    }
    return NotFound(absl::StrCat("no module of type ", spec, " to recompute"),
                    absl::StrCat("one of this model's module types: ",
                                 absl::StrJoin(seen_types, ", ")),
                    "set --strategy_options=recompute_policy=modules,"
                    "recompute_modules=<Type>[|<Type>...]");
  }
  for (const auto& [parent, child] : targets) {
    WEFT_RETURN_IF_ERROR(EnableRecompute(*parent, child));
  }
  return result;
}

}  // namespace weft
