#include "comm/env/outer_launcher.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

std::optional<int> PositiveVar(const EnvLookup& env, absl::string_view name) {
  std::optional<std::string> v = env(name);
  int n = 0;
  if (!v.has_value() || !absl::SimpleAtoi(*v, &n) || n < 1) return std::nullopt;
  return n;
}

}  // namespace

std::optional<OuterLauncher> FindOuterLauncher(const EnvLookup& env) {
  struct Source {
    const char* variable;
    const char* name;
  };
  for (const Source& s : {Source{"OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"},
                          Source{"PMI_SIZE", "mpirun (Hydra/PMI)"},
                          Source{"SLURM_STEP_NUM_TASKS", "an srun step"}}) {
    std::optional<int> tasks = PositiveVar(env, s.variable);
    if (!tasks.has_value()) continue;
    if (*tasks == 1) return std::nullopt;
    return OuterLauncher{s.name, absl::StrCat(s.variable, "=", *tasks), *tasks};
  }
  return std::nullopt;
}

absl::Status CheckAgainstOuterLauncher(const DistributedEnv& d, const EnvLookup& env) {
  std::optional<OuterLauncher> outer = FindOuterLauncher(env);
  if (!outer.has_value()) return absl::OkStatus();
  const std::optional<int> groups = PositiveVar(env, "GROUP_WORLD_SIZE");
  if (groups.has_value() ? *groups == outer->tasks : d.world_size == outer->tasks) {
    return absl::OkStatus();
  }
  const std::string ours =
      groups.has_value()
          ? absl::StrCat("GROUP_WORLD_SIZE=", *groups, " (", d.launcher, " agents, WORLD_SIZE=",
                         d.world_size, ")")
          : absl::StrCat("WORLD_SIZE=", d.world_size, " (", d.launcher, " variables, RANK=",
                         d.rank, ")");
  return FailedPrecondition(
      absl::StrCat(ours, " disagrees with ", outer->name, " (", outer->variable,
                   "): each of its ", outer->tasks, " tasks would run a separate job"),
      absl::StrCat("one world: WORLD_SIZE=", outer->tasks, ", or one torchrun/weft launch agent ",
                   "per task (GROUP_WORLD_SIZE=", outer->tasks, ")"),
      absl::StrCat("unset RANK, WORLD_SIZE and LOCAL_RANK to take the ranks from ", outer->name,
                   "; to start N workers per node run one task per node with --nnodes=<nodes>"));
}

absl::Status CheckLaunchInsideOuterLauncher(int nproc_per_node, int nnodes,
                                            const EnvLookup& env) {
  std::optional<OuterLauncher> outer = FindOuterLauncher(env);
  if (!outer.has_value() || nnodes == outer->tasks) return absl::OkStatus();
  return FailedPrecondition(
      absl::StrCat("--nproc_per_node=", nproc_per_node, " --nnodes=", nnodes, " inside ",
                   outer->name, " (", outer->variable, "): each of its ", outer->tasks,
                   " tasks would start a separate job of ", nproc_per_node * nnodes, " ranks"),
      absl::StrCat("one launcher per node: --nnodes=", outer->tasks,
                   " with one task per node, or the ranks started by ", outer->name, " alone"),
      absl::StrCat("drop --nproc_per_node and start every rank with ", outer->name,
                   " (srun -n/mpirun -np <ranks>), or run one task per node (srun "
                   "--ntasks-per-node=1 ... --nnodes=<nodes> --node_rank=$SLURM_NODEID)"));
}

}  // namespace weft::comm
