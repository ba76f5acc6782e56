#include "comm/env/slurm_step.h"

namespace weft::comm {

bool InSlurmBatchScript(const EnvLookup& env) {
  if (!env("SLURM_JOB_ID").has_value() && !env("SLURM_JOBID").has_value()) return false;
  for (const char* step_var : {"SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS"}) {
    if (env(step_var).has_value()) return false;
  }
  return true;
}

int SlurmStorePort(int64_t job_id, int64_t step_id) {
  const int64_t k = (job_id + 7919 * step_id) % 20000;
  return 20000 + static_cast<int>((k + 20000) % 20000);
}

}  // namespace weft::comm
