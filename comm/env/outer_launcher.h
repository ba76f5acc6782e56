// The launcher that started this process as one of several tasks (an srun
// step, Open MPI's mpirun, a Hydra mpiexec), checked against a second
// launcher below it: torchrun variables, tools/launch or --nproc_per_node.
//
// A launcher inside another runs one agent per outer task (torchrun under
// `srun --ntasks-per-node=1`), or the outer tasks are the ranks themselves
// (RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS in a script). Anything else
// splits one job into independent ones without a word: `srun -n 2 train
// --nproc_per_node=2` ran two 2-rank jobs, and a stale RANK=0 WORLD_SIZE=1
// under `mpirun -np 2` ran two 1-rank jobs. These checks refuse that.
//
// Precedence follows dist_env.h: Open MPI, then Hydra, then an srun step
// (mpirun inside an allocation starts its daemons with srun, so its ranks
// also carry a step's variables, which describe the daemons).
#ifndef WEFT_COMM_ENV_OUTER_LAUNCHER_H_
#define WEFT_COMM_ENV_OUTER_LAUNCHER_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "comm/env/dist_env.h"

namespace weft::comm {

struct OuterLauncher {
  std::string name;      // "an srun step", "mpirun (Open MPI)"
  std::string variable;  // "SLURM_STEP_NUM_TASKS=2"
  int tasks = 1;
};

// The outer launcher when it started more than one task; else nullopt.
std::optional<OuterLauncher> FindOuterLauncher(const EnvLookup& env);

// For ranks read from torchrun variables: the world (or GROUP_WORLD_SIZE,
// the agents' count, when set) must match the outer launcher's tasks.
absl::Status CheckAgainstOuterLauncher(const DistributedEnv& d, const EnvLookup& env);

// For a launcher about to start workers (tools/launch, --nproc_per_node):
// inside an outer launcher of several tasks each task must be one node.
absl::Status CheckLaunchInsideOuterLauncher(int nproc_per_node, int nnodes, const EnvLookup& env);

}  // namespace weft::comm

#endif  // WEFT_COMM_ENV_OUTER_LAUNCHER_H_
