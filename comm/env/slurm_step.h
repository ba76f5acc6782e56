// Whether a Slurm process is a task of an srun step or the batch script
// itself. Both have SLURM_PROCID and SLURM_JOB_ID; only srun adds the
// step's variables. Checked with Slurm 22.05: an sbatch script sees
// SLURM_PROCID=0, SLURM_NTASKS=<--ntasks> (unset without --ntasks) and no
// SLURM_STEP_ID / SLURM_STEPID / SLURM_STEP_NUM_TASKS; a task of
// `srun -n 2` sees all three, with SLURM_NTASKS the step's task count.
#ifndef WEFT_COMM_ENV_SLURM_STEP_H_
#define WEFT_COMM_ENV_SLURM_STEP_H_

#include <cstdint>

#include "comm/env/dist_env.h"

namespace weft::comm {

// True in an sbatch (or salloc) script outside any srun step.
bool InSlurmBatchScript(const EnvLookup& env);

// The store port every task of one step derives alike:
// 20000 + (job_id + 7919 * step_id) % 20000. Jobs sharing a node get
// different ports, and so do steps of one job running at once (7919 is
// prime to 20000); step 0 keeps 20000 + job_id % 20000.
int SlurmStorePort(int64_t job_id, int64_t step_id);

}  // namespace weft::comm

#endif  // WEFT_COMM_ENV_SLURM_STEP_H_
