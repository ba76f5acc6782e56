#include "core/runtime/memory_estimate.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/device_mesh/training_mesh.h"
#include "comm/store/hash_store.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/job_dtypes.h"
#include "core/runtime/parallel_setup.h"

namespace weft {
namespace {

// The job's config, turned into a dry run of it: same model, batch,
// strategies and dtypes; on the meta device; nothing written anywhere.
absl::StatusOr<TrainConfig> DryRunConfig(TrainConfig c, Device target) {
  // The dtypes the job would train in there, refused as the trainer would.
  WEFT_ASSIGN_OR_RETURN(const DType compute, ComputeDTypeOn(c, target));
  WEFT_RETURN_IF_ERROR(GradDTypeOn(c, target).status());
  c.set_dtype(compute == DType::kBF16 ? "bf16" : "f32");
  c.set_device("meta");
  c.mutable_parallel()->set_backend("meta");
  c.set_quiet(true);
  c.set_log_every(0);
  c.set_eval_every(0);
  c.set_metrics_out("");
  c.set_report("");
  c.set_trace_dir("");
  c.set_gpu_sample_s(0);
  // No checkpoints (the flags that go with a directory too: alone they are
  // refused, which made --strategy=auto find no layout).
  c.set_checkpoint_dir("");
  c.clear_checkpoint_every();
  c.clear_keep_last();
  c.clear_checkpoint_async();
  c.set_resume("");
  // A captured step allocates what the eager one does (from its own pool).
  c.set_cuda_graph(false);
  return c;
}

// "fsdp", or with model-parallel axes "tp,fsdp [pp=2 1f1b, tp=2]".
std::string DescribeLayout(const ParallelConfig& pc) {
  std::string out = pc.strategy().empty() ? "none" : pc.strategy();
  std::vector<std::string> axes;
  if (pc.pp() > 1) {
    axes.push_back(absl::StrCat("pp=", pc.pp(), " ", pc.pp_schedule()));
    if (pc.pp_virtual_stages() > 1) absl::StrAppend(&axes.back(), " v", pc.pp_virtual_stages());
  }
  if (pc.cp() > 1) axes.push_back(absl::StrCat("cp=", pc.cp()));
  if (pc.tp() > 1) axes.push_back(absl::StrCat("tp=", pc.tp()));
  if (!axes.empty()) absl::StrAppend(&out, " [", absl::StrJoin(axes, ", "), "]");
  return out;
}

}  // namespace

absl::StatusOr<std::vector<MemoryEstimate>> EstimatePipelineStages(
    const MemoryEstimateOptions& o) {
  // The mesh's pp size (--pp=0: all the ranks the other axes leave).
  const ParallelConfig& pc = o.trainer.config.parallel();
  absl::StatusOr<comm::TrainingMesh> mesh =
      comm::TrainingMesh::Create(MeshSizesOf(pc), o.world_size);
  const int pp = mesh.ok() ? mesh->size("pp") : 1;
  if (pp <= 1) {
    // No pipeline (or a mesh the estimate itself will reject, with its reason).
    WEFT_ASSIGN_OR_RETURN(MemoryEstimate e, EstimateMemory(o));
    return std::vector<MemoryEstimate>{e};
  }
  // pp is the outermost mesh axis: stage s's ranks are a block of world / pp.
  const int block = o.world_size / pp;
  std::vector<MemoryEstimate> out;
  for (int s = 0; s < pp; ++s) {
    MemoryEstimateOptions one = o;
    one.rank = s * block + o.rank % block;
    WEFT_ASSIGN_OR_RETURN(MemoryEstimate e, EstimateMemory(std::move(one)));
    out.push_back(e);
  }
  return out;
}

const MemoryEstimate& WorstRank(const std::vector<MemoryEstimate>& estimates) {
  return *std::max_element(estimates.begin(), estimates.end(),
                           [](const MemoryEstimate& a, const MemoryEstimate& b) {
                             return a.peak() < b.peak();
                           });
}

absl::StatusOr<MemoryEstimate> EstimateMemory(MemoryEstimateOptions o) {
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return InvalidArgument(absl::StrCat("rank ", o.rank, " of ", o.world_size, " ranks"),
                           "world_size >= 1 and 0 <= rank < world_size", "e.g. --nproc=4");
  }
  if (o.steps < 1) return InvalidArgument(absl::StrCat("steps=", o.steps), "steps >= 1");
  WEFT_ASSIGN_OR_RETURN(Device target, ParseDevice(o.trainer.config.device()));
  if (target.is_meta()) {
    return InvalidArgument("--device=meta for an estimate", "the device the job will run on",
                           "e.g. --device=cuda or --device=cpu");
  }
  MemoryEstimate e;
  e.device = target.ToString();
  e.world_size = o.world_size;
  e.rank = o.rank;
  e.strategy = DescribeLayout(o.trainer.config.parallel());
  WEFT_ASSIGN_OR_RETURN(o.trainer.config, DryRunConfig(o.trainer.config, target));
  JobTopology topology;
  topology.rank = o.rank;
  topology.world_size = o.world_size;
  topology.local_rank = o.rank;
  topology.store = std::make_shared<comm::HashStore>();
  topology.description = absl::StrCat("dry run of rank ", o.rank, " of ", o.world_size);
  topology.launcher = "memory estimate";
  o.trainer.topology = topology;
  if (o.trainer.config.steps() < o.steps) o.trainer.config.set_steps(o.steps);

  // The meta allocator is one per process: measure from what is live now.
  WEFT_ASSIGN_OR_RETURN(Allocator * device, DefaultAllocator(Device::Meta()));
  const int64_t base = device->Stats().allocated_bytes;
  device->ResetPeak();
  int64_t resident = 0;
  {
    absl::StatusOr<std::unique_ptr<Trainer>> made = Trainer::Create(std::move(o.trainer));
    if (!made.ok()) return Annotate(made.status(), "building the job on the meta device");
    std::unique_ptr<Trainer> trainer = *std::move(made);
    trainer->context().meta_moe_routing_bound = o.moe_routing_bound;
    e.setup_peak = device->Stats().peak_allocated_bytes - base;
    device->ResetPeak();
    for (int s = 0; s < o.steps; ++s) {
      absl::StatusOr<StepStats> step = trainer->TrainStep();
      if (!step.ok()) return Annotate(step.status(), "a training step on the meta device");
    }
    e.step_peak = device->Stats().peak_allocated_bytes - base;
    resident = device->Stats().allocated_bytes - base;
    const Trainer::MemoryStats m = trainer->ModelMemory();
    e.params = m.params.peak_allocated_bytes;
    e.grads = m.grads.peak_allocated_bytes;
    e.optimizer = m.optimizer.peak_allocated_bytes;
    e.activations = m.activations.peak_allocated_bytes;
  }
  e.resident = resident;
  return e;
}

std::string FormatMemoryEstimate(const MemoryEstimate& e) {
  auto row = [](const char* name, int64_t bytes, const char* note) {
    return absl::StrFormat("  %-22s %12.2f MiB %15d B  %s\n", name,
                           static_cast<double>(bytes) / (1 << 20), bytes, note);
  };
  std::string out = absl::StrFormat("memory per rank (rank %d of %d, strategy %s, device %s)\n",
                                    e.rank, e.world_size, e.strategy, e.device);
  out += row("parameters", e.params, "peak; includes gathered zero-3/fsdp units");
  out += row("gradients", e.grads, "peak; includes full buffers before reduce-scatter");
  out += row("optimizer state", e.optimizer, "fp32 masters (mixed precision) and moments");
  out += row("activations", e.activations, "peak of one step: saved tensors, grads, logits");
  out += row("resident after a step", e.resident, "model state and persistent buffers");
  out += row("peak while building", e.setup_peak, "materialized model + sharding copies");
  out += row("peak while training", e.step_peak, "forward, backward, reductions, optimizer");
  out += row("peak", e.peak(), "what the allocator's peak_allocated_bytes will read");
  return out;
}

std::string FormatStageTable(const std::vector<MemoryEstimate>& estimates) {
  auto mib = [](int64_t bytes) {
    return absl::StrFormat("%.2f", static_cast<double>(bytes) / (1 << 20));
  };
  std::string out = absl::StrFormat("per pipeline stage (MiB; %s, device %s)\n",
                                    estimates.front().strategy, estimates.front().device);
  out += absl::StrFormat("  %-6s %10s %10s %10s %10s %10s\n", "rank", "params", "grads",
                         "optimizer", "activations", "peak");
  const MemoryEstimate& worst = WorstRank(estimates);
  for (const MemoryEstimate& e : estimates) {
    out += absl::StrFormat("  %-6d %10s %10s %10s %10s %10s%s\n", e.rank, mib(e.params),
                           mib(e.grads), mib(e.optimizer), mib(e.activations), mib(e.peak()),
                           &e == &worst ? "  <- worst" : "");
  }
  return out;
}

}  // namespace weft
