#include "tools/estimate/layouts.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft {

std::vector<Layout> CandidateLayouts(int nproc, int num_experts) {
  std::vector<Layout> out;
  // Expert parallelism inside the data-parallel ranks, over `dp` (--ep
  // brings the expert strategy).
  auto add_expert_parallel = [&](const char* dp) {
    for (int ep = 2; num_experts > 1 && ep <= nproc; ++ep) {
      if (nproc % ep != 0 || num_experts % ep != 0) continue;
      Layout l{absl::StrCat("ep", ep, " x ", dp, nproc), dp};
      l.ep = ep;
      out.push_back(l);
    }
  };
  if (nproc == 1) out.push_back({"none", ""});
  if (nproc > 1) {
    out.push_back({"ddp", "ddp"});
    out.push_back({"zero-1", "zero", 1});
    out.push_back({"zero-2", "zero", 2});
    add_expert_parallel("ddp");
    out.push_back({"zero-3", "zero", 3});
    out.push_back({"fsdp", "fsdp"});
    add_expert_parallel("fsdp");
  }
  // Model-parallel sizes that divide nproc, the rest data-parallel (fsdp).
  for (int tp = 1; tp <= nproc; ++tp) {
    if (nproc % tp != 0) continue;
    for (int cp = 1; cp <= nproc / tp; ++cp) {
      if ((nproc / tp) % cp != 0) continue;
      for (int pp = 1; pp <= nproc / (tp * cp); ++pp) {
        if ((nproc / (tp * cp)) % pp != 0 || tp * cp * pp == 1) continue;
        const int dp = nproc / (tp * cp * pp);
        Layout l;
        l.pp = pp, l.cp = cp, l.tp = tp;
        std::vector<std::string> label, strategies;
        if (tp > 1) label.push_back(absl::StrCat("tp", tp)), strategies.push_back("tp");
        if (cp > 1) label.push_back(absl::StrCat("cp", cp));
        if (pp > 1) label.push_back(absl::StrCat("pp", pp));
        if (dp > 1) strategies.push_back("fsdp");
        l.strategy = absl::StrJoin(strategies, ",");  // pp and cp follow from --pp, --cp
        l.label = absl::StrJoin(label, " x ");
        if (dp > 1) l.label = absl::StrCat(l.label, " x fsdp", dp);
        out.push_back(l);
        // An MoE model's experts also over ep of the fsdp ranks (--ep brings
        // the expert strategy), right after the same split without.
        for (int ep = 2; num_experts > 1 && ep <= dp; ++ep) {
          if (dp % ep != 0 || num_experts % ep != 0) continue;
          Layout with_ep = l;
          with_ep.ep = ep;
          with_ep.label = absl::StrCat(absl::StrJoin(label, " x "), " x ep", ep, " x fsdp", dp);
          out.push_back(with_ep);
        }
      }
    }
  }
  return out;
}

int DataParallelRanks(const Layout& layout, int nproc) {
  return nproc / (layout.pp * layout.cp * layout.tp);
}

int FitMicroBatch(int64_t global_batch, int micro_batch, int dp, int pp) {
  for (int m = micro_batch; m >= 1; --m) {
    const int64_t per_step = int64_t{m} * dp;
    if (global_batch % per_step == 0 && global_batch / per_step >= pp) return m;
  }
  return 0;
}

std::string LayoutFlags(const Layout& layout, int micro_batch) {
  std::vector<std::string> flags;
  if (!layout.strategy.empty()) flags.push_back(absl::StrCat("--strategy=", layout.strategy));
  if (layout.zero_stage > 0) flags.push_back(absl::StrCat("--zero_stage=", layout.zero_stage));
  if (layout.pp > 1) flags.push_back(absl::StrCat("--pp=", layout.pp));
  if (layout.cp > 1) flags.push_back(absl::StrCat("--cp=", layout.cp));
  if (layout.tp > 1) flags.push_back(absl::StrCat("--tp=", layout.tp));
  if (layout.ep > 1) flags.push_back(absl::StrCat("--ep=", layout.ep));
  flags.push_back(absl::StrCat("--micro_batch=", micro_batch));
  return absl::StrJoin(flags, " ");
}

void ApplyLayout(const Layout& layout, ParallelConfig* config) {
  config->set_strategy(layout.strategy);
  if (layout.zero_stage > 0) config->set_zero_stage(layout.zero_stage);
  config->set_pp(layout.pp);
  config->set_cp(layout.cp);
  config->set_tp(layout.tp);
  // Unset at 1, as the printed flags leave it: an explicit --ep=1 without
  // the expert strategy is noted as a flag that changes nothing.
  if (layout.ep > 1) {
    config->set_ep(layout.ep);
  } else {
    config->clear_ep();
  }
  // The data-parallel ranks are whatever the model-parallel axes leave.
  config->clear_dp_replicate();
  config->clear_dp_shard();
}

}  // namespace weft
