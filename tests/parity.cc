#include "tests/parity.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft::testing {
namespace {

// Every group of the data-parallel mesh; all ranks call this in the same
// order because creating the flattened group is collective.
absl::StatusOr<std::vector<std::shared_ptr<comm::ProcessGroup>>> MeshGroups(ParallelState& s) {
  std::vector<std::shared_ptr<comm::ProcessGroup>> groups;
  if (s.mesh == nullptr) return groups;
  for (const char* axis : {"dp_replicate", "dp_shard"}) {
    WEFT_ASSIGN_OR_RETURN(auto g, s.mesh->Group(axis));
    groups.push_back(g);
  }
  WEFT_ASSIGN_OR_RETURN(auto flat, s.mesh->FlatGroup({"dp_replicate", "dp_shard"}));
  groups.push_back(flat);
  return groups;
}

absl::StatusOr<ParityRun> Train(const GptJob& job, std::optional<JobTopology> topology) {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, MakeGptTrainer(job, topology));
  WEFT_ASSIGN_OR_RETURN(auto groups, MeshGroups(trainer->parallel()));
  for (auto& g : groups) g->ResetStats();
  ParityRun run;
  for (int64_t i = 0; i < job.train().steps(); ++i) {
    WEFT_ASSIGN_OR_RETURN(StepStats s, trainer->TrainStep());
    run.losses.push_back(s.loss);
  }
  for (auto& g : groups) {
    const comm::CommStats stats = g->stats();
    for (int k = 0; k < comm::kNumOpKinds; ++k) {
      if (stats.by_op[k].calls == 0) continue;
      run.comm[std::string(comm::OpKindName(static_cast<comm::OpKind>(k)))] +=
          stats.by_op[k].bus_bytes / static_cast<double>(job.train().steps());
    }
  }
  const Trainer::MemoryStats mem = trainer->ModelMemory();
  run.memory["params"] = static_cast<double>(mem.params.peak_allocated_bytes);
  run.memory["grads"] = static_cast<double>(mem.grads.peak_allocated_bytes);
  run.memory["optimizer"] = static_cast<double>(mem.optimizer.peak_allocated_bytes);
  WEFT_ASSIGN_OR_RETURN(run.params, ParameterSnapshot(*trainer));
  return run;
}

// Exact text form: floats as hex so nothing is lost between processes.
void Write(const ParityRun& r, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  for (double l : r.losses) std::fprintf(f, "loss %a\n", l);
  for (const auto& [k, v] : r.memory) std::fprintf(f, "mem %s %a\n", k.c_str(), v);
  for (const auto& [k, v] : r.comm) std::fprintf(f, "comm %s %a\n", k.c_str(), v);
  for (const auto& [name, values] : r.params) {
    std::fprintf(f, "param %s %zu", name.c_str(), values.size());
    for (float v : values) std::fprintf(f, " %a", v);
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

absl::StatusOr<ParityRun> Read(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("rank 0 wrote no results to " + path);
  ParityRun r;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string kind, name, num;
    ss >> kind;
    if (kind == "loss") {
      ss >> num;
      r.losses.push_back(std::strtod(num.c_str(), nullptr));
    } else if (kind == "mem" || kind == "comm") {
      ss >> name >> num;
      (kind == "mem" ? r.memory : r.comm)[name] = std::strtod(num.c_str(), nullptr);
    } else if (kind == "param") {
      size_t n = 0;
      ss >> name >> n;
      std::vector<float>& v = r.params[name];
      for (size_t i = 0; i < n && ss >> num; ++i) v.push_back(std::strtof(num.c_str(), nullptr));
    }
  }
  return r;
}

}  // namespace

absl::StatusOr<ParityRun> RunSingleProcess(GptJob job) { return Train(job, std::nullopt); }

absl::StatusOr<ParityRun> RunMultiProcess(GptJob job, int world) {
  static int run_id = 0;
  const std::string out =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/parity_", getpid(), "_", run_id++, ".txt");
  std::remove(out.c_str());
  const auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kProcesses, world,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        JobTopology topo;
        topo.rank = rc.rank;
        topo.world_size = rc.world_size;
        topo.local_rank = rc.rank;
        topo.store = rc.store;
        topo.description = absl::StrCat("test rank ", rc.rank, " of ", rc.world_size);
        WEFT_ASSIGN_OR_RETURN(ParityRun r, Train(job, topo));
        if (rc.rank == 0) Write(r, out);
        return absl::OkStatus();
      },
      {.deadline = absl::Seconds(240), .timeout = absl::Seconds(60)});
  WEFT_RETURN_IF_ERROR(comm::testing::AllRanksOk(results));
  return Read(out);
}

void ExpectParity(const ParityRun& reference, const ParityRun& run, double loss_rtol,
                  double param_tol, const std::string& label) {
  ASSERT_EQ(reference.losses.size(), run.losses.size()) << label;
  for (size_t i = 0; i < run.losses.size(); ++i) {
    EXPECT_NEAR(run.losses[i], reference.losses[i], loss_rtol * std::fabs(reference.losses[i]))
        << label << ": step " << i + 1;
  }
  ASSERT_EQ(reference.params.size(), run.params.size()) << label;
  EXPECT_LE(MaxRelativeDifference(run.params, reference.params), param_tol) << label;
  // Training did something: the loss fell over the run.
  EXPECT_LT(run.losses.back(), run.losses.front()) << label;
}

}  // namespace weft::testing
