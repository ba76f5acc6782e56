#include "tests/parity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
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

// Splits reassembled state into parameters and optimizer state.
void Split(std::map<std::string, std::vector<float>> full, ParityRun& run) {
  for (auto& [name, values] : full) {
    (name.find(':') == std::string::npos ? run.params : run.optim)[name] = std::move(values);
  }
}

// One rank's exported pieces, exact (floats as hex).
void WritePieces(const std::vector<HostPiece>& pieces, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  auto dims = [f](const auto& v) {
    std::fprintf(f, " %zu", v.size());
    for (int64_t d : v) std::fprintf(f, " %lld", static_cast<long long>(d));
  };
  for (const HostPiece& p : pieces) {
    std::fprintf(f, "%s %d %lld %lld", p.info.name.c_str(), p.info.replica,
                 static_cast<long long>(p.info.begin), static_cast<long long>(p.info.end));
    dims(p.info.global_shape);
    dims(p.info.box_offsets);
    dims(p.info.box_shape);
    for (float v : p.values) std::fprintf(f, " %a", v);
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

absl::Status ReadPieces(const std::string& path, std::vector<HostPiece>& out) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("a rank wrote no sharding export to " + path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    HostPiece p;
    long long b = 0, e = 0;
    ss >> p.info.name >> p.info.replica >> b >> e;
    p.info.begin = b;
    p.info.end = e;
    auto dims = [&ss](auto& v) {
      size_t n = 0;
      ss >> n;
      v.resize(n);
      for (size_t i = 0; i < n; ++i) {
        long long d = 0;
        ss >> d;
        v[i] = d;
      }
    };
    dims(p.info.global_shape);
    dims(p.info.box_offsets);
    dims(p.info.box_shape);
    std::string num;
    while (ss >> num) p.values.push_back(std::strtof(num.c_str(), nullptr));
    out.push_back(std::move(p));
  }
  return absl::OkStatus();
}

absl::StatusOr<ParityRun> Train(const GptJob& job, std::optional<JobTopology> topology,
                                const std::string& pieces_path, const RunOptions& options) {
  // The device allocator is per process and may hold earlier runs' memory:
  // count from what is live now.
  WEFT_ASSIGN_OR_RETURN(Device device, ParseDevice(job.train().device()));
  WEFT_ASSIGN_OR_RETURN(Allocator * device_alloc, DefaultAllocator(device));
  const double base = static_cast<double>(device_alloc->Stats().allocated_bytes);
  device_alloc->ResetPeak();
  WEFT_ASSIGN_OR_RETURN(
      std::unique_ptr<Trainer> trainer,
      MakeGptTrainer(job, topology, [&options](Trainer::Options& o) {
        if (options.make_model) o.job = WithModel(o.job, options.make_model);
      }));
  const double setup_peak = static_cast<double>(device_alloc->Stats().peak_allocated_bytes) - base;
  device_alloc->ResetPeak();
  WEFT_ASSIGN_OR_RETURN(auto groups, MeshGroups(trainer->parallel()));
  for (auto& g : groups) g->ResetStats();
  // The tensor-parallel group's traffic is counted apart ("tp_all_reduce").
  std::shared_ptr<comm::ProcessGroup> tp_group;
  ParallelState& state = trainer->parallel();
  if (state.mesh != nullptr && state.mesh->AxisSize("tp").value_or(1) > 1) {
    WEFT_ASSIGN_OR_RETURN(tp_group, state.mesh->Group("tp"));
    tp_group->ResetStats();
  }
  // Activations held at the end of a forward (one micro-batch's worth).
  auto activation_peak = std::make_shared<double>(0);
  trainer->model().AddHook(Module::HookPoint::kPostForward,
                           [activation_peak](Module&, RunContext& ctx) -> absl::Status {
                             *activation_peak = std::max(
                                 *activation_peak, static_cast<double>(ctx.store().TotalBytes()));
                             return absl::OkStatus();
                           });
  ParityRun run;
  run.notes = state.notes;
  const int64_t steps = options.steps >= 0 ? options.steps : job.train().steps() - trainer->step();
  if (options.use_run) WEFT_RETURN_IF_ERROR(trainer->Run());
  for (int64_t i = 0; i < steps && !options.use_run; ++i) {
    WEFT_ASSIGN_OR_RETURN(StepStats s, trainer->TrainStep());
    run.losses.push_back(s.loss);
    run.comm_mb.push_back(s.comm_mb);
    run.step_metrics.emplace_back(s.extra.begin(), s.extra.end());
    run.grad_norms.push_back(s.grad_norm);
  }
  const int64_t eval_samples = options.eval_samples > 0
                                   ? options.eval_samples
                                   : options.eval_batches * job.train().micro_batch();
  if (eval_samples > 0) {
    WEFT_ASSIGN_OR_RETURN(run.val_loss, trainer->Evaluate(eval_samples));
  }
  if (options.save_at_end) {
    WEFT_RETURN_IF_ERROR(trainer->SaveCheckpoint());
    WEFT_RETURN_IF_ERROR(trainer->FinishCheckpoints());
  }
  for (auto& g : groups) {
    const comm::CommStats stats = g->stats();
    for (int k = 0; k < comm::kNumOpKinds; ++k) {
      if (stats.by_op[k].calls == 0) continue;
      const std::string kind(comm::OpKindName(static_cast<comm::OpKind>(k)));
      const double per_step = 1.0 / static_cast<double>(std::max<int64_t>(1, steps));
      run.comm[kind] += stats.by_op[k].bus_bytes * per_step;
      run.comm[kind + "_calls"] += stats.by_op[k].calls * per_step;
    }
  }
  const double step_peak = static_cast<double>(device_alloc->Stats().peak_allocated_bytes) - base;
  run.memory["peak"] = std::max(setup_peak, step_peak);
  run.memory["setup_peak"] = setup_peak;
  run.memory["step_peak"] = step_peak;
  if (tp_group != nullptr) {
    const comm::CommStats stats = tp_group->stats();
    for (int k = 0; k < comm::kNumOpKinds; ++k) {
      if (stats.by_op[k].calls == 0) continue;
      const std::string kind(comm::OpKindName(static_cast<comm::OpKind>(k)));
      const double per_step = 1.0 / static_cast<double>(std::max<int64_t>(1, steps));
      run.comm["tp_" + kind] += stats.by_op[k].bus_bytes * per_step;
      run.comm["tp_" + kind + "_payload"] += stats.by_op[k].payload_bytes * per_step;
      run.comm["tp_" + kind + "_calls"] += stats.by_op[k].calls * per_step;
    }
  }
  run.memory["activations_after_forward"] = *activation_peak;
  const Trainer::MemoryStats mem = trainer->ModelMemory();
  run.memory["activations"] = static_cast<double>(mem.activations.peak_allocated_bytes);
  run.memory["params"] = static_cast<double>(mem.params.peak_allocated_bytes);
  run.memory["grads"] = static_cast<double>(mem.grads.peak_allocated_bytes);
  run.memory["optimizer"] = static_cast<double>(mem.optimizer.peak_allocated_bytes);
  WEFT_ASSIGN_OR_RETURN(std::vector<StatePiece> pieces, trainer->ExportState());
  WEFT_ASSIGN_OR_RETURN(std::vector<HostPiece> host, ToHost(pieces));
  if (pieces_path.empty()) {
    WEFT_ASSIGN_OR_RETURN(auto full, Reassemble(host));
    Split(std::move(full), run);
  } else {
    WritePieces(host, pieces_path);  // the parent reassembles all ranks'
  }
  return run;
}

// Exact text form: floats as hex so nothing is lost between processes.
void Write(const ParityRun& r, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  for (double l : r.losses) std::fprintf(f, "loss %a\n", l);
  for (double g : r.grad_norms) std::fprintf(f, "grad_norm %a\n", g);
  for (const auto& [k, v] : r.memory) std::fprintf(f, "mem %s %a\n", k.c_str(), v);
  for (const auto& [k, v] : r.comm) std::fprintf(f, "comm %s %a\n", k.c_str(), v);
  for (double v : r.comm_mb) std::fprintf(f, "comm_mb %a\n", v);
  for (const std::string& n : r.notes) std::fprintf(f, "note %s\n", n.c_str());
  if (r.val_loss) std::fprintf(f, "val_loss %a\n", *r.val_loss);
  for (size_t i = 0; i < r.step_metrics.size(); ++i) {
    std::fprintf(f, "step %zu\n", i);
    for (const auto& [k, v] : r.step_metrics[i]) std::fprintf(f, "metric %s %a\n", k.c_str(), v);
  }
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
    } else if (kind == "comm_mb") {
      ss >> num;
      r.comm_mb.push_back(std::strtod(num.c_str(), nullptr));
    } else if (kind == "val_loss") {
      ss >> num;
      r.val_loss = std::strtod(num.c_str(), nullptr);
    } else if (kind == "grad_norm") {
      ss >> num;
      r.grad_norms.push_back(std::strtod(num.c_str(), nullptr));
    } else if (kind == "note") {
      std::getline(ss >> std::ws, name);
      r.notes.push_back(name);
    } else if (kind == "step") {
      r.step_metrics.emplace_back();
    } else if (kind == "metric" && !r.step_metrics.empty()) {
      ss >> name >> num;
      r.step_metrics.back()[name] = std::strtod(num.c_str(), nullptr);
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

double MaxOverSteps(const ParityRun& run, const std::string& key) {
  double out = std::nan("");
  for (const auto& m : run.step_metrics) {
    auto it = m.find(key);
    if (it != m.end() && !(it->second <= out)) out = it->second;
  }
  return out;
}

double MeanOverSteps(const ParityRun& run, const std::string& key) {
  double sum = 0;
  bool seen = false;
  for (const auto& m : run.step_metrics) {
    auto it = m.find(key);
    if (it == m.end()) continue;
    sum += it->second;
    seen = true;
  }
  return seen ? sum / static_cast<double>(run.step_metrics.size()) : std::nan("");
}

double LastStep(const ParityRun& run, const std::string& key) {
  if (run.step_metrics.empty()) return std::nan("");
  auto it = run.step_metrics.back().find(key);
  return it == run.step_metrics.back().end() ? std::nan("") : it->second;
}

double MaxLossRelDiff(const ParityRun& run, const ParityRun& reference) {
  double worst = 0;
  for (size_t i = 0; i < run.losses.size() && i < reference.losses.size(); ++i) {
    worst = std::max(worst, std::fabs(run.losses[i] - reference.losses[i]) /
                                std::fabs(reference.losses[i]));
  }
  return worst;
}

double MaxGradNormRelDiff(const ParityRun& run, const ParityRun& reference) {
  double worst = 0;
  for (size_t i = 0; i < run.grad_norms.size() && i < reference.grad_norms.size(); ++i) {
    worst = std::max(worst, std::fabs(run.grad_norms[i] - reference.grad_norms[i]) /
                                reference.grad_norms[i]);
  }
  return worst;
}

void ExpectGradNormsMatch(const ParityRun& reference, const ParityRun& run, double rtol,
                          const std::string& label) {
  ASSERT_EQ(run.grad_norms.size(), reference.grad_norms.size()) << label;
  for (size_t i = 0; i < run.grad_norms.size(); ++i) {
    EXPECT_GT(reference.grad_norms[i], 0) << label;
    EXPECT_NEAR(run.grad_norms[i], reference.grad_norms[i], rtol * reference.grad_norms[i])
        << label << ": gradient norm at step " << i + 1;
  }
}

absl::StatusOr<ParityRun> RunSingleProcess(GptJob job, const RunOptions& options) {
  return Train(job, std::nullopt, "", options);
}

namespace {
std::string PiecesPath(const std::string& out, int rank) {
  return absl::StrCat(out, ".rank", rank, ".pieces");
}
std::string MemoryPath(const std::string& out, int rank) {
  return absl::StrCat(out, ".rank", rank, ".memory");
}
}  // namespace

absl::StatusOr<ParityRun> RunMultiProcess(GptJob job, int world, const RunOptions& options) {
  static int run_id = 0;
  const std::string out =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/parity_", getpid(), "_", run_id++, ".txt");
  std::remove(out.c_str());
  const auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kProcesses, world,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        const JobTopology topo = RankTopology(rc);
        GptJob mine = job;
        if (options.per_rank) options.per_rank(rc.rank, &mine);
        WEFT_ASSIGN_OR_RETURN(ParityRun r, Train(mine, topo, PiecesPath(out, rc.rank), options));
        if (rc.rank == 0) Write(r, out);
        ParityRun memory_only;
        memory_only.memory = r.memory;
        Write(memory_only, MemoryPath(out, rc.rank));
        return absl::OkStatus();
      },
      {.deadline = absl::Seconds(240), .timeout = absl::Seconds(60)});
  WEFT_RETURN_IF_ERROR(comm::testing::AllRanksOk(results));
  WEFT_ASSIGN_OR_RETURN(ParityRun run, Read(out));
  for (int r = 0; r < world; ++r) {
    WEFT_ASSIGN_OR_RETURN(ParityRun m, Read(MemoryPath(out, r)));
    run.rank_memory.push_back(std::move(m.memory));
  }
  std::vector<HostPiece> pieces;
  for (int r = 0; r < world; ++r) WEFT_RETURN_IF_ERROR(ReadPieces(PiecesPath(out, r), pieces));
  // Replicas (ddp ranks, HSDP replicas) must hold the same values.
  WEFT_ASSIGN_OR_RETURN(auto full, Reassemble(pieces, /*replica_tol=*/0.0));
  Split(std::move(full), run);
  return run;
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
  ASSERT_EQ(reference.optim.size(), run.optim.size()) << label;
  EXPECT_LE(MaxRelativeDifference(run.optim, reference.optim), param_tol) << label << " (optimizer state)";
  // Training did something: the loss fell over the run.
  EXPECT_LT(run.losses.back(), run.losses.front()) << label;
}

}  // namespace weft::testing
