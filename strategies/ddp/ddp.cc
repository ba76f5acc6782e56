#include "strategies/ddp/ddp.h"

#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/bucketing.h"
#include "core/parallel/reduce_groups.h"

namespace weft {
namespace {

const std::vector<std::string> kDataParallelAxes = {"dp_replicate", "dp_shard"};

struct Bucket {
  std::vector<Parameter*> params;
  std::shared_ptr<comm::ProcessGroup> group;  // the params' data-parallel axes
  Tensor flat;  // grad dtype, all params' gradients back to back
  int pending = 0;
  std::shared_ptr<comm::Work> work;
};

class DdpParticipant : public StepParticipant {
 public:
  DdpParticipant(NativeStream stream, bool overlap) : stream_(stream), overlap_(overlap) {}

  // Buckets each reduce group (core/parallel/reduce_groups.h) separately;
  // a group sharded over every data-parallel axis needs no reduction.
  absl::Status Build(Model& model, comm::DeviceMesh& mesh, double bucket_mb, DType grad_dtype,
                     Device device, Allocator* allocator) {
    for (const ReduceGroup& rg : GroupByReduceAxes(model.Parameters(), kDataParallelAxes)) {
      if (rg.axes.empty()) continue;
      WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> group, mesh.FlatGroup(rg.axes));
      WEFT_RETURN_IF_ERROR(AddBuckets(rg.params, group, bucket_mb, grad_dtype, device, allocator));
    }
    for (size_t b = 0; b < buckets_.size(); ++b) {
      for (Parameter* p : buckets_[b].params) bucket_of_[p] = b;
    }
    // Readiness: a parameter is final once the module that owns it has
    // finished its backward (a tied weight's owner runs last).
    for (Module* m : model.Modules()) {
      if (m->held_own_parameters().empty()) continue;
      m->AddHook(Module::HookPoint::kGradientsReady, [this](Module& mod, RunContext&) {
        return OnModuleBackwardDone(mod);
      });
    }
    return absl::OkStatus();
  }

  absl::Status AddBuckets(const std::vector<Parameter*>& group_params,
                          std::shared_ptr<comm::ProcessGroup> group, double bucket_mb,
                          DType grad_dtype, Device device, Allocator* allocator) {
    for (std::vector<Parameter*>& params :
         BucketInBackwardOrder(group_params, bucket_mb, DTypeSize(grad_dtype))) {
      int64_t numel = 0;
      for (Parameter* p : params) {
        if (p->grad.dtype() != grad_dtype) {
          return Internal("gradient dtype differs from --grad_dtype for " + p->name());
        }
        numel += p->numel();
      }
      Bucket b;
      WEFT_ASSIGN_OR_RETURN(b.flat,
                            Tensor::Zeros({numel}, grad_dtype, device, allocator, stream_));
      int64_t off = 0;
      for (Parameter* p : params) {
        p->grad = b.flat.Slice(0, off, off + p->numel()).View(p->shape());
        off += p->numel();
      }
      b.params = std::move(params);
      b.group = group;
      buckets_.push_back(std::move(b));
    }
    return absl::OkStatus();
  }

  // Every gradient is a view into a bucket: one memset per bucket.
  absl::Status ZeroGrad() override {
    for (Bucket& b : buckets_) WEFT_RETURN_IF_ERROR(b.flat.Zero(stream_));
    return absl::OkStatus();
  }
  bool ZeroesModelGradients() const override { return true; }

  absl::Status BeforeBackward(const BackwardInfo& info) override {
    sync_ = info.last;
    for (Bucket& b : buckets_) b.pending = static_cast<int>(b.params.size());
    return absl::OkStatus();
  }

  absl::Status FinishGradients() override {
    if (!sync_) return absl::OkStatus();
    for (size_t i = 0; i < buckets_.size(); ++i) {
      if (buckets_[i].work == nullptr) WEFT_RETURN_IF_ERROR(Launch(i));
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (Bucket& b : buckets_) {
      absl::Status s = b.work->Wait();
      b.work = nullptr;
      if (!s.ok()) return Annotate(s, "ddp gradient all-reduce");
    }
    wait_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
    return absl::OkStatus();
  }

  void AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) override {
    out->push_back({"ddp_wait_ms", wait_ms_});
    wait_ms_ = 0;
  }

 private:
  absl::Status OnModuleBackwardDone(Module& m) {
    for (Parameter* p : m.held_own_parameters()) {
      auto it = bucket_of_.find(p);
      if (it == bucket_of_.end()) continue;
      Bucket& b = buckets_[it->second];
      if (--b.pending == 0 && sync_ && overlap_) WEFT_RETURN_IF_ERROR(Launch(it->second));
    }
    return absl::OkStatus();
  }

  absl::Status Launch(size_t i) {
    Bucket& b = buckets_[i];
    b.work = b.group->AllReduce(b.flat, {.op = comm::ReduceOp::kSum, .stream = stream_});
    return absl::OkStatus();
  }

  NativeStream stream_;
  bool overlap_;
  std::vector<Bucket> buckets_;
  absl::flat_hash_map<const Parameter*, size_t> bucket_of_;
  bool sync_ = true;
  double wait_ms_ = 0;
};

}  // namespace

OptionSchema DdpStrategy::Options() const {
  OptionSchema s;
  s.Double("bucket_mb", 25, "gradient bucket size in MiB; buckets are all-reduced as they fill");
  s.Bool("overlap", true, "launch bucket all-reduces during backward (false: all at the end)");
  return s;
}

absl::Status DdpStrategy::Validate(const StrategyOptionSet& options,
                                   const comm::MeshLayout* mesh) const {
  if (mesh == nullptr) {
    return FailedPrecondition("ddp without a device mesh", "a job started with a mesh",
                              "the runtime builds one whenever --strategy is set");
  }
  if (!(options.GetDouble("bucket_mb") > 0)) {
    return InvalidArgument(absl::StrCat("bucket_mb=", options.GetDouble("bucket_mb")),
                           "bucket_mb > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> DdpStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  Model& model = ctx.model();
  // Every replica starts from the parameters of the first rank of its
  // reduce group (a parameter sharded over an axis differs along it).
  for (Parameter* p : model.Parameters()) {
    const std::vector<std::string> axes = ReduceAxes(*p, kDataParallelAxes);
    if (axes.empty()) continue;
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> group, ctx.mesh->FlatGroup(axes));
    WEFT_RETURN_IF_ERROR(
        group->Broadcast(p->value, {.root = 0, .stream = ctx.run->stream})->Wait());
  }
  auto participant =
      std::make_unique<DdpParticipant>(ctx.run->stream, ctx.options->GetBool("overlap"));
  WEFT_RETURN_IF_ERROR(participant->Build(model, *ctx.mesh, ctx.options->GetDouble("bucket_mb"),
                                          ctx.grad_dtype, ctx.run->device, ctx.grad_allocator));
  result.participants.push_back(std::move(participant));
  return result;
}

}  // namespace weft
