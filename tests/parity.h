// Strategy parity harness: the same tiny-GPT job run as one process and as N
// gloo ranks (forked processes on loopback) must give the same loss at every
// step and the same parameters at the end.
#ifndef WEFT_TESTS_PARITY_H_
#define WEFT_TESTS_PARITY_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/runtime/function_job.h"
#include "core/runtime/trainer.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft::testing {

struct ParityRun {
  std::vector<double> losses;  // global loss per step
  std::vector<double> grad_norms;  // global gradient norm per step (when clipping)
  std::map<std::string, std::vector<float>> params;  // full values after the last step
  // Optimizer state after the last step ("<param>:exp_avg", ...), full.
  std::map<std::string, std::vector<float>> optim;
  // Rank 0's peak bytes: per category ("params", "grads", "optimizer",
  // "activations"), and the device allocator's ("peak", while the trainer
  // is built or trains: what the trainer's peak_mem_mb reports; apart,
  // "setup_peak" and "step_peak");
  // "activations_after_forward": the activation store's bytes at the end of
  // a forward (one micro-batch).
  std::map<std::string, double> memory;
  // The same for every rank (RunMultiProcess; index = rank): pipeline
  // stages differ.
  std::vector<std::map<std::string, double>> rank_memory;
  // Per op kind per step, rank 0: bus bytes ("all_gather") and calls
  // ("all_gather_calls").
  std::map<std::string, double> comm;
  std::vector<double> comm_mb;           // the step metric comm_mb per step, rank 0
  // Rank 0's strategy and model step metrics (StepStats::extra), per step.
  std::vector<std::map<std::string, double>> step_metrics;
  // The strategies' startup notes (ParallelState::notes), rank 0.
  std::vector<std::string> notes;
  // Trainer::Evaluate after the last step (RunOptions::eval_batches or
  // eval_samples > 0).
  std::optional<double> val_loss;
};

// Parameters and optimizer state are reassembled from every rank's sharding
// export (core/parallel/sharding_export.h), so each run also checks that the
// strategies describe their shards correctly.

// How much of the job to run: checkpoint tests train part of a job (whose
// train().steps() fixes the LR schedule), save, and resume it elsewhere.
struct RunOptions {
  int64_t steps = -1;        // optimizer steps to take here; -1: until train().steps()
  bool save_at_end = false;  // SaveCheckpoint() after them (needs checkpoint_dir)
  // Trainer::Run() (periodic checkpoints, evaluation) instead of TrainStep
  // calls; losses are then not recorded.
  bool use_run = false;
  // Validation batches of the job's micro_batch, or samples when
  // eval_samples > 0, to evaluate after training (ParityRun::val_loss).
  int eval_batches = 0;
  int64_t eval_samples = 0;
  // RunMultiProcess: changes one rank's job (ranks started with other
  // flags or data); null runs the same job everywhere.
  std::function<void(int rank, GptJob* job)> per_rank;
  // Trains this model over the job's data instead of the job's GPT (the
  // job's train config still decides everything else): other model
  // families run the same matrix. Called with the data's vocabulary.
  FunctionJob::MakeModelFn make_model;
};

// One process, no strategy: the reference.
absl::StatusOr<ParityRun> RunSingleProcess(GptJob job, const RunOptions& options = {});

// `world` ranks as forked processes sharing a TCP store on loopback; the
// result is rank 0's view (losses are global, parameters gathered in full).
absl::StatusOr<ParityRun> RunMultiProcess(GptJob job, int world, const RunOptions& options = {});

// A step metric's largest value, its mean over all steps (absent counts as
// 0), and its value in the last step; NaN when no step has it.
double MaxOverSteps(const ParityRun& run, const std::string& key);
double MeanOverSteps(const ParityRun& run, const std::string& key);
double LastStep(const ParityRun& run, const std::string& key);

// The largest per-step |loss - reference loss| / |reference loss|.
double MaxLossRelDiff(const ParityRun& run, const ParityRun& reference);
// The same for the per-step gradient norms (the clipping norm).
double MaxGradNormRelDiff(const ParityRun& run, const ParityRun& reference);

// gtest expectations: per-step relative loss difference <= loss_rtol and
// max parameter and optimizer-state difference (relative to max(1, |x|))
// <= param_tol.
void ExpectParity(const ParityRun& reference, const ParityRun& run, double loss_rtol,
                  double param_tol, const std::string& label);

// gtest expectations: as many gradient norms as the reference, each
// positive there and within rtol of it (relative) at every step.
void ExpectGradNormsMatch(const ParityRun& reference, const ParityRun& run, double rtol,
                          const std::string& label);

}  // namespace weft::testing

#endif  // WEFT_TESTS_PARITY_H_
