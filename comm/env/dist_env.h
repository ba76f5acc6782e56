// DistributedEnv: where this process sits in the job, read from the
// environment exactly as torchrun and Slurm's srun set it.
//
// Sources, first match wins (so torchrun inside srun is torchrun, and
// mpirun inside a Slurm allocation is mpirun):
//   torchrun / tools/launch: RANK and WORLD_SIZE set. Also LOCAL_RANK,
//       LOCAL_WORLD_SIZE, GROUP_RANK (node rank), MASTER_ADDR, MASTER_PORT.
//       Our launcher sets WEFT_LAUNCHED=1 (the banner then says "weft
//       launch") and WEFT_LAUNCHER_STORE=1: it hosts the TCP store at
//       MASTER_ADDR:MASTER_PORT itself. Under torchrun its agent's store
//       already holds MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so
//       weft's store uses MASTER_PORT + 1 there, hosted by rank 0.
//   Slurm srun: SLURM_PROCID and SLURM_NTASKS set. SLURM_LOCALID is the
//       local rank, SLURM_NODEID the node rank, SLURM_STEP_TASKS_PER_NODE
//       (or SLURM_TASKS_PER_NODE) the local world size; the master is the
//       first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST /
//       SLURM_NODELIST unless MASTER_ADDR is set, and the port is
//       MASTER_PORT or one derived from SLURM_JOB_ID and SLURM_STEP_ID
//       (slurm_step.h: jobs sharing a node, and concurrent steps of one
//       job, get different ports). A plain sbatch script (outside srun) also
//       has SLURM_PROCID=0 and SLURM_NTASKS but no SLURM_STEP_* variables
//       (slurm_step.h): with SLURM_NTASKS > 1 that is an error asking for
//       srun, since no other rank would ever come.
//   MPI launchers (weft links no MPI; it reads what they export):
//       Open MPI: OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE.
//       MPICH, Intel MPI and other Hydra launchers: PMI_RANK, PMI_SIZE,
//       MPI_LOCALRANKID and MPI_LOCALNRANKS where set.
//       The store is MASTER_ADDR:MASTER_PORT when set (mpirun -x
//       MASTER_ADDR=...); with every rank on one node, 127.0.0.1 and a port
//       derived from the job id; across nodes without MASTER_ADDR, an error
//       showing the -x MASTER_ADDR=$(hostname) fix.
//   Slurm srun: as above.
//   PMIx alone (PMIX_RANK, e.g. srun --mpi=pmix without Slurm's variables):
//       needs WORLD_SIZE or PMIX_SIZE for the size.
//   Otherwise: a single process (rank 0 of 1) -- unless some launcher's
//   variables say this process is one of several, which is an error rather
//   than a silent split into independent jobs, or a rank variable stands
//   alone (LOCAL_RANK; SLURM_PROCID outside a batch script), an error as
//   RANK alone is. An sbatch script without --ntasks has SLURM_PROCID=0
//   and no SLURM_NTASKS: that is one process, rightly.
// Malformed or inconsistent values are InvalidArgument naming the variable.
#ifndef WEFT_COMM_ENV_DIST_ENV_H_
#define WEFT_COMM_ENV_DIST_ENV_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::comm {

enum class EnvSource { kSingleProcess, kTorchrun, kSlurm, kMpi };

struct DistributedEnv {
  EnvSource source = EnvSource::kSingleProcess;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // the weft store's port
  // The launcher hosts the store; rank 0 must not.
  bool launcher_hosts_store = false;
  // For the banner: "torchrun", "slurm", "mpirun (Open MPI)", ...
  std::string launcher = "single process";

  bool multi_node() const { return world_size > local_world_size; }
  // "rank 3 of 8 (local 1 of 4, node 1) from slurm, master node01:29500"
  std::string ToString() const;
};

// Looks a variable up; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(absl::string_view)>;

// The real process environment.
EnvLookup ProcessEnv();
// A fixed map, for tests.
EnvLookup MapEnv(std::map<std::string, std::string> vars);

absl::StatusOr<DistributedEnv> ReadDistributedEnv(const EnvLookup& env = ProcessEnv());

// Whether some launcher started this process (a torchrun-style RANK, an MPI
// rank, a Slurm task), whether or not its variables are complete. Such
// output is forwarded and interleaved (mpirun even gives each rank a pty),
// so callers keep it to plain lines.
bool StartedByLauncher(const EnvLookup& env = ProcessEnv());

absl::string_view EnvSourceName(EnvSource source);  // "single process", "torchrun", "slurm", "mpi"

}  // namespace weft::comm

#endif  // WEFT_COMM_ENV_DIST_ENV_H_
