// MPI launchers as a rank source, the precedence between launchers, and
// the refusal to run as an independent single process when a launcher
// says this process is one of several.
#include "absl/strings/match.h"
#include "comm/env/dist_env.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

TEST(MpiEnvTest, OpenMpiOnOneNodeUsesLoopbackAndAJobPort) {
  auto env = ReadDistributedEnv(MapEnv({{"OMPI_COMM_WORLD_RANK", "1"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                        {"PMIX_NAMESPACE", "prterun-host-1234@1"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, EnvSource::kMpi);
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_FALSE(env->multi_node());
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->launcher, "mpirun (Open MPI)");
  // Every rank of the job derives the same port; another job another one.
  auto other_rank = ReadDistributedEnv(MapEnv({{"OMPI_COMM_WORLD_RANK", "3"},
                                               {"OMPI_COMM_WORLD_SIZE", "4"},
                                               {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                               {"PMIX_NAMESPACE", "prterun-host-1234@1"}}));
  auto other_job = ReadDistributedEnv(MapEnv({{"OMPI_COMM_WORLD_RANK", "3"},
                                              {"OMPI_COMM_WORLD_SIZE", "4"},
                                              {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                              {"PMIX_NAMESPACE", "prterun-host-99@1"}}));
  EXPECT_EQ(env->master_port, other_rank->master_port);
  EXPECT_NE(env->master_port, other_job->master_port);
  EXPECT_GE(env->master_port, 30000);
}

TEST(MpiEnvTest, HydraPmiVariablesAndMasterAddr) {
  auto env = ReadDistributedEnv(MapEnv({{"PMI_RANK", "2"},
                                        {"PMI_SIZE", "4"},
                                        {"MPI_LOCALRANKID", "0"},
                                        {"MPI_LOCALNRANKS", "2"},
                                        {"MASTER_ADDR", "node01"},
                                        {"MASTER_PORT", "29511"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "mpirun (Hydra/PMI)");
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->node_rank, 1);
  EXPECT_TRUE(env->multi_node());
  EXPECT_EQ(env->master_addr, "node01");
  EXPECT_EQ(env->master_port, 29511);
}

TEST(MpiEnvTest, MultiNodeWithoutMasterAddrShowsTheFix) {
  auto env = ReadDistributedEnv(MapEnv({{"OMPI_COMM_WORLD_RANK", "0"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  ASSERT_FALSE(env.ok());
  EXPECT_TRUE(absl::StrContains(env.status().message(), "-x MASTER_ADDR=$(hostname)"))
      << env.status();
}

TEST(MpiEnvTest, PmixAloneNeedsASize) {
  EXPECT_FALSE(ReadDistributedEnv(MapEnv({{"PMIX_RANK", "0"}})).ok());
  auto env = ReadDistributedEnv(MapEnv({{"PMIX_RANK", "1"}, {"PMIX_SIZE", "2"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "PMIx");
  EXPECT_EQ(env->world_size, 2);
}

// Documented precedence: torchrun > Open MPI > Hydra > Slurm > PMIx.
TEST(MpiEnvTest, PrecedenceBetweenLaunchers) {
  const std::map<std::string, std::string> slurm = {
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODELIST", "n1"}};
  // mpirun inside an sbatch allocation: every rank inherits SLURM_PROCID=0.
  auto vars = slurm;
  vars.insert({{"OMPI_COMM_WORLD_RANK", "1"},
               {"OMPI_COMM_WORLD_SIZE", "2"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  auto env = ReadDistributedEnv(MapEnv(vars));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, EnvSource::kMpi);
  EXPECT_EQ(env->rank, 1);
  // torchrun inside srun.
  vars = slurm;
  vars.insert({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1234"}});
  env = ReadDistributedEnv(MapEnv(vars));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, EnvSource::kTorchrun);
  EXPECT_EQ(env->rank, 1);
  // srun with --mpi=pmix: Slurm's own variables win over PMIx's.
  vars = slurm;
  vars.insert({{"PMIX_RANK", "0"}});
  env = ReadDistributedEnv(MapEnv(vars));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, EnvSource::kSlurm);
}

TEST(MpiEnvTest, OneOfManyWithoutARankIsAnErrorNotASilentSplit) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE"}) {
    auto env = ReadDistributedEnv(MapEnv({{var, "2"}}));
    ASSERT_FALSE(env.ok()) << var;
    EXPECT_TRUE(absl::StrContains(env.status().message(), "independent single process"))
        << env.status();
  }
  // A size of 1 is a single process.
  EXPECT_TRUE(ReadDistributedEnv(MapEnv({{"WORLD_SIZE", "1"}})).ok());
}

}  // namespace
}  // namespace weft::comm
