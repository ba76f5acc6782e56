#include "comm/env/slurm_step.h"

namespace weft::comm {

bool InSlurmBatchScript(const EnvLookup& env) {
  if (!env("SLURM_JOB_ID").has_value() && !env("SLURM_JOBID").has_value()) return false;
  for (const char* step_var : {"SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS"}) {
    if (env(step_var).has_value()) return false;
  }
  return true;
}

}  // namespace weft::comm
