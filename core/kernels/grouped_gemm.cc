#include "core/kernels/grouped_gemm.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {
namespace {

// Slice g of a grouped (G, ...) tensor as a matrix of its trailing dims.
Tensor Group(const Tensor& t, int64_t g) {
  Tensor s = t.Select(0, g);
  if (s.ndim() == 1) return s;
  return s.View({s.dim(0), s.numel() / s.dim(0)});
}

Tensor Rows(const Tensor& t, int64_t begin, int64_t end) {
  return t.defined() ? t.Slice(0, begin, end) : t;
}

}  // namespace

absl::Status GroupedGemm(KernelOps& ops, const KernelContext& ctx, const GroupedGemmArgs& g,
                         const std::vector<int64_t>& counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const Tensor& grouped = g.kind == GroupedGemmKind::kWeightGrad ? g.out : g.w;
  if (grouped.ndim() != 3 || grouped.dim(0) != static_cast<int64_t>(counts.size())) {
    return InvalidArgument(absl::StrCat("grouped operand ", ShapeString(grouped.shape()), " for ",
                                        counts.size(), " groups"),
                           "a (G, N, K) tensor with G = the number of group counts");
  }
  if (g.a.ndim() != 2 || g.a.dim(0) != total) {
    return InvalidArgument(absl::StrCat("row operand ", ShapeString(g.a.shape()), " for ", total,
                                        " grouped rows"),
                           "a (M, .) tensor with M = the sum of the group counts");
  }
  int64_t begin = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t end = begin + counts[i];
    if (end == begin) continue;  // an expert without tokens: nothing to do
    GemmArgs args;
    switch (g.kind) {
      case GroupedGemmKind::kForward:
        args = {.out = Rows(g.out, begin, end), .a = Rows(g.a, begin, end), .b = Group(g.w, i),
                .trans_b = true, .epilogue = g.epilogue};
        break;
      case GroupedGemmKind::kInputGrad:
        args = {.out = Rows(g.out, begin, end), .a = Rows(g.a, begin, end), .b = Group(g.w, i),
                .epilogue = g.epilogue};
        break;
      case GroupedGemmKind::kWeightGrad:
        args = {.out = Group(g.out, i), .a = Rows(g.a, begin, end), .b = Rows(g.b, begin, end),
                .trans_a = true, .accumulate = true};
        break;
    }
    if (g.bias.defined()) args.bias = Group(g.bias, i);
    if (g.aux.defined()) args.aux = Rows(g.aux, begin, end);
    if (g.bias_grad.defined()) args.bias_grad = Group(g.bias_grad, i);
    WEFT_RETURN_IF_ERROR(ops.Gemm(ctx, args));
    begin = end;
  }
  return absl::OkStatus();
}

}  // namespace weft
