#include "core/parallel/sharded_group.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<std::unique_ptr<ShardedGroup>> ShardedGroup::Create(
    std::string name, std::vector<Parameter*> params, std::shared_ptr<comm::ProcessGroup> group,
    const Options& options) {
  if (params.empty()) return InvalidArgument("sharded group '" + name + "' without parameters", "at least one parameter");
  if (options.ops == nullptr) return Internal("ShardedGroup without kernels");
  FlatParamGroup flat(std::move(name), std::move(params), group->size(), group->rank());
  auto g = std::unique_ptr<ShardedGroup>(new ShardedGroup(std::move(flat), std::move(group), options));
  WEFT_RETURN_IF_ERROR(g->Init());
  return g;
}

absl::Status ShardedGroup::Init() {
  const DType dtype = flat_.params()[0]->value.dtype();
  for (Parameter* p : flat_.params()) {
    if (!p->value.defined() || p->value.dtype() != dtype) {
      return InvalidArgument("parameter " + p->name() + " in sharded group " + name(),
                             "materialized parameters of one dtype");
    }
  }
  WEFT_ASSIGN_OR_RETURN(Tensor full, Tensor::Empty({flat_.padded_numel()}, dtype, opt_.device,
                                                   opt_.param_allocator, opt_.stream));
  WEFT_RETURN_IF_ERROR(flat_.PackValues(full, opt_.stream));
  if (opt_.params == Mode::kFull) {
    full_param_ = full;
    flat_.BindValues(full_param_);
  } else {
    WEFT_ASSIGN_OR_RETURN(shard_param_, flat_.Shard(full).Clone(opt_.stream));
    flat_.UnbindValues();
    // Each parameter's value now lives only as this rank's flat range.
    const int64_t lo = flat_.shard_rank() * flat_.shard_numel(), hi = lo + flat_.shard_numel();
    for (size_t i = 0; i < flat_.params().size(); ++i) {
      Parameter* p = flat_.params()[i];
      const int64_t off = flat_.offset(i);
      const int64_t b = std::clamp(lo - off, int64_t{0}, p->numel());
      const int64_t e = std::clamp(hi - off, int64_t{0}, p->numel());
      p->AddFlatShard(opt_.axis, b, std::max(b, e));
    }
  }
  if (opt_.grads == Mode::kFull) {
    WEFT_ASSIGN_OR_RETURN(full_grad_, Tensor::Zeros({flat_.padded_numel()}, opt_.grad_dtype,
                                                    opt_.device, opt_.grad_allocator, opt_.stream));
    flat_.BindGrads(full_grad_);
  } else {
    WEFT_ASSIGN_OR_RETURN(shard_grad_, Tensor::Zeros({flat_.shard_numel()}, opt_.grad_dtype,
                                                     opt_.device, opt_.grad_allocator,
                                                     opt_.stream));
    flat_.UnbindGrads();
  }
  return absl::OkStatus();
}

Tensor ShardedGroup::shard_param() const {
  return opt_.params == Mode::kFull ? flat_.Shard(full_param_) : shard_param_;
}

Tensor ShardedGroup::shard_grad() const {
  return opt_.grads == Mode::kFull ? flat_.Shard(full_grad_) : shard_grad_;
}

std::vector<OptimTarget> ShardedGroup::OptimizerTargets() const {
  return flat_.ShardTargets(shard_param(), shard_grad());
}

bool ShardedGroup::Contains(const Parameter* param) const {
  return std::find(flat_.params().begin(), flat_.params().end(), param) != flat_.params().end();
}

absl::Status ShardedGroup::Gather(bool async) {
  if (opt_.params == Mode::kFull || gathered()) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(full_param_,
                        Tensor::Empty({flat_.padded_numel()}, shard_param_.dtype(), opt_.device,
                                      opt_.param_allocator, opt_.stream));
  gather_work_ = group_->AllGather(shard_param_, full_param_, {.stream = opt_.stream});
  flat_.BindValues(full_param_);
  return async ? absl::OkStatus() : WaitGathered();
}

absl::Status ShardedGroup::WaitGathered() {
  if (gather_work_ == nullptr) return absl::OkStatus();
  std::shared_ptr<comm::Work> w = std::move(gather_work_);
  return Annotate(w->Wait(), "all-gathering parameters of " + name());
}

void ShardedGroup::ReleaseFull() {
  if (opt_.params == Mode::kFull || !gathered()) return;
  flat_.UnbindValues();
  full_param_ = Tensor();
}

absl::Status ShardedGroup::AllGatherInPlace() {
  if (opt_.params != Mode::kFull) return Internal("AllGatherInPlace on sharded parameters");
  return Annotate(group_->AllGather(flat_.Shard(full_param_), full_param_, {.stream = opt_.stream})
                      ->Wait(),
                  "all-gathering updated parameters of " + name());
}

absl::Status ShardedGroup::PrepareGrads() {
  if (opt_.grads == Mode::kFull || full_grad_.defined()) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(full_grad_, Tensor::Zeros({flat_.padded_numel()}, opt_.grad_dtype,
                                                  opt_.device, opt_.grad_allocator, opt_.stream));
  flat_.BindGrads(full_grad_);
  return absl::OkStatus();
}

absl::Status ShardedGroup::ReduceGrads(bool async) {
  if (!full_grad_.defined()) {
    return Internal(absl::StrCat("ReduceGrads of ", name(), " without gradients"));
  }
  Tensor buffer = full_grad_;
  if (opt_.reduce_dtype != opt_.grad_dtype) {
    WEFT_ASSIGN_OR_RETURN(reduce_buffer_, full_grad_.ToDType(opt_.reduce_dtype, opt_.stream));
    buffer = reduce_buffer_;
  }
  // In place: this rank's block of the buffer receives the sum.
  reduce_work_ = group_->ReduceScatter(buffer, flat_.Shard(buffer),
                                       {.op = comm::ReduceOp::kSum, .stream = opt_.stream});
  return async ? absl::OkStatus() : FinishReduce();
}

absl::Status ShardedGroup::FinishReduce() {
  if (reduce_work_ == nullptr) return absl::OkStatus();
  std::shared_ptr<comm::Work> w = std::move(reduce_work_);
  WEFT_RETURN_IF_ERROR(Annotate(w->Wait(), "reduce-scattering gradients of " + name()));
  const KernelContext k{opt_.device, opt_.stream};
  if (opt_.grads == Mode::kFull) {
    if (reduce_buffer_.defined()) {
      Tensor shard = flat_.Shard(full_grad_);
      WEFT_RETURN_IF_ERROR(shard.CopyFrom(flat_.Shard(reduce_buffer_), opt_.stream));
      reduce_buffer_ = Tensor();
    }
    return absl::OkStatus();
  }
  Tensor reduced = flat_.Shard(reduce_buffer_.defined() ? reduce_buffer_ : full_grad_);
  if (reduced.dtype() != shard_grad_.dtype()) {
    WEFT_ASSIGN_OR_RETURN(reduced, reduced.ToDType(shard_grad_.dtype(), opt_.stream));
  }
  WEFT_RETURN_IF_ERROR(opt_.ops->Add(k, shard_grad_, shard_grad_, reduced));
  reduce_buffer_ = Tensor();
  flat_.UnbindGrads();
  full_grad_ = Tensor();
  return absl::OkStatus();
}

absl::Status ShardedGroup::ZeroShardGrad() {
  // kFull: the whole persistent buffer (the params' grads are views of it).
  return (opt_.grads == Mode::kSharded ? shard_grad_ : full_grad_).Zero(opt_.stream);
}

}  // namespace weft
