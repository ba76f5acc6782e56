#include "core/runtime/parallel_setup.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/env/dist_env.h"
#include "comm/env/init.h"
#include "comm/device_mesh/training_mesh.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/composer.h"
#include "core/parallel/strategy_registry.h"
#include "core/runtime/job_agreement.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace weft {

absl::StatusOr<JobTopology> ResolveTopology(const std::optional<JobTopology>& injected) {
  if (injected.has_value()) return *injected;
  WEFT_ASSIGN_OR_RETURN(comm::DistributedEnv env, comm::ReadDistributedEnv());
  JobTopology t;
  t.rank = env.rank;
  t.world_size = env.world_size;
  t.local_rank = env.local_rank;
  t.multi_node = env.multi_node();
  t.description = env.ToString();
  t.launcher = env.launcher;
  return t;
}

comm::MeshSizes MeshSizesOf(const ParallelConfig& c) {
  // dp_shard's default 0 means "the rest"; when another axis asks for the
  // rest (--pp=0 alone), data parallelism unset means one rank wide.
  const bool other_rest = c.pp() == 0 || c.cp() == 0 || c.tp() == 0 || c.dp_replicate() == 0;
  return {.pp = c.pp(),
          .dp_replicate = c.dp_replicate(),
          .dp_shard = other_rest && !c.has_dp_shard() ? 1 : c.dp_shard(),
          .cp = c.cp(),
          .tp = c.tp(),
          .ep = c.ep()};
}

namespace {

// The option `name` as some registered strategy declares it; null: none does.
std::optional<OptionSpec> DeclaredOption(const std::string& name) {
  for (const std::string& strategy : RegisteredStrategies()) {
    absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(strategy);
    if (!s.ok()) continue;
    const OptionSchema schema = (*s)->Options();  // Find points into it
    if (const OptionSpec* spec = schema.Find(name)) return *spec;
  }
  return std::nullopt;
}

// A set scalar field as option text, the way a user writes it.
std::string FieldText(const google::protobuf::Message& m,
                      const google::protobuf::FieldDescriptor& f, const OptionSpec& spec) {
  const google::protobuf::Reflection& r = *m.GetReflection();
  using FD = google::protobuf::FieldDescriptor;
  switch (f.cpp_type()) {
    case FD::CPPTYPE_INT32: return absl::StrCat(r.GetInt32(m, &f));
    case FD::CPPTYPE_INT64: return absl::StrCat(r.GetInt64(m, &f));
    case FD::CPPTYPE_DOUBLE: return absl::StrCat(r.GetDouble(m, &f));
    case FD::CPPTYPE_FLOAT: return absl::StrCat(r.GetFloat(m, &f));
    case FD::CPPTYPE_BOOL: return r.GetBool(m, &f) ? "true" : "false";
    case FD::CPPTYPE_STRING: {
      // An empty flag (--reduce_dtype=) asks for the option's default.
      std::string v = r.GetString(m, &f);
      return v.empty() ? spec.default_value : v;
    }
    default: return "";
  }
}

}  // namespace

absl::StatusOr<StrategyOptionValues> StrategyOptionsFromConfig(const ParallelConfig& c) {
  StrategyOptionValues o;
  WEFT_ASSIGN_OR_RETURN(o.given, ParseOptionList(c.strategy_options()));
  // A convenience flag is a ParallelConfig field named like an option some
  // registered strategy declares (--zero_stage, --bucket_mb, --pp_schedule):
  // only the set ones, so each strategy's schema keeps its own defaults. A
  // strategy adds a flag by adding the field; nothing here names it.
  const google::protobuf::Descriptor& d = *c.GetDescriptor();
  const google::protobuf::Reflection& r = *c.GetReflection();
  for (int i = 0; i < d.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& f = *d.field(i);
    if (f.is_repeated() || !r.HasField(c, &f)) continue;
    std::optional<OptionSpec> spec = DeclaredOption(f.name());
    if (!spec.has_value()) continue;
    o.from_flags[f.name()] = FieldText(c, f, *spec);
  }
  return o;
}

absl::StatusOr<PlanRequest> PlanRequestFromConfig(const TrainConfig& config,
                                                  const JobTopology& topology) {
  const ParallelConfig& pc = config.parallel();
  PlanRequest r;
  r.strategy = pc.strategy();
  r.mesh = MeshSizesOf(pc);
  WEFT_ASSIGN_OR_RETURN(r.own_axes, ParseMeshAxes(pc.mesh_axes()));
  WEFT_ASSIGN_OR_RETURN(r.options, StrategyOptionsFromConfig(pc));
  // Every bool of the job is a switch a strategy may join on (recompute
  // joins on --recompute); the plan does not need to know which.
  const google::protobuf::Descriptor& d = *config.GetDescriptor();
  for (int i = 0; i < d.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& f = *d.field(i);
    if (f.is_repeated() || f.cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_BOOL) continue;
    r.switches[f.name()] = config.GetReflection()->GetBool(config, &f);
  }
  r.world_size = topology.world_size;
  r.description = topology.description;
  return r;
}

absl::StatusOr<ParallelPlan> ResolvePlan(const TrainConfig& config, const JobTopology& topology) {
  for (absl::string_view plugin :
       absl::StrSplit(config.parallel().plugin(), ',', absl::SkipEmpty())) {
    WEFT_RETURN_IF_ERROR(LoadStrategyPlugin(std::string(plugin)));
  }
  WEFT_ASSIGN_OR_RETURN(PlanRequest request, PlanRequestFromConfig(config, topology));
  return ParallelPlan::Resolve(request);
}

absl::StatusOr<std::unique_ptr<ParallelState>> InitParallel(
    const ParallelPlan& plan, const ParallelConfig& pc, JobTopology& topology, Device device,
    std::shared_ptr<comm::OpObserver> observer, const std::string& job_text) {
  auto state = std::make_unique<ParallelState>();
  state->world_rank = topology.rank;
  state->world_size = topology.world_size;
  if (plan.mesh() == nullptr) return state;  // one process, no strategy
  const comm::TrainingMesh& shape = *plan.mesh();
  std::string backend = pc.backend();
  if (backend == "auto") backend = device.is_cuda() ? "nccl" : "gloo";
  if (backend == "nccl" && !device.is_cuda()) {
    return InvalidArgument("--backend=nccl with --device=" + device.ToString(),
                           "nccl with CUDA tensors, gloo with CPU tensors");
  }
  const absl::Duration timeout = absl::Seconds(pc.timeout_s());
  // Every gloo group of this rank (world, mesh axes, sub-groups) binds to
  // one address that the other hosts can reach.
  std::string bind_address = "127.0.0.1";
  if (topology.store == nullptr) {
    comm::DistributedEnv env;
    WEFT_ASSIGN_OR_RETURN(env, comm::ReadDistributedEnv());
    WEFT_ASSIGN_OR_RETURN(comm::DistributedContext dist,
                          comm::InitDistributed(env, {.backend = backend,
                                                      .timeout = timeout,
                                                      .gloo_iface = pc.gloo_iface()}));
    topology.store = dist.store;
    bind_address = dist.bind.address;
    state->keep_alive.push_back(dist.world);
    if (dist.watchdog != nullptr) state->keep_alive.push_back(dist.watchdog);
  } else if (!pc.gloo_iface().empty()) {
    WEFT_ASSIGN_OR_RETURN(bind_address, comm::InterfaceAddress(pc.gloo_iface()));
  }
  // Before any mesh group: a rank with other flags is named, not left to
  // time out or train out of step. A dry run (meta) simulates one rank.
  if (backend != "meta" && !job_text.empty()) {
    WEFT_RETURN_IF_ERROR(CheckSameAsRankZero(*topology.store, JobRound(), topology.rank,
                                             topology.world_size, AgreementText(job_text),
                                             timeout));
  }
  comm::DeviceMeshOptions mesh_options;
  mesh_options.backend = backend;
  mesh_options.group.name = "dp";
  mesh_options.group.timeout = timeout;
  mesh_options.group.observer = std::move(observer);
  mesh_options.group.gloo.hostname = bind_address;
  mesh_options.group.nccl.device = device.is_cuda() ? device.index : -1;
  // Groups on first use: most axes have size 1 and are never asked for.
  mesh_options.eager = false;
  absl::StatusOr<std::unique_ptr<comm::DeviceMesh>> mesh =
      comm::DeviceMesh::Create(shape.layout().axes(), topology.rank, topology.world_size,
                               topology.store, mesh_options);
  if (!mesh.ok()) {
    return Annotate(mesh.status(), "building the mesh " + shape.ToString());
  }
  state->mesh = std::move(*mesh);
  // The data-parallel coordinates, not the world rank: ranks of one tp, cp
  // or pp group read the same samples.
  state->dp_rank = shape.DataParallelRank(topology.rank);
  state->dp_size = shape.DataParallelSize();
  // Parameters sharded by dimension (tp) have their squared gradient norms
  // summed over the tp ranks; replicated ones are counted once (grad_norm.h).
  // Not over cp: every cp rank holds the same shards, which a sum over cp
  // would count cp times.
  if (shape.size("tp") > 1) {
    // A group of its own, so tp's traffic counters stay the layers' own.
    WEFT_ASSIGN_OR_RETURN(std::vector<int> tp_ranks, state->mesh->GroupRanks("tp"));
    WEFT_ASSIGN_OR_RETURN(state->model_parallel, state->mesh->NewGroup(tp_ranks, "tp_norm"));
  }
  if (state->dp_size > 1) {
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> dp,
                          state->mesh->FlatGroup({"dp_replicate", "dp_shard"}));
    // The logged loss is summed over them first (ParallelState::SumLoss).
    state->loss_groups.push_back(std::move(dp));
  }
  return state;
}

absl::Status ApplyStrategies(const ParallelPlan& plan, std::unique_ptr<Model>& model,
                             RunContext& ctx, Allocator* param_allocator,
                             Allocator* grad_allocator, DType grad_dtype, ParallelState& state) {
  StrategyContext sc;
  sc.model_slot = &model;
  sc.mesh = state.mesh.get();
  sc.run = &ctx;
  sc.param_allocator = param_allocator;
  sc.grad_allocator = grad_allocator;
  sc.grad_dtype = grad_dtype;
  return ApplyPlan(plan, sc, state);
}

}  // namespace weft
