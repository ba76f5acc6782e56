#include "strategies/tp/vocab_kernels.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft::tp {
namespace {

absl::Status CheckHostF32(const Tensor& t, const char* what) {
  if (!t.defined()) return absl::OkStatus();
  if (!t.device().is_cpu()) {
    return absl::UnimplementedError(absl::StrCat(
        "tp: the vocabulary-parallel kernels run on CPU only so far; ", what, " is on ",
        t.device().ToString(), ". Run tp with --device=cpu (gloo), or without tp on CUDA"));
  }
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kI32) {
    return InvalidArgument(absl::StrCat(what, " ", t.DebugString()), "f32 on CPU");
  }
  if (!t.is_contiguous()) return InvalidArgument(absl::StrCat(what, " not contiguous"), "contiguous");
  return absl::OkStatus();
}

// [lo, hi) of the local columns that are real vocabulary.
int64_t RealColumns(int64_t vocab_begin, int64_t local, int64_t vocab) {
  return std::clamp<int64_t>(vocab - vocab_begin, 0, local);
}

}  // namespace

absl::Status VocabEmbeddingForward(Tensor& out, const Tensor& tokens, const Tensor& wte_local,
                                   int64_t vocab_begin, const Tensor& wpe) {
  for (auto [t, w] : {std::pair<const Tensor*, const char*>{&out, "embedding out"},
                      {&tokens, "tokens"}, {&wte_local, "wte"}, {&wpe, "wpe"}}) {
    absl::Status s = CheckHostF32(*t, w);
    if (!s.ok()) return s;
  }
  const int64_t rows = wte_local.dim(0), c = wte_local.dim(1);
  const int64_t bt = tokens.numel(), t = tokens.dim(1);
  if (out.numel() != bt * c) {
    return InvalidArgument("embedding out " + ShapeString(out.shape()),
                           absl::StrCat(bt * c, " elements"));
  }
  const int32_t* ids = tokens.data<int32_t>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < bt; ++i) {
    const int64_t row = int64_t{ids[i]} - vocab_begin;
    const bool mine = row >= 0 && row < rows;
    const float* e = mine ? wte_local.data<float>() + row * c : nullptr;
    const float* p = wpe.defined() ? wpe.data<float>() + (i % t) * c : nullptr;
    for (int64_t k = 0; k < c; ++k) po[i * c + k] = (e ? e[k] : 0.f) + (p ? p[k] : 0.f);
  }
  return absl::OkStatus();
}

absl::Status VocabEmbeddingBackward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                    const Tensor& tokens, int64_t vocab_begin) {
  for (auto [t, w] : {std::pair<const Tensor*, const char*>{&dwte_local, "dwte"},
                      {&dwpe, "dwpe"}, {&dout, "dout"}, {&tokens, "tokens"}}) {
    absl::Status s = CheckHostF32(*t, w);
    if (!s.ok()) return s;
  }
  const int64_t rows = dwte_local.dim(0), c = dwte_local.dim(1);
  const int64_t bt = tokens.numel(), t = tokens.dim(1);
  const int32_t* ids = tokens.data<int32_t>();
  const float* g = dout.data<float>();
  for (int64_t i = 0; i < bt; ++i) {
    const int64_t row = int64_t{ids[i]} - vocab_begin;
    float* e = row >= 0 && row < rows ? dwte_local.data<float>() + row * c : nullptr;
    float* p = dwpe.defined() ? dwpe.data<float>() + (i % t) * c : nullptr;
    for (int64_t k = 0; k < c; ++k) {
      if (e) e[k] += g[i * c + k];
      if (p) p[k] += g[i * c + k];
    }
  }
  return absl::OkStatus();
}

absl::Status LocalMaxAndTarget(const Tensor& logits, const Tensor& targets, int64_t vocab_begin,
                               int64_t vocab, Tensor& row_max, Tensor& target_logit) {
  for (auto [t, w] : {std::pair<const Tensor*, const char*>{&logits, "logits"},
                      {&targets, "targets"}, {&row_max, "row max"}, {&target_logit, "target logit"}}) {
    absl::Status s = CheckHostF32(*t, w);
    if (!s.ok()) return s;
  }
  const int64_t vl = logits.dim(-1), n = logits.numel() / vl;
  const int64_t real = RealColumns(vocab_begin, vl, vocab);
  const float* z = logits.data<float>();
  const int32_t* y = targets.data<int32_t>();
  float* mx = row_max.data<float>();
  float* tl = target_logit.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] >= vocab) {
      return InvalidArgument(absl::StrCat("target id ", y[i], " in row ", i),
                             absl::StrCat("ids < vocab ", vocab));
    }
    float m = -INFINITY;
    for (int64_t j = 0; j < real; ++j) m = std::max(m, z[i * vl + j]);
    mx[i] = m;
    const int64_t col = int64_t{y[i]} - vocab_begin;
    tl[i] = y[i] >= 0 && col >= 0 && col < real ? z[i * vl + col] : 0.f;
  }
  return absl::OkStatus();
}

absl::Status LocalSumExp(const Tensor& logits, const Tensor& global_max, int64_t vocab_begin,
                         int64_t vocab, Tensor& sum_exp) {
  const int64_t vl = logits.dim(-1), n = logits.numel() / vl;
  const int64_t real = RealColumns(vocab_begin, vl, vocab);
  const float* z = logits.data<float>();
  const float* mx = global_max.data<float>();
  float* se = sum_exp.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < real; ++j) s += std::exp(double(z[i * vl + j] - mx[i]));
    se[i] = static_cast<float>(s);
  }
  return absl::OkStatus();
}

absl::Status VocabCrossEntropyFinish(Tensor& logits, const Tensor& targets, int64_t vocab_begin,
                                     int64_t vocab, const Tensor& global_max,
                                     const Tensor& sum_exp, const Tensor& target_logit,
                                     float scale, bool compute_grad, Tensor& losses) {
  const int64_t vl = logits.dim(-1), n = logits.numel() / vl;
  const int64_t real = RealColumns(vocab_begin, vl, vocab);
  float* z = logits.data<float>();
  const int32_t* y = targets.data<int32_t>();
  const float* mx = global_max.data<float>();
  const float* se = sum_exp.data<float>();
  const float* tl = target_logit.data<float>();
  float* loss = losses.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    float* row = z + i * vl;
    if (y[i] < 0) {  // ignored position
      loss[i] = 0;
      if (compute_grad) std::fill(row, row + vl, 0.f);
      continue;
    }
    const float log_sum = static_cast<float>(std::log(double(se[i])));
    loss[i] = -(tl[i] - mx[i] - log_sum);
    if (!compute_grad) continue;
    const int64_t col = int64_t{y[i]} - vocab_begin;
    for (int64_t j = 0; j < real; ++j) {
      const float p = std::exp(row[j] - mx[i] - log_sum);
      row[j] = scale * (p - (j == col ? 1.f : 0.f));
    }
    for (int64_t j = real; j < vl; ++j) row[j] = 0;
  }
  return absl::OkStatus();
}

}  // namespace weft::tp
