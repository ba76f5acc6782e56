#include "core/parallel/flat_param.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/status_macros.h"

namespace weft {

FlatParamGroup::FlatParamGroup(std::string name, std::vector<Parameter*> params, int num_shards,
                               int shard_rank)
    : name_(std::move(name)),
      params_(std::move(params)),
      num_shards_(num_shards),
      shard_rank_(shard_rank) {
  WEFT_CHECK(num_shards >= 1 && shard_rank >= 0 && shard_rank < num_shards);
  for (Parameter* p : params_) {
    offsets_.push_back(numel_);
    numel_ += p->numel();
  }
  shard_numel_ = (numel_ + num_shards - 1) / num_shards;
}

Tensor FlatParamGroup::ParamView(const Tensor& full, size_t i) const {
  return full.Slice(0, offsets_[i], offsets_[i] + params_[i]->numel()).View(params_[i]->shape());
}

void FlatParamGroup::BindValues(const Tensor& full) const {
  WEFT_CHECK_EQ(full.numel(), padded_numel());
  for (size_t i = 0; i < params_.size(); ++i) params_[i]->value = ParamView(full, i);
}

void FlatParamGroup::BindGrads(const Tensor& full) const {
  WEFT_CHECK_EQ(full.numel(), padded_numel());
  for (size_t i = 0; i < params_.size(); ++i) params_[i]->grad = ParamView(full, i);
}

void FlatParamGroup::UnbindValues() const {
  for (Parameter* p : params_) p->value = Tensor();
}

void FlatParamGroup::UnbindGrads() const {
  for (Parameter* p : params_) p->grad = Tensor();
}

absl::Status FlatParamGroup::PackValues(Tensor& full, NativeStream stream) const {
  WEFT_CHECK_EQ(full.numel(), padded_numel());
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor dst = ParamView(full, i);
    WEFT_RETURN_IF_ERROR(dst.CopyFrom(params_[i]->value, stream));
  }
  if (padded_numel() > numel_) {
    Tensor pad = full.Slice(0, numel_, padded_numel());
    WEFT_RETURN_IF_ERROR(pad.Zero(stream));
  }
  return absl::OkStatus();
}

Tensor FlatParamGroup::Shard(const Tensor& full) const {
  return full.Slice(0, shard_rank_ * shard_numel_, (shard_rank_ + 1) * shard_numel_);
}

std::vector<OptimTarget> FlatParamGroup::ShardTargets(const Tensor& shard_value,
                                                      const Tensor& shard_grad) const {
  WEFT_CHECK_EQ(shard_value.numel(), shard_numel_);
  WEFT_CHECK_EQ(shard_grad.numel(), shard_numel_);
  std::vector<OptimTarget> targets;
  const int64_t lo = shard_rank_ * shard_numel_, hi = lo + shard_numel_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t a = std::max(lo, offsets_[i]);
    const int64_t b = std::min(hi, offsets_[i] + params_[i]->numel());
    if (a >= b) continue;
    targets.push_back({absl::StrCat(params_[i]->name(), "[", a - offsets_[i], ":",
                                    b - offsets_[i], "]"),
                       shard_value.Slice(0, a - lo, b - lo), shard_grad.Slice(0, a - lo, b - lo),
                       params_[i]->weight_decay(), params_[i], a - offsets_[i]});
  }
  return targets;
}

}  // namespace weft
