#include "core/parallel/composer.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/strategy_registry.h"

namespace weft {
namespace {

absl::StatusOr<std::vector<std::unique_ptr<Strategy>>> CreateOrdered(
    const std::vector<std::string>& names, const StrategyOptions& options,
    const comm::MeshLayout* mesh) {
  std::vector<std::unique_ptr<Strategy>> strategies;
  for (const std::string& n : names) {
    if (std::count(names.begin(), names.end(), n) > 1) {
      return InvalidArgument(absl::StrCat("strategy '", n, "' is listed twice"),
                             "each strategy once in --strategy");
    }
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> s, CreateStrategy(n));
    strategies.push_back(std::move(s));
  }
  // Stable: strategies of one phase keep the order the user gave.
  std::stable_sort(strategies.begin(), strategies.end(),
                   [](const auto& a, const auto& b) { return a->Phase() < b->Phase(); });
  std::vector<std::string> data_parallel;
  for (const auto& s : strategies) {
    if (s->Phase() == StrategyPhase::kDataParallel) data_parallel.push_back(s->Name());
  }
  if (data_parallel.size() > 1) {
    return InvalidArgument(
        absl::StrCat("data-parallel strategies ", absl::StrJoin(data_parallel, " and "),
                     " both reduce gradients over the same ranks"),
        "at most one of dp, ddp, zero, fsdp",
        "fsdp with dp_replicate > 1 already gives hybrid sharding (HSDP)");
  }
  for (const auto& s : strategies) {
    absl::Status v = s->Validate(options, mesh);
    if (!v.ok()) return Annotate(v, absl::StrCat("strategy '", s->Name(), "'"));
  }
  return strategies;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseStrategyList(const std::string& list) {
  std::vector<std::string> names;
  if (absl::StripAsciiWhitespace(list).empty()) return names;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    std::string n(absl::StripAsciiWhitespace(part));
    if (n.empty()) {
      return InvalidArgument(absl::StrCat("empty name in --strategy='", list, "'"),
                             "comma-separated names such as 'ddp' or 'fsdp'");
    }
    names.push_back(n);
  }
  return names;
}

absl::Status ValidateStrategies(const std::vector<std::string>& names,
                                const StrategyOptions& options, const comm::MeshLayout* mesh) {
  return CreateOrdered(names, options, mesh).status();
}

absl::Status ComposeStrategies(const std::vector<std::string>& names, StrategyContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(
      std::vector<std::unique_ptr<Strategy>> strategies,
      CreateOrdered(names, *ctx.options, ctx.mesh ? &ctx.mesh->layout() : nullptr));
  for (auto& s : strategies) {
    absl::Status a = s->Apply(ctx);
    if (!a.ok()) return Annotate(a, absl::StrCat("applying strategy '", s->Name(), "'"));
    ctx.state->strategy_names.push_back(s->Name());
  }
  return absl::OkStatus();
}

}  // namespace weft
