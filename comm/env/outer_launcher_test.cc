// A second launcher's world checked against the one that started this
// process: separate jobs per task are refused, the documented nestings
// (one agent per task, ranks = tasks, a single task) still work.
#include "comm/env/outer_launcher.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using Vars = std::map<std::string, std::string>;

// A task of `srun -n 2` (Slurm 22.05's variables, trimmed).
Vars SrunTask(int procid) {
  return {{"SLURM_JOB_ID", "7"},          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NUM_TASKS", "2"},  {"SLURM_NTASKS", "2"},
          {"SLURM_PROCID", std::to_string(procid)}, {"SLURM_LOCALID", std::to_string(procid)},
          {"SLURM_NODEID", "0"},          {"SLURM_STEP_TASKS_PER_NODE", "2"},
          {"SLURM_STEP_NODELIST", "vm"}};
}

Vars With(Vars vars, const Vars& more) {
  for (const auto& [k, v] : more) vars[k] = v;
  return vars;
}

TEST(OuterLauncherTest, StaleTorchrunVariablesUnderSrunAreRefused) {
  auto env = ReadDistributedEnv(MapEnv(With(SrunTask(1), {{"RANK", "0"}, {"WORLD_SIZE", "1"}})));
  EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(env.status().message(),
                                "WORLD_SIZE=1 (torchrun variables, RANK=0) disagrees with an srun "
                                "step (SLURM_STEP_NUM_TASKS=2)"))
      << env.status();
  EXPECT_TRUE(absl::StrContains(env.status().message(), "unset RANK, WORLD_SIZE")) << env.status();
}

TEST(OuterLauncherTest, StaleTorchrunVariablesUnderMpirunAreRefused) {
  // mpirun -np 2 -x RANK=0 -x WORLD_SIZE=1
  auto env = ReadDistributedEnv(MapEnv({{"RANK", "0"},
                                        {"WORLD_SIZE", "1"},
                                        {"OMPI_COMM_WORLD_RANK", "1"},
                                        {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(env.status().message(),
                                "mpirun (Open MPI) (OMPI_COMM_WORLD_SIZE=2)"))
      << env.status();
}

TEST(OuterLauncherTest, ALauncherPerSrunTaskOnOneNodeIsRefused) {
  // The workers of `srun -n 2 train --nproc_per_node=2`: two jobs of 2.
  auto env = ReadDistributedEnv(MapEnv(With(SrunTask(0), {{"RANK", "1"},
                                                          {"WORLD_SIZE", "2"},
                                                          {"LOCAL_RANK", "1"},
                                                          {"LOCAL_WORLD_SIZE", "2"},
                                                          {"GROUP_RANK", "0"},
                                                          {"GROUP_WORLD_SIZE", "1"},
                                                          {"MASTER_ADDR", "127.0.0.1"},
                                                          {"MASTER_PORT", "29500"}})));
  EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(env.status().message(), "GROUP_WORLD_SIZE=1")) << env.status();
  EXPECT_FALSE(CheckLaunchInsideOuterLauncher(2, 1, MapEnv(SrunTask(0))).ok());
}

TEST(OuterLauncherTest, DocumentedNestingsStillWork) {
  const Vars torchrun = {{"RANK", "5"},           {"WORLD_SIZE", "8"},
                         {"LOCAL_RANK", "1"},     {"LOCAL_WORLD_SIZE", "4"},
                         {"GROUP_RANK", "1"},     {"GROUP_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}};
  // One torchrun/weft launch agent per task of srun -N 2 --ntasks-per-node=1.
  EXPECT_TRUE(ReadDistributedEnv(MapEnv(With(SrunTask(1), torchrun))).ok());
  EXPECT_TRUE(CheckLaunchInsideOuterLauncher(4, 2, MapEnv(SrunTask(1))).ok());
  // One srun task starting every worker itself.
  Vars one_task = With(SrunTask(0), {{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_NTASKS", "1"}});
  Vars local = With(torchrun, {{"GROUP_WORLD_SIZE", "1"}, {"WORLD_SIZE", "4"}, {"RANK", "1"}});
  EXPECT_TRUE(ReadDistributedEnv(MapEnv(With(one_task, local))).ok());
  EXPECT_TRUE(CheckLaunchInsideOuterLauncher(4, 1, MapEnv(one_task)).ok());
  // The tasks are the ranks: RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS.
  auto same = ReadDistributedEnv(MapEnv(With(
      SrunTask(1), {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "vm"},
                    {"MASTER_PORT", "29500"}})));
  EXPECT_TRUE(same.ok()) << same.status();
  // No outer launcher at all.
  EXPECT_TRUE(CheckLaunchInsideOuterLauncher(4, 1, MapEnv({})).ok());
}

TEST(OuterLauncherTest, MpirunWinsOverTheSrunStepOfItsDaemons) {
  // mpirun in an allocation starts one daemon per node with srun.
  auto outer = FindOuterLauncher(MapEnv(With(SrunTask(0), {{"OMPI_COMM_WORLD_SIZE", "4"}})));
  ASSERT_TRUE(outer.has_value());
  EXPECT_EQ(outer->variable, "OMPI_COMM_WORLD_SIZE=4");
  EXPECT_EQ(outer->tasks, 4);
}

}  // namespace
}  // namespace weft::comm
