// freeze: an example out-of-tree strategy, built as a shared object and
// loaded with --plugin=libweft_freeze.so (see strategies/README.md,
// "Adding a strategy"). It freezes the parameters of the modules named in
// --strategy_options=freeze=<prefix>|<prefix>..., e.g. freeze=embed:
//   - a gradients-ready hook on each module that writes a frozen
//     parameter's gradient (its owner, and a tied head borrowing it) zeroes
//     it, so every data-parallel strategy applied after it reduces zeros, and
//   - weight decay is turned off for them, so AdamW leaves them unchanged.
// It runs in the expert phase (after tp, before pp and the data-parallel
// strategies), so the modules it hooks are the ones they will run.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/strategy.h"
#include "core/parallel/strategy_registry.h"

namespace weft {
namespace {

class FreezeStrategy : public Strategy {
 public:
  std::string Name() const override { return "freeze"; }
  // Before a pipeline splits the model, so every rank sees (and checks) the
  // names of the whole model; the hooks stay with the modules each stage keeps.
  StrategyPhase Phase() const override { return StrategyPhase::kExpert; }
  std::vector<std::string> RequiredAxes() const override { return {}; }

  OptionSchema Options() const override {
    OptionSchema s;
    s.String("freeze", "", "module name prefixes to freeze, separated by '|' (e.g. embed)");
    return s;
  }

  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout*) const override {
    if (options.GetString("freeze").empty()) {
      return InvalidArgument("freeze without module names",
                             "--strategy_options=freeze=<module prefix>[|<prefix>...]",
                             "e.g. freeze=embed to freeze the embeddings");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override {
    StrategyResult result;
    const std::vector<std::string> prefixes =
        absl::StrSplit(ctx.options->GetString("freeze"), '|', absl::SkipEmpty());
    // The frozen parameters: those of the named modules (held here or, under
    // a pipeline, on another stage).
    std::set<const Parameter*> frozen;
    int named = 0;
    for (Module* m : ctx.model().Modules()) {
      bool match = false;
      for (const std::string& p : prefixes) match |= absl::StartsWith(m->name(), p);
      if (!match || m->own_parameters().empty()) continue;
      ++named;
      for (const auto& p : m->own_parameters()) {
        p->set_weight_decay(false);
        frozen.insert(p.get());
      }
    }
    // Every module that writes a frozen parameter's gradient zeroes it when
    // its gradients are ready: the owner, and a module borrowing it (a tied
    // head, whose copy's gradient a pipeline's last stage sums into the
    // first stage's after backward).
    for (Module* m : ctx.model().Modules()) {
      std::vector<Parameter*> writes = m->held_own_parameters();
      for (Parameter* p : m->BorrowedParameters()) writes.push_back(p);
      std::vector<Parameter*> mine;
      for (Parameter* p : writes) {
        if (frozen.count(p)) mine.push_back(p);
      }
      if (mine.empty()) continue;
      m->AddHook(Module::HookPoint::kGradientsReady, [mine](Module&, RunContext& rc) {
        for (Parameter* p : mine) {
          if (p->grad.defined()) WEFT_RETURN_IF_ERROR(p->grad.Zero(rc.stream));
        }
        return absl::OkStatus();
      });
    }
    if (named == 0) {
      return NotFound("no parameters under " + ctx.options->GetString("freeze"),
                      "module name prefixes of the model", "e.g. embed, blocks.0, ln_f");
    }
    return result;
  }
};

}  // namespace
}  // namespace weft

WEFT_REGISTER_STRATEGY(freeze, [] { return std::make_unique<weft::FreezeStrategy>(); });
