// The trainer's side of checkpoints: what a save records besides the
// sharded state (step, loader positions, random state, config, mesh), and
// how a resume puts all of it back. checkpoint/ does the files.
#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/trainer.h"

namespace weft {
namespace {

// Puts a loader where the saved run's loader stood, rescaled when this run
// splits the global batch differently (another dp size or micro-batch).
absl::Status RestoreLoader(data::DataLoader* loader, const std::string& text,
                           const std::string& which) {
  if (loader == nullptr || text.empty()) {
    if ((loader == nullptr) != text.empty()) {
      return FailedPrecondition(absl::StrCat("the checkpoint ", text.empty() ? "has no" : "has a",
                                             " ", which, " loader position and this run ",
                                             loader == nullptr ? "has no" : "has a", " ", which,
                                             " split"),
                                "the same data splits as the saved run",
                                "keep --val_fraction as it was");
    }
    return absl::OkStatus();
  }
  WEFT_ASSIGN_OR_RETURN(data::LoaderState saved, data::LoaderState::Parse(text));
  const data::LoaderState now = loader->State();
  if (saved.batch_size != now.batch_size || saved.world_size != now.world_size) {
    WEFT_ASSIGN_OR_RETURN(saved, saved.Rescaled(now.batch_size, now.world_size));
  }
  return Annotate(loader->Restore(saved), absl::StrCat("restoring the ", which, " loader"));
}

}  // namespace

absl::Status Trainer::InitCheckpointing() {
  const TrainConfig& c = cfg();
  if (c.checkpoint_every() < 0 || c.keep_last() < 0) {
    return InvalidArgument(absl::StrCat("--checkpoint_every=", c.checkpoint_every(),
                                        " --keep_last=", c.keep_last()),
                           "both >= 0");
  }
  if (c.checkpoint_dir().empty()) {
    if (c.checkpoint_every() > 0 || c.checkpoint_async() || c.keep_last() > 0) {
      return InvalidArgument("checkpoint flags without --checkpoint_dir",
                             "--checkpoint_dir=DIR with --checkpoint_every/_async/--keep_last");
    }
  } else {
    if (topology_.multi_node && c.checkpoint_dir()[0] != '/') {
      return InvalidArgument(absl::StrCat("--checkpoint_dir=", c.checkpoint_dir(),
                                          " is relative in a multi-node job"),
                             "an absolute path on a filesystem every node shares");
    }
    if (parallel_->world_rank == 0) {
      // Before anything is removed: the leftovers may be another job's save.
      WEFT_ASSIGN_OR_RETURN(checkpoint_lock_, ckpt::DirLock::Acquire(c.checkpoint_dir()));
      if (!checkpoint_lock_->note().empty()) logger_->Print(checkpoint_lock_->note());
      WEFT_RETURN_IF_ERROR(ckpt::RemoveLeftovers(c.checkpoint_dir()));
    }
    // No rank may start a step_<N>.tmp/ before rank 0 has removed the old
    // ones (a job that saves before any collective raced it and lost files).
    if (parallel_->world_size > 1 && topology_.store != nullptr) {
      const std::string key = "weft_ckpt/leftovers_removed";
      if (parallel_->world_rank == 0) {
        WEFT_RETURN_IF_ERROR(topology_.store->Set(key, "1"));
      } else {
        WEFT_RETURN_IF_ERROR(Annotate(
            topology_.store->Get(key, absl::Seconds(c.parallel().timeout_s())).status(),
            "waiting for rank 0 to clean the checkpoint directory"));
      }
    }
    WEFT_ASSIGN_OR_RETURN(
        checkpointer_,
        ckpt::Checkpointer::Create({.dir = c.checkpoint_dir(),
                                    .keep_last = c.keep_last(),
                                    .async = c.checkpoint_async(),
                                    .rank = parallel_->world_rank,
                                    .world_size = parallel_->world_size,
                                    .store = topology_.store,
                                    .timeout = absl::Seconds(c.parallel().timeout_s()),
                                    .fault_point = options_.checkpoint_fault_point}));
  }
  if (resume_from_) WEFT_RETURN_IF_ERROR(ResumeFrom(*resume_from_));
  if (checkpointer_ != nullptr) WEFT_RETURN_IF_ERROR(RefuseNewerCheckpoints());
  return absl::OkStatus();
}

// Checkpoints past this run's start belong to another run (or to this one
// before a rewind): saving beside them fails at the first step they share,
// after the training, and --resume=latest would pick one of them up.
absl::Status Trainer::RefuseNewerCheckpoints() const {
  const std::string& root = cfg().checkpoint_dir();
  WEFT_ASSIGN_OR_RETURN(std::vector<ckpt::CheckpointDir> saved, ckpt::ListCheckpoints(root));
  std::vector<std::string> newer;
  for (const ckpt::CheckpointDir& d : saved) {
    if (d.step > step_) newer.push_back(ckpt::StepDirName(d.step));
  }
  if (newer.empty()) return absl::OkStatus();
  const std::string start = step_ == 0 ? "a new run (step 0)" : absl::StrCat("step ", step_);
  return FailedPrecondition(
      absl::StrCat("--checkpoint_dir=", root, " holds ", absl::StrJoin(newer, ", "),
                   ", past where this run starts: ", start),
      "a checkpoint directory with no step after the run's start",
      step_ == 0 ? "continue that run with --resume=latest, or use another --checkpoint_dir"
                 : absl::StrCat("to rewind, move ", newer.size() == 1 ? "it" : "them",
                                " out of the directory first (or use another --checkpoint_dir)"));
}

absl::Status Trainer::SaveCheckpoint() {
  if (checkpointer_ == nullptr) {
    return FailedPrecondition("a checkpoint save without --checkpoint_dir", "--checkpoint_dir=DIR");
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<StatePiece> pieces, ExportState());
  ckpt::SaveRequest r;
  r.step = step_;
  r.pieces = &pieces;
  r.stream = &compute_stream();
  r.state.set_rank(parallel_->world_rank);
  r.state.set_dp_rank(parallel_->dp_rank);
  if (parallel_->mesh != nullptr) {
    for (int x : parallel_->mesh->layout().Coordinates(parallel_->mesh->rank())) {
      r.state.add_mesh_coords(x);
    }
    for (const comm::MeshAxis& a : parallel_->mesh->layout().axes()) {
      ckpt::MeshAxis* m = &r.mesh.emplace_back();
      m->set_name(a.name);
      m->set_size(a.size);
    }
  }
  r.state.set_seed(static_cast<uint64_t>(cfg().seed()));
  r.state.set_step(step_);
  r.state.set_train_loader(loaders_.train->State().Serialize());
  r.state.set_eval_samples(EvalSamples());
  if (loaders_.val != nullptr) r.state.set_val_loader(loaders_.val->State().Serialize());
  r.strategies = absl::StrJoin(parallel_->strategy_names, ",");
  r.job_config = JobText();
  r.model_summary = model_->Summary();
  r.optimizer = optimizer_->config().name;
  r.tokenizer = loaders_.tokenizer;
  r.lr_schedule = LrScheduleText();
  WEFT_RETURN_IF_ERROR(Annotate(checkpointer_->Save(r), absl::StrCat("checkpoint at step ", step_)));
  LogCheckpoint(/*after_save=*/true);
  return absl::OkStatus();
}

absl::Status Trainer::FinishCheckpoints() {
  if (checkpointer_ == nullptr) return absl::OkStatus();
  WEFT_RETURN_IF_ERROR(checkpointer_->Wait());
  LogCheckpoint(/*after_save=*/false);
  return absl::OkStatus();
}

absl::Status Trainer::PublishLoadedState() {
  WEFT_RETURN_IF_ERROR(optimizer_->RefreshParamsFromMasters(ctx_.stream));
  for (auto& p : parallel_->participants) WEFT_RETURN_IF_ERROR(p->AfterOptimizerStep());
  return compute_stream().Synchronize();
}

absl::Status Trainer::ResumeFrom(const ckpt::Checkpoint& ck) {
  const TrainConfig& c = cfg();
  const std::string& step_dir = ck.dir;
  const ckpt::Metadata& m = ck.meta;
  if (m.step() > c.steps()) {
    return InvalidArgument(absl::StrCat("checkpoint ", step_dir, " is at step ", m.step()),
                           absl::StrCat("a step <= --steps=", c.steps()),
                           "raise --steps to train further");
  }
  if (m.ranks_size() == 0) return InvalidArgument(absl::StrCat(step_dir, " records no rank state"), "one per rank");
  // Every rank stood at the same data position; take this rank's record
  // when the world is the same, else rank 0's (then rescaled).
  const ckpt::RankState& rs = m.ranks(m.world_size() == parallel_->world_size ? parallel_->world_rank : 0);
  if (rs.seed() != static_cast<uint64_t>(c.seed())) {
    return InvalidArgument(absl::StrCat("checkpoint ", step_dir, " was trained with --seed=", rs.seed()),
                           absl::StrCat("the same seed (this run has --seed=", c.seed(), ")"),
                           "the seed fixes the data order and dropout masks: resume with its seed");
  }
  // Token ids index the embedding rows: data tokenized another way (an
  // edited corpus reorders a char vocabulary, shards re-made with another
  // BPE) would go on training rows that meant other tokens.
  if (!m.tokenizer().empty() && !loaders_.tokenizer.empty() &&
      m.tokenizer() != loaders_.tokenizer) {
    return FailedPrecondition(
        absl::StrCat("checkpoint ", step_dir,
                     " was trained with another tokenizer than this run's data gives"),
        "the tokenizer the checkpoint was trained with: token ids index the embedding rows",
        "resume on the data it was trained on, or pass --tokenizer=FILE with its tokenizer "
        "(//tools:ckpt export CHECKPOINT --format=tokenizer --out=FILE writes it)");
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<StatePiece> pieces, ExportState());
  // The job's entries: every parameter (held here or on another pipeline
  // rank) and the optimizer's state for it.
  std::set<std::string> job_entries;
  const std::vector<std::string> kinds = optimizer_->config().name == "adamw"
                                             ? std::vector<std::string>{"exp_avg", "exp_avg_sq"}
                                             : std::vector<std::string>{"exp_avg"};
  for (Parameter* p : model_->AllParameters()) {
    job_entries.insert(p->name());
    for (const std::string& k : kinds) job_entries.insert(absl::StrCat(p->name(), ":", k));
  }
  ckpt::LoadStats stats;
  const auto t0 = std::chrono::steady_clock::now();
  WEFT_RETURN_IF_ERROR(
      ckpt::LoadState(ck, pieces, compute_stream(), {.job_entries = &job_entries}, &stats));
  WEFT_RETURN_IF_ERROR(PublishLoadedState());
  WEFT_RETURN_IF_ERROR(RestoreLoader(loaders_.train.get(), rs.train_loader(), "train"));
  // The validation loader's position is not restored: every evaluation
  // starts it over (Evaluate), and restoring it only tied the checkpoint to
  // layouts its leftover position divides.
  // eval_samples unset means eval_batches x micro_batch: under another
  // micro_batch that is another validation set, and the curve would jump.
  if (c.eval_samples() == 0 && rs.eval_samples() > 0 && rs.eval_samples() != EvalSamples()) {
    logger_->Print(absl::StrCat("evaluations keep the checkpoint's ", rs.eval_samples(),
                                " validation samples, not --eval_batches x --micro_batch = ",
                                EvalSamples(), " (set --eval_samples to choose)"));
    resumed_eval_samples_ = rs.eval_samples();
  }
  step_ = m.step();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::string> mesh;
  for (const ckpt::MeshAxis& a : m.mesh()) {
    if (a.size() > 1) mesh.push_back(absl::StrCat(a.name(), "=", a.size()));
  }
  logger_->Print(absl::StrFormat(
      "resumed from %s at step %d (saved by %d rank%s%s%s, strategy %s); read %.1f MB in %.0f ms",
      step_dir, m.step(), m.world_size(), m.world_size() == 1 ? "" : "s",
      mesh.empty() ? "" : " on ", absl::StrJoin(mesh, " x "),
      m.strategies().empty() ? "none" : m.strategies(), stats.bytes_read / 1e6, ms));
  if (step_ == c.steps()) {
    logger_->Print(absl::StrCat("the checkpoint is at --steps=", c.steps(),
                                ": no steps left to train (raise --steps to continue)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Trainer::LoadWeights(
    const std::map<std::string, ckpt::HostTensor>& full) {
  WEFT_ASSIGN_OR_RETURN(std::vector<StatePiece> pieces, ExportState());
  std::vector<StatePiece> values;
  for (StatePiece& p : pieces) {
    if (p.info.name.find(':') == std::string::npos) values.push_back(std::move(p));
  }
  // Known: the whole model's parameters, not only the pieces this rank holds
  // (other shards and pipeline stages hold the rest).
  std::set<std::string> known;
  for (Parameter* p : model_->AllParameters()) known.insert(p->name());
  std::vector<std::string> unknown;
  for (const auto& [name, t] : full) {
    if (!known.count(name)) unknown.push_back(name);
  }
  if (!unknown.empty()) {
    return FailedPrecondition(absl::StrCat("weights for parameters this model lacks: ",
                                           absl::StrJoin(unknown, ", ")),
                              "names of this model's parameters",
                              "build the model with the config the weights were written for");
  }
  std::vector<std::string> skipped;
  WEFT_RETURN_IF_ERROR(ckpt::LoadFromFull(full, values, compute_stream(), &skipped));
  WEFT_RETURN_IF_ERROR(PublishLoadedState());
  std::sort(skipped.begin(), skipped.end());
  skipped.erase(std::unique(skipped.begin(), skipped.end()), skipped.end());
  return skipped;
}

// One record per Save call (the time training was blocked) and, once a
// save finished, its whole duration and size: with async the two differ.
void Trainer::LogCheckpoint(bool after_save) {
  const ckpt::SaveStats& done = checkpointer_->last();
  const bool finished = done.step > 0 && done.step != logged_save_step_;
  if (!after_save && !finished) return;
  MetricsLogger::Record r;
  r.Add("step", step_);
  if (after_save) r.Add("ckpt_blocked_ms", checkpointer_->last_blocked_ms());
  if (finished) {
    r.Add("ckpt_saved_step", done.step).Add("ckpt_write_ms", done.write_ms);
    r.Add("ckpt_mb", done.bytes / 1e6);
    logged_save_step_ = done.step;
  }
  logger_->Log(r);
}

}  // namespace weft
