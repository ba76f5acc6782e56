#include "comm/env/dist_env.h"

#include "absl/strings/match.h"
#include "comm/env/slurm_step.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

TEST(DistEnvTest, NothingSetIsASingleProcess) {
  auto env = ReadDistributedEnv(MapEnv({}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->source, EnvSource::kSingleProcess);
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_FALSE(env->multi_node());
}

TEST(DistEnvTest, ReadsTorchrunVariables) {
  auto env = ReadDistributedEnv(MapEnv({{"RANK", "5"},
                                        {"WORLD_SIZE", "8"},
                                        {"LOCAL_RANK", "1"},
                                        {"LOCAL_WORLD_SIZE", "4"},
                                        {"GROUP_RANK", "1"},
                                        {"MASTER_ADDR", "node01"},
                                        {"MASTER_PORT", "29600"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, EnvSource::kTorchrun);
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->node_rank, 1);
  EXPECT_EQ(env->master_addr, "node01");
  EXPECT_EQ(env->master_port, 29600);
  EXPECT_TRUE(env->multi_node());
  EXPECT_FALSE(env->launcher_hosts_store);
  EXPECT_EQ(env->ToString(),
            "rank 5 of 8 (local 1 of 4, node 1) from torchrun, store node01:29600");
}

TEST(DistEnvTest, LauncherAndTorchElasticStores) {
  std::map<std::string, std::string> vars = {{"RANK", "0"},         {"WORLD_SIZE", "2"},
                                             {"MASTER_ADDR", "h"},  {"MASTER_PORT", "30000"},
                                             {"WEFT_LAUNCHER_STORE", "1"}};
  auto ours = ReadDistributedEnv(MapEnv(vars));
  ASSERT_TRUE(ours.ok());
  EXPECT_TRUE(ours->launcher_hosts_store);
  EXPECT_EQ(ours->master_port, 30000);
  vars.erase("WEFT_LAUNCHER_STORE");
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  auto torch = ReadDistributedEnv(MapEnv(vars));
  ASSERT_TRUE(torch.ok());
  EXPECT_FALSE(torch->launcher_hosts_store);
  EXPECT_EQ(torch->master_port, 30001);  // next to torchrun's own store
}

TEST(DistEnvTest, TorchrunErrorsNameTheVariable) {
  auto out_of_range = ReadDistributedEnv(
      MapEnv({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}));
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(out_of_range.status().message(), "RANK=4 with WORLD_SIZE=4"))
      << out_of_range.status();
  auto not_int = ReadDistributedEnv(MapEnv({{"RANK", "x"}, {"WORLD_SIZE", "4"}}));
  EXPECT_TRUE(absl::StrContains(not_int.status().message(), "RANK='x'")) << not_int.status();
  auto no_master = ReadDistributedEnv(MapEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  EXPECT_TRUE(absl::StrContains(no_master.status().message(), "MASTER_ADDR")) << no_master.status();
  auto no_world = ReadDistributedEnv(MapEnv({{"RANK", "0"}}));
  EXPECT_TRUE(absl::StrContains(no_world.status().message(), "WORLD_SIZE")) << no_world.status();
  auto bad_port = ReadDistributedEnv(
      MapEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}));
  EXPECT_FALSE(bad_port.ok());
  // A single torchrun rank needs no master.
  EXPECT_TRUE(ReadDistributedEnv(MapEnv({{"RANK", "0"}, {"WORLD_SIZE", "1"}})).ok());
}

TEST(DistEnvTest, ReadsSlurmWithTheFirstNodeAsMaster) {
  auto env = ReadDistributedEnv(MapEnv({{"SLURM_PROCID", "6"},
                                        {"SLURM_NTASKS", "8"},
                                        {"SLURM_LOCALID", "2"},
                                        {"SLURM_NODEID", "1"},
                                        {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                                        {"SLURM_STEP_NODELIST", "gpu[07-08]"},
                                        {"SLURM_JOB_ID", "123456"},
                                        {"SLURM_STEP_ID", "0"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, EnvSource::kSlurm);
  EXPECT_EQ(env->rank, 6);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->node_rank, 1);
  EXPECT_EQ(env->master_addr, "gpu07");
  EXPECT_EQ(env->master_port, 20000 + 123456 % 20000);
}

TEST(DistEnvTest, ConcurrentSrunStepsOfOneJobGetTheirOwnPorts) {
  std::map<std::string, std::string> vars = {{"SLURM_PROCID", "0"},  {"SLURM_NTASKS", "2"},
                                             {"SLURM_NODELIST", "vm"}, {"SLURM_JOB_ID", "7"},
                                             {"SLURM_STEP_ID", "0"}};
  auto step0 = ReadDistributedEnv(MapEnv(vars));
  vars["SLURM_STEP_ID"] = "1";
  auto step1 = ReadDistributedEnv(MapEnv(vars));
  ASSERT_TRUE(step0.ok() && step1.ok());
  EXPECT_EQ(step0->master_port, 20007);
  EXPECT_NE(step0->master_port, step1->master_port);
  // Any two of a job's first steps differ.
  for (int a = 0; a < 64; ++a) {
    for (int b = a + 1; b < 64; ++b) EXPECT_NE(SlurmStorePort(7, a), SlurmStorePort(7, b));
  }
  EXPECT_GE(SlurmStorePort(123456789, 99), 20000);
  EXPECT_LT(SlurmStorePort(123456789, 99), 40000);
}

TEST(DistEnvTest, SlurmUnevenNodesAndOverrides) {
  auto env = ReadDistributedEnv(MapEnv({{"SLURM_PROCID", "4"},
                                        {"SLURM_NTASKS", "5"},
                                        {"SLURM_LOCALID", "0"},
                                        {"SLURM_NODEID", "2"},
                                        {"SLURM_TASKS_PER_NODE", "2(x2),1"},
                                        {"SLURM_NODELIST", "n[1-3]"},
                                        {"MASTER_ADDR", "10.0.0.9"},
                                        {"MASTER_PORT", "4242"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_world_size, 1);
  EXPECT_EQ(env->master_addr, "10.0.0.9");
  EXPECT_EQ(env->master_port, 4242);
  auto bad = ReadDistributedEnv(MapEnv({{"SLURM_PROCID", "0"},
                                        {"SLURM_NTASKS", "2"},
                                        {"SLURM_NODELIST", "n[1-"}}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

// What Slurm 22.05 sets in an sbatch --ntasks=2 script, outside srun.
std::map<std::string, std::string> SlurmBatchScriptVars() {
  return {{"SLURM_JOB_ID", "7"},   {"SLURM_PROCID", "0"},      {"SLURM_NTASKS", "2"},
          {"SLURM_LOCALID", "0"},  {"SLURM_NODEID", "0"},      {"SLURM_TASKS_PER_NODE", "2"},
          {"SLURM_NODELIST", "vm"}, {"SLURM_JOB_NODELIST", "vm"}};
}

TEST(DistEnvTest, SlurmBatchScriptWithSeveralTasksAsksForSrun) {
  auto batch = ReadDistributedEnv(MapEnv(SlurmBatchScriptVars()));
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(batch.status().message(), "not started by srun"))
      << batch.status();
  EXPECT_TRUE(absl::StrContains(batch.status().message(), "put srun in front")) << batch.status();
  // One task in the script is one process: fine.
  std::map<std::string, std::string> one = SlurmBatchScriptVars();
  one["SLURM_NTASKS"] = "1";
  one["SLURM_TASKS_PER_NODE"] = "1";
  auto single = ReadDistributedEnv(MapEnv(one));
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->world_size, 1);
  // The same variables inside an srun step are a rank of it.
  std::map<std::string, std::string> step = SlurmBatchScriptVars();
  step["SLURM_STEP_ID"] = "0";
  step["SLURM_STEPID"] = "0";
  step["SLURM_STEP_NUM_TASKS"] = "2";
  auto rank = ReadDistributedEnv(MapEnv(step));
  ASSERT_TRUE(rank.ok()) << rank.status();
  EXPECT_EQ(rank->world_size, 2);
}

TEST(DistEnvTest, ARankVariableAloneIsAnErrorLikeRankAlone) {
  auto local = ReadDistributedEnv(MapEnv({{"LOCAL_RANK", "1"}}));
  EXPECT_EQ(local.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(local.status().message(), "LOCAL_RANK=1 is set but RANK is not"))
      << local.status();
  auto procid = ReadDistributedEnv(MapEnv({{"SLURM_PROCID", "0"}}));
  EXPECT_EQ(procid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(procid.status().message(), "SLURM_NTASKS")) << procid.status();
  // What an sbatch script without --ntasks sees (Slurm 22.05): one process.
  auto batch = ReadDistributedEnv(MapEnv({{"SLURM_JOB_ID", "2"}, {"SLURM_PROCID", "0"}}));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->world_size, 1);
}

TEST(DistEnvTest, WorkersOfTheWeftLauncherSaySo) {
  std::map<std::string, std::string> vars = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}};
  EXPECT_EQ(ReadDistributedEnv(MapEnv(vars))->launcher, "torchrun");
  vars["WEFT_LAUNCHED"] = "1";
  EXPECT_EQ(ReadDistributedEnv(MapEnv(vars))->launcher, "weft launch");
}

TEST(DistEnvTest, TorchrunVariablesWinOverSlurm) {
  // torchrun started inside an srun step: its variables describe the ranks.
  auto env = ReadDistributedEnv(MapEnv({{"SLURM_PROCID", "0"},
                                        {"SLURM_NTASKS", "1"},
                                        {"RANK", "3"},
                                        {"WORLD_SIZE", "4"},
                                        {"MASTER_ADDR", "h"},
                                        {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->source, EnvSource::kTorchrun);
  EXPECT_EQ(env->rank, 3);
}

}  // namespace
}  // namespace weft::comm
