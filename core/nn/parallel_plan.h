// TensorParallelPlan: how a model's modules split over the tensor-parallel
// ranks, as data the model ships next to itself (models know no ranks; the
// tp strategy reads the plan and knows no model).
//
// Each entry maps a module path pattern ('*' matches one path component:
// "blocks.*.attn.qkv") to a style:
//   kColwise   a Linear split by output features. With packed = k the
//              output holds k equal sections (fused q, k, v) and each is
//              split on its own, so a rank holds whole heads of each.
//   kRowwise   a Linear split by input features; partial outputs are summed.
//   kVocab     a token embedding, an LM head or a cross-entropy loss split
//              over the vocabulary.
//   kSequence  a module that runs on sequence shards under sequence
//              parallelism (LayerNorm, Dropout); ignored without it.
#ifndef WEFT_CORE_NN_PARALLEL_PLAN_H_
#define WEFT_CORE_NN_PARALLEL_PLAN_H_

#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace weft {

enum class TpStyle { kColwise, kRowwise, kVocab, kSequence };

struct TpPlanEntry {
  std::string pattern;
  TpStyle style = TpStyle::kColwise;
  int packed = 1;  // kColwise: equal output sections split separately
};

using TensorParallelPlan = std::vector<TpPlanEntry>;

// True when `path` matches `pattern` component by component.
inline bool MatchesPlanPattern(const std::string& pattern, const std::string& path) {
  std::vector<std::string> want = absl::StrSplit(pattern, '.');
  std::vector<std::string> have = absl::StrSplit(path, '.');
  if (want.size() != have.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != "*" && want[i] != have[i]) return false;
  }
  return true;
}

}  // namespace weft

#endif  // WEFT_CORE_NN_PARALLEL_PLAN_H_
