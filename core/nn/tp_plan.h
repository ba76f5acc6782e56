// TensorParallelPlan: how a model's modules split over the tensor-parallel
// ranks, as data the model ships next to itself (models know no ranks; the
// tp strategy reads the plan and knows no model).
//
// Each entry maps a module path pattern ('*' matches one path component:
// "blocks.*.attn.qkv") to a style:
//   kColwise   a Linear split by output features. With packed = k the
//              output holds k equal sections (fused q, k, v) and each is
//              split on its own, so a rank holds whole heads of each.
//              With heads = n each section is n attention heads: tp must
//              divide n, and the refusal names the model's `heads_field`.
//              With replicate_heads, tp may also be a multiple of n (K/V
//              heads fewer than tp ranks, GQA): each head is then held by
//              tp / n consecutive tp ranks, the ones whose query heads it
//              serves, and their weight gradients are summed over them.
//   kRowwise   a Linear split by input features; partial outputs are summed.
//   kVocab     a token embedding, an LM head or a cross-entropy loss split
//              over the vocabulary.
//   kSequence  a module that runs on sequence shards under sequence
//              parallelism (LayerNorm, Dropout); ignored without it.
//   kHeadShare a replicated module applied to this rank's heads only (a
//              per-head norm, Qwen3's QK-norm): its gradients are partial
//              sums, added up over tp.
//   kExperts   a mixture-of-experts layer's ExpertMlps: every expert's
//              hidden units split like a column- then row-parallel MLP
//              (fc by output, proj by input features), one sum over tp
//              after the experts; the router stays replicated (unlisted).
#ifndef WEFT_CORE_NN_TP_PLAN_H_
#define WEFT_CORE_NN_TP_PLAN_H_

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

enum class TpStyle { kColwise, kRowwise, kVocab, kSequence, kHeadShare, kExperts };

struct TpPlanEntry {
  std::string pattern;
  TpStyle style = TpStyle::kColwise;
  int packed = 1;  // kColwise: equal output sections split separately
  int heads = 0;   // kColwise: whole heads per section (0: no head structure)
  std::string heads_field = "n_head";  // the config field that sets `heads`
  bool replicate_heads = false;         // kColwise with heads: see above
};

using TensorParallelPlan = std::vector<TpPlanEntry>;

// True when `path` matches `pattern` component by component.
inline bool MatchesPlanPattern(const std::string& pattern, const std::string& path) {
  size_t i = 0, j = 0;  // starts of the current components
  while (true) {
    const size_t pe = std::min(pattern.find('.', i), pattern.size());
    const size_t he = std::min(path.find('.', j), path.size());
    const std::string_view want(pattern.data() + i, pe - i), have(path.data() + j, he - j);
    if (want != "*" && want != have) return false;
    const bool pattern_done = pe == pattern.size(), path_done = he == path.size();
    if (pattern_done || path_done) return pattern_done && path_done;
    i = pe + 1;
    j = he + 1;
  }
}

}  // namespace weft

#endif  // WEFT_CORE_NN_TP_PLAN_H_
