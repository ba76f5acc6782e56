#include "comm/env/dist_env.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/env/outer_launcher.h"
#include "comm/env/slurm.h"
#include "comm/env/slurm_step.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::comm {
namespace {

absl::StatusOr<int> IntVar(const EnvLookup& env, absl::string_view name,
                           std::optional<int> fallback = std::nullopt) {
  std::optional<std::string> value = env(name);
  if (!value.has_value() || value->empty()) {
    if (fallback.has_value()) return *fallback;
    return InvalidArgument(absl::StrCat("environment variable ", name, " is not set"),
                           "the launcher (torchrun, srun or tools/launch) to set it");
  }
  int n = 0;
  if (!absl::SimpleAtoi(*value, &n)) {
    return InvalidArgument(absl::StrCat(name, "='", *value, "' is not an integer"),
                           "a decimal integer");
  }
  return n;
}

absl::Status CheckIndex(absl::string_view index_name, int index, absl::string_view size_name,
                        int size) {
  if (size < 1) {
    return InvalidArgument(absl::StrCat(size_name, "=", size), absl::StrCat(size_name, " >= 1"));
  }
  if (index < 0 || index >= size) {
    return InvalidArgument(absl::StrCat(index_name, "=", index, " with ", size_name, "=", size),
                           absl::StrCat("0 <= ", index_name, " < ", size_name));
  }
  return absl::OkStatus();
}

absl::Status CheckPort(absl::string_view source, int port) {
  if (port < 1 || port > 65535) {
    return InvalidArgument(absl::StrCat(source, " port ", port), "a TCP port in 1..65535");
  }
  return absl::OkStatus();
}

absl::StatusOr<DistributedEnv> ReadTorchrun(const EnvLookup& env) {
  DistributedEnv d;
  d.source = EnvSource::kTorchrun;
  WEFT_ASSIGN_OR_RETURN(d.rank, IntVar(env, "RANK"));
  WEFT_ASSIGN_OR_RETURN(d.world_size, IntVar(env, "WORLD_SIZE"));
  WEFT_RETURN_IF_ERROR(CheckIndex("RANK", d.rank, "WORLD_SIZE", d.world_size));
  WEFT_ASSIGN_OR_RETURN(d.local_rank, IntVar(env, "LOCAL_RANK", d.rank));
  WEFT_ASSIGN_OR_RETURN(d.local_world_size, IntVar(env, "LOCAL_WORLD_SIZE", d.world_size));
  WEFT_RETURN_IF_ERROR(
      CheckIndex("LOCAL_RANK", d.local_rank, "LOCAL_WORLD_SIZE", d.local_world_size));
  WEFT_ASSIGN_OR_RETURN(d.node_rank, IntVar(env, "GROUP_RANK", 0));
  std::optional<std::string> addr = env("MASTER_ADDR");
  if (addr.has_value() && !addr->empty()) {
    d.master_addr = *addr;
  } else if (d.world_size > 1) {
    return InvalidArgument("MASTER_ADDR is not set for a job of " +
                               std::to_string(d.world_size) + " ranks",
                           "the address of the node that hosts rank 0",
                           "start the job with tools/launch or torchrun, which set it");
  }
  // A single rank needs no store port; more than one must be told.
  const std::optional<int> default_port =
      d.world_size == 1 ? std::optional<int>(29500) : std::nullopt;
  WEFT_ASSIGN_OR_RETURN(d.master_port, IntVar(env, "MASTER_PORT", default_port));
  WEFT_RETURN_IF_ERROR(CheckPort("MASTER_PORT", d.master_port));
  d.launcher_hosts_store = env("WEFT_LAUNCHER_STORE").value_or("") == "1";
  const std::string agent = env("TORCHELASTIC_USE_AGENT_STORE").value_or("");
  if (!d.launcher_hosts_store && (agent == "True" || agent == "true" || agent == "1")) {
    // torchrun's own store listens on MASTER_PORT; ours goes next to it.
    d.master_port += 1;
    WEFT_RETURN_IF_ERROR(CheckPort("MASTER_PORT + 1", d.master_port));
  }
  return d;
}

absl::StatusOr<DistributedEnv> ReadSlurm(const EnvLookup& env) {
  DistributedEnv d;
  d.source = EnvSource::kSlurm;
  WEFT_ASSIGN_OR_RETURN(d.rank, IntVar(env, "SLURM_PROCID"));
  WEFT_ASSIGN_OR_RETURN(d.world_size, IntVar(env, "SLURM_NTASKS"));
  if (d.world_size > 1 && InSlurmBatchScript(env)) {
    // The batch script is one process whatever --ntasks says: its ranks
    // would wait for peers nobody starts until --timeout_s.
    return FailedPrecondition(
        absl::StrCat("SLURM_NTASKS=", d.world_size, " but this process is the batch script ",
                     "itself (no SLURM_STEP_ID: not started by srun), so no other rank will come"),
        "each rank started as a task of an srun step",
        "put srun in front of the command in the sbatch script (srun ... train ...), as "
        "tools/slurm_example_cpu.sbatch does; or set RANK, WORLD_SIZE, MASTER_ADDR and "
        "MASTER_PORT for each rank explicitly");
  }
  WEFT_RETURN_IF_ERROR(CheckIndex("SLURM_PROCID", d.rank, "SLURM_NTASKS", d.world_size));
  WEFT_ASSIGN_OR_RETURN(d.local_rank, IntVar(env, "SLURM_LOCALID", 0));
  WEFT_ASSIGN_OR_RETURN(d.node_rank, IntVar(env, "SLURM_NODEID", 0));
  std::optional<std::string> per_node = env("SLURM_STEP_TASKS_PER_NODE");
  if (!per_node.has_value()) per_node = env("SLURM_TASKS_PER_NODE");
  if (per_node.has_value() && !per_node->empty()) {
    WEFT_ASSIGN_OR_RETURN(std::vector<int> counts, ExpandSlurmTaskCounts(*per_node));
    if (d.node_rank < 0 || d.node_rank >= static_cast<int>(counts.size())) {
      return InvalidArgument(absl::StrCat("SLURM_NODEID=", d.node_rank, " but the task list '",
                                          *per_node, "' covers ", counts.size(), " nodes"),
                             "a node id inside the task list");
    }
    d.local_world_size = counts[d.node_rank];
  } else {
    d.local_world_size = d.world_size;
  }
  WEFT_RETURN_IF_ERROR(
      CheckIndex("SLURM_LOCALID", d.local_rank, "tasks on this node", d.local_world_size));

  std::optional<std::string> addr = env("MASTER_ADDR");
  if (addr.has_value() && !addr->empty()) {
    d.master_addr = *addr;
  } else {
    std::optional<std::string> nodelist;
    for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      nodelist = env(name);
      if (nodelist.has_value() && !nodelist->empty()) break;
    }
    if (!nodelist.has_value() || nodelist->empty()) {
      if (d.world_size > 1) {
        return InvalidArgument("no SLURM_NODELIST (or MASTER_ADDR) for a multi-rank Slurm job",
                               "srun to set SLURM_NODELIST", "export MASTER_ADDR in the script");
      }
    } else {
      WEFT_ASSIGN_OR_RETURN(std::vector<std::string> hosts, ExpandSlurmNodelist(*nodelist));
      d.master_addr = hosts.front();
    }
  }
  if (env("MASTER_PORT").has_value()) {
    WEFT_ASSIGN_OR_RETURN(d.master_port, IntVar(env, "MASTER_PORT"));
  } else {
    WEFT_ASSIGN_OR_RETURN(int job_id, IntVar(env, "SLURM_JOB_ID", 0));
    // Two srun steps of one allocation at once must not share the port.
    const char* step_var = env("SLURM_STEP_ID").has_value() ? "SLURM_STEP_ID" : "SLURM_STEPID";
    WEFT_ASSIGN_OR_RETURN(int step_id, IntVar(env, step_var, 0));
    d.master_port = SlurmStorePort(job_id, step_id);
  }
  WEFT_RETURN_IF_ERROR(CheckPort("MASTER_PORT", d.master_port));
  return d;
}

// A port all ranks of one MPI job agree on without talking: from the job's
// id as the launcher exports it, else the launching daemon's pid (every
// rank on a node is its child).
int MpiJobPort(const EnvLookup& env) {
  std::string job;
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri",
                           "PMI_KVSNAME", "SLURM_JOB_ID"}) {
    if (std::optional<std::string> v = env(name); v && !v->empty()) {
      job = *v;
      break;
    }
  }
  if (job.empty()) job = std::to_string(getppid());
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : job) h = (h ^ c) * 1099511628211ull;
  return 30000 + static_cast<int>(h % 20000);
}

absl::StatusOr<DistributedEnv> ReadMpi(const EnvLookup& env, bool open_mpi) {
  DistributedEnv d;
  d.source = EnvSource::kMpi;
  const char* rank_var = open_mpi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK";
  const char* size_var = open_mpi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE";
  const char* local_var = open_mpi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "MPI_LOCALRANKID";
  const char* local_size_var = open_mpi ? "OMPI_COMM_WORLD_LOCAL_SIZE" : "MPI_LOCALNRANKS";
  d.launcher = open_mpi ? "mpirun (Open MPI)" : "mpirun (Hydra/PMI)";
  WEFT_ASSIGN_OR_RETURN(d.rank, IntVar(env, rank_var));
  WEFT_ASSIGN_OR_RETURN(d.world_size, IntVar(env, size_var));
  WEFT_RETURN_IF_ERROR(CheckIndex(rank_var, d.rank, size_var, d.world_size));
  const bool has_local = env(local_var).has_value() && env(local_size_var).has_value();
  if (has_local) {
    WEFT_ASSIGN_OR_RETURN(d.local_rank, IntVar(env, local_var));
    WEFT_ASSIGN_OR_RETURN(d.local_world_size, IntVar(env, local_size_var));
    WEFT_RETURN_IF_ERROR(CheckIndex(local_var, d.local_rank, local_size_var, d.local_world_size));
  } else {
    // Hydra without local variables: assume one node unless MASTER_ADDR
    // says otherwise (the store then tells every rank where rank 0 is).
    d.local_rank = d.rank;
    d.local_world_size = d.world_size;
  }
  if (d.local_world_size > 0) d.node_rank = d.rank / d.local_world_size;
  std::optional<std::string> addr = env("MASTER_ADDR");
  if (addr.has_value() && !addr->empty()) {
    d.master_addr = *addr;
  } else if (d.multi_node()) {
    return InvalidArgument(
        absl::StrCat("an ", d.launcher, " job of ", d.world_size, " ranks across ",
                     d.world_size / std::max(1, d.local_world_size),
                     " nodes without MASTER_ADDR"),
        "MASTER_ADDR naming the node of rank 0, exported to every rank",
        "mpirun -x MASTER_ADDR=$(hostname) -x MASTER_PORT=29500 ... (Open MPI), or "
        "mpiexec -genv MASTER_ADDR $(hostname) ... (MPICH/Intel MPI)");
  } else {
    d.master_addr = "127.0.0.1";
  }
  if (env("MASTER_PORT").has_value()) {
    WEFT_ASSIGN_OR_RETURN(d.master_port, IntVar(env, "MASTER_PORT"));
  } else {
    d.master_port = MpiJobPort(env);
  }
  WEFT_RETURN_IF_ERROR(CheckPort("MASTER_PORT", d.master_port));
  return d;
}

absl::StatusOr<DistributedEnv> ReadPmix(const EnvLookup& env) {
  DistributedEnv d;
  d.source = EnvSource::kMpi;
  d.launcher = "PMIx";
  WEFT_ASSIGN_OR_RETURN(d.rank, IntVar(env, "PMIX_RANK"));
  std::optional<std::string> size_var;
  for (const char* name : {"PMIX_SIZE", "WORLD_SIZE"}) {
    if (env(name).has_value()) size_var = name;
  }
  if (!size_var.has_value()) {
    return InvalidArgument(absl::StrCat("PMIX_RANK=", d.rank, " without a world size"),
                           "PMIX_SIZE or WORLD_SIZE next to PMIX_RANK",
                           "launch with mpirun (which also sets OMPI_COMM_WORLD_SIZE), or "
                           "export WORLD_SIZE");
  }
  WEFT_ASSIGN_OR_RETURN(d.world_size, IntVar(env, *size_var));
  WEFT_RETURN_IF_ERROR(CheckIndex("PMIX_RANK", d.rank, *size_var, d.world_size));
  d.local_rank = d.rank;
  d.local_world_size = d.world_size;
  d.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
  if (env("MASTER_PORT").has_value()) {
    WEFT_ASSIGN_OR_RETURN(d.master_port, IntVar(env, "MASTER_PORT"));
  } else {
    d.master_port = MpiJobPort(env);
  }
  WEFT_RETURN_IF_ERROR(CheckPort("MASTER_PORT", d.master_port));
  return d;
}

// Variables that say this process is one of several, by launcher.
absl::Status CheckNotOneOfMany(const EnvLookup& env) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS",
                           "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
    std::optional<std::string> v = env(name);
    int n = 0;
    if (v.has_value() && absl::SimpleAtoi(*v, &n) && n > 1) {
      return FailedPrecondition(
          absl::StrCat(name, "=", *v, " says this process is one of ", n,
                       ", but no rank variable of that launcher is set, so weft would run ",
                       "as an independent single process"),
          "the launcher's rank variable as well (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, "
          "SLURM_PROCID)",
          "start the ranks with the launcher (srun, mpirun, torchrun, tools/launch) rather "
          "than by hand, or unset the variable to run one process");
    }
  }
  return absl::OkStatus();
}

// A rank variable without the rest of its launcher's set, as RANK alone.
absl::Status CheckNoStrayRank(const EnvLookup& env) {
  if (std::optional<std::string> v = env("LOCAL_RANK"); v.has_value()) {
    return InvalidArgument(absl::StrCat("LOCAL_RANK=", *v, " is set but RANK is not"),
                           "LOCAL_RANK with RANK and WORLD_SIZE, as torchrun and tools/launch "
                           "set them",
                           "start the ranks with a launcher, or unset LOCAL_RANK to run one "
                           "process");
  }
  // In an sbatch script without --ntasks Slurm sets SLURM_PROCID=0 alone.
  if (std::optional<std::string> v = env("SLURM_PROCID");
      v.has_value() && !InSlurmBatchScript(env)) {
    return InvalidArgument(absl::StrCat("SLURM_PROCID=", *v, " is set but SLURM_NTASKS is not"),
                           "SLURM_NTASKS next to SLURM_PROCID, as srun sets both",
                           "start the ranks with srun, or unset SLURM_PROCID to run one process");
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view EnvSourceName(EnvSource source) {
  switch (source) {
    case EnvSource::kSingleProcess:
      return "single process";
    case EnvSource::kTorchrun:
      return "torchrun";
    case EnvSource::kSlurm:
      return "slurm";
    case EnvSource::kMpi:
      return "mpi";
  }
  return "unknown";
}

std::string DistributedEnv::ToString() const {
  return absl::StrCat("rank ", rank, " of ", world_size, " (local ", local_rank, " of ",
                      local_world_size, ", node ", node_rank, ") from ", launcher,
                      ", store ", master_addr, ":", master_port,
                      launcher_hosts_store ? " (hosted by the launcher)" : "");
}

EnvLookup ProcessEnv() {
  return [](absl::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

EnvLookup MapEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](absl::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

bool StartedByLauncher(const EnvLookup& env) {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                           "SLURM_PROCID", "SLURM_STEP_ID"}) {
    if (env(name).has_value()) return true;
  }
  return false;
}

absl::StatusOr<DistributedEnv> ReadDistributedEnv(const EnvLookup& env) {
  absl::StatusOr<DistributedEnv> d = [&]() -> absl::StatusOr<DistributedEnv> {
    if (env("RANK").has_value()) return ReadTorchrun(env);
    if (env("OMPI_COMM_WORLD_RANK").has_value()) return ReadMpi(env, /*open_mpi=*/true);
    if (env("PMI_RANK").has_value()) return ReadMpi(env, /*open_mpi=*/false);
    if (env("SLURM_PROCID").has_value() && env("SLURM_NTASKS").has_value()) {
      return ReadSlurm(env);
    }
    if (env("PMIX_RANK").has_value()) return ReadPmix(env);
    WEFT_RETURN_IF_ERROR(CheckNoStrayRank(env));
    WEFT_RETURN_IF_ERROR(CheckNotOneOfMany(env));
    return DistributedEnv();
  }();
  if (d.ok() && d->source == EnvSource::kTorchrun) {
    d->launcher = env("WEFT_LAUNCHED").value_or("") == "1" ? "weft launch" : "torchrun";
  }
  if (d.ok() && d->source == EnvSource::kSlurm) d->launcher = "srun";
  // Only torchrun variables can sit under another launcher that also
  // numbers the processes; MPI and srun ranks are read from that launcher.
  if (d.ok() && d->source == EnvSource::kTorchrun) {
    WEFT_RETURN_IF_ERROR(CheckAgainstOuterLauncher(*d, env));
  }
  return d;
}

}  // namespace weft::comm
