#include "checkpoint/checkpointer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/layout.h"
#include "checkpoint/metadata_file.h"
#include "checkpoint/piece_runs.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::ckpt {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

absl::Status WriteFileDurably(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("creating ", path, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      ::close(fd);
      return absl::InternalError(absl::StrCat("writing ", path, ": ", std::strerror(errno)));
    }
    done += static_cast<size_t>(w);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) return absl::InternalError(absl::StrCat("fsync of ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

// Replica-0 pieces must tile every entry exactly: otherwise a strategy
// described its shards wrongly and the checkpoint would not load.
absl::Status CheckCoverage(const Entry& e) {
  std::vector<IndexRun> runs;
  int64_t n = 1;
  for (int64_t d : e.global_shape()) n *= d;
  for (const Piece& p : e.pieces()) {
    if (p.replica() != 0) continue;
    for (const IndexRun& r : GlobalRuns({{e.global_shape().begin(), e.global_shape().end()},
                                    {p.box_offsets().begin(), p.box_offsets().end()},
                                    {p.box_shape().begin(), p.box_shape().end()},
                                    p.begin(),
                                    p.end()})) {
      runs.push_back(r);
    }
  }
  std::sort(runs.begin(), runs.end(), [](const IndexRun& a, const IndexRun& b) { return a.global < b.global; });
  int64_t next = 0;
  for (const IndexRun& r : runs) {
    if (r.global != next) {
      return Internal(absl::StrCat("entry ", e.name(), ": the ranks' replica-0 pieces ",
                                   r.global < next ? "overlap" : "leave a gap", " at element ",
                                   std::min(r.global, next)),
                      "pieces that cover every element exactly once",
                      "a strategy's sharding export (OptimTarget param_offset/replica) is wrong");
    }
    next += r.length;
  }
  if (next != n) {
    return Internal(absl::StrCat("entry ", e.name(), ": pieces cover ", next, " of ", n,
                                 " elements"),
                    "every element on one replica-0 piece");
  }
  return absl::OkStatus();
}

std::string Key(int64_t step, const std::string& what) {
  return absl::StrCat("weft_ckpt/", step, "/", what);
}

}  // namespace

struct Checkpointer::Job {
  int64_t step = 0;
  std::vector<HostStatePiece> pieces;
  RankState state;
  std::vector<MeshAxis> mesh;
  std::string strategies, job_config, model_summary, optimizer, tokenizer, lr_schedule;
  Clock::time_point start;
  SaveStats stats;
};

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Create(CheckpointerOptions options) {
  if (options.dir.empty()) return InvalidArgument("a checkpointer without a directory", "--checkpoint_dir");
  if (options.world_size > 1 && options.store == nullptr) {
    return InvalidArgument(absl::StrCat("a checkpointer for ", options.world_size,
                                        " ranks without the job's store"),
                           "the rendezvous store ranks coordinate saves through");
  }
  if (options.chunk_bytes <= 0 || options.keep_last < 0) {
    return InvalidArgument(absl::StrCat("chunk_bytes=", options.chunk_bytes,
                                        " keep_last=", options.keep_last),
                           "chunk_bytes > 0 and keep_last >= 0");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) {
    return FailedPrecondition(absl::StrCat("cannot create --checkpoint_dir=", options.dir, ": ",
                                           ec.message()),
                              "a writable directory (shared by every node of a multi-node job)");
  }
  return std::unique_ptr<Checkpointer>(new Checkpointer(std::move(options)));
}

Checkpointer::Checkpointer(CheckpointerOptions options) : options_(std::move(options)) {}

Checkpointer::~Checkpointer() { (void)Wait(); }

absl::Status Checkpointer::Wait() {
  if (!thread_.joinable()) return absl::OkStatus();
  thread_.join();
  last_ = pending_->stats;
  const int64_t step = pending_->step;
  pending_.reset();
  absl::Status s = thread_status_;
  thread_status_ = absl::OkStatus();
  // Reported at the next save or at the end: name the step that failed.
  return Annotate(s, absl::StrCat("the asynchronous save of step ", step));
}

absl::Status Checkpointer::Save(const SaveRequest& request) {
  const Clock::time_point t0 = Clock::now();
  WEFT_RETURN_IF_ERROR(Wait());
  auto job = std::make_unique<Job>();
  job->step = request.step;
  job->state = request.state;
  job->mesh = request.mesh;
  job->strategies = request.strategies;
  job->job_config = request.job_config;
  job->model_summary = request.model_summary;
  job->optimizer = request.optimizer;
  job->tokenizer = request.tokenizer;
  job->lr_schedule = request.lr_schedule;
  job->start = t0;
  job->stats.step = request.step;
  // The copy to host: training may change the state once Save returns.
  const std::vector<StatePiece>& pieces = *request.pieces;
  buffers_.resize(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Tensor& src = pieces[i].data;
    Tensor& buf = buffers_[i];
    if (!buf.defined() || buf.numel() != src.numel() || buf.dtype() != src.dtype()) {
      WEFT_ASSIGN_OR_RETURN(buf, Tensor::Empty({src.numel()}, src.dtype(), Device::Cpu(),
                                               PinnedHostAllocator()));
    }
    WEFT_RETURN_IF_ERROR(buf.CopyFrom(src, request.stream->native(), /*async=*/src.device().is_cuda()));
    job->pieces.push_back({pieces[i].info, buf});
  }
  WEFT_RETURN_IF_ERROR(request.stream->Synchronize());
  if (!options_.async) {
    absl::Status s = WriteAndCommit(*job);
    last_ = job->stats;
    last_.blocked_ms = blocked_ms_ = MsSince(t0);
    return s;
  }
  job->stats.blocked_ms = blocked_ms_ = MsSince(t0);
  pending_ = std::move(job);
  thread_ = std::thread([this, job = pending_.get()] { thread_status_ = WriteAndCommit(*job); });
  return absl::OkStatus();
}

absl::Status Checkpointer::WriteAndCommit(Job& job) {
  const std::string tmp = absl::StrCat(options_.dir, "/", StepDirName(job.step), ".tmp");
  RankReport report;
  *report.mutable_state() = job.state;
  absl::Status written = [&]() -> absl::Status {
    std::error_code ec;
    std::filesystem::create_directories(tmp, ec);
    if (ec) return absl::InternalError(absl::StrCat("creating ", tmp, ": ", ec.message()));
    const std::string file = RankFileName(options_.rank);
    int64_t bytes = 0;
    WEFT_ASSIGN_OR_RETURN(std::vector<Entry> entries,
                          WriteRankFile(absl::StrCat(tmp, "/", file), file, options_.rank,
                                        job.pieces, options_.chunk_bytes, &bytes));
    for (Entry& e : entries) *report.add_entries() = std::move(e);
    report.set_bytes(bytes);
    job.stats.bytes = bytes;
    return absl::OkStatus();
  }();
  if (!written.ok()) report.set_error(std::string(written.message()));
  Fault("rank_file_written");
  absl::Status result;
  if (options_.world_size == 1) {
    result = written.ok() ? Commit(job, {std::move(report)}) : written;
  } else {
    comm::Store& store = *options_.store;
    WEFT_RETURN_IF_ERROR(store.Set(Key(job.step, absl::StrCat("report/", options_.rank)),
                                   report.SerializeAsString()));
    if (options_.rank == 0) {
      std::vector<RankReport> reports(options_.world_size);
      for (int r = 0; r < options_.world_size && result.ok(); ++r) {
        const std::string key = Key(job.step, absl::StrCat("report/", r));
        absl::StatusOr<std::string> bytes = store.Get(key, options_.timeout);
        if (!bytes.ok()) {
          result = absl::DeadlineExceededError(absl::StrCat(
              "checkpoint step ", job.step, ": rank ", r, " did not report its data file within ",
              absl::FormatDuration(options_.timeout), " (", bytes.status().message(), ")"));
        } else if (!reports[r].ParseFromString(*bytes)) {
          result = Internal(absl::StrCat("checkpoint step ", job.step, ": rank ", r,
                                         "'s report does not parse"));
        }
        (void)store.DeleteKey(key);
      }
      if (result.ok()) result = Commit(job, std::move(reports));
      WEFT_RETURN_IF_ERROR(
          store.Set(Key(job.step, "commit"), result.ok() ? "ok" : std::string(result.message())));
    } else {
      absl::StatusOr<std::string> outcome = store.Get(Key(job.step, "commit"), options_.timeout);
      if (!outcome.ok()) {
        result = absl::DeadlineExceededError(absl::StrCat(
            "checkpoint step ", job.step, ": rank 0 did not commit within ",
            absl::FormatDuration(options_.timeout), " (", outcome.status().message(), ")"));
      } else if (*outcome != "ok") {
        result = absl::InternalError(
            absl::StrCat("checkpoint step ", job.step, " failed on rank 0: ", *outcome));
      } else if (!written.ok()) {
        result = written;
      }
    }
  }
  job.stats.write_ms = MsSince(job.start);
  return result;
}

absl::Status Checkpointer::Commit(Job& job, std::vector<RankReport> reports) {
  std::vector<std::string> failed;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (reports[r].has_error()) failed.push_back(absl::StrCat("rank ", r, ": ", reports[r].error()));
  }
  if (!failed.empty()) {
    return absl::InternalError(absl::StrCat("checkpoint step ", job.step,
                                            " not written: ", absl::StrJoin(failed, "; ")));
  }
  Metadata meta;
  meta.set_format("weft-checkpoint");
  meta.set_version(1);
  meta.set_step(job.step);
  meta.set_world_size(static_cast<int>(reports.size()));
  for (const MeshAxis& a : job.mesh) *meta.add_mesh() = a;
  meta.set_strategies(job.strategies);
  meta.set_job_config(job.job_config);
  meta.set_model_summary(job.model_summary);
  meta.set_optimizer(job.optimizer);
  meta.set_tokenizer(job.tokenizer);
  meta.set_lr_schedule(job.lr_schedule);
  meta.set_chunk_bytes(options_.chunk_bytes);
  meta.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  std::map<std::string, int> index;
  int64_t total = 0;
  for (RankReport& rep : reports) {
    total += rep.bytes();
    *meta.add_ranks() = rep.state();
    for (Entry& e : *rep.mutable_entries()) {
      auto [it, fresh] = index.emplace(e.name(), meta.entries_size());
      if (fresh) {
        Entry* dst = meta.add_entries();
        dst->set_name(e.name());
        *dst->mutable_global_shape() = e.global_shape();
        dst->set_dtype(e.dtype());
      }
      Entry* dst = meta.mutable_entries(it->second);
      if (dst->dtype() != e.dtype() ||
          !std::equal(dst->global_shape().begin(), dst->global_shape().end(),
                      e.global_shape().begin(), e.global_shape().end())) {
        return Internal(absl::StrCat("entry ", e.name(), " differs in dtype or shape across ranks"));
      }
      for (Piece& p : *e.mutable_pieces()) *dst->add_pieces() = std::move(p);
    }
  }
  meta.set_total_bytes(total);
  for (Entry& e : *meta.mutable_entries()) {
    std::stable_sort(e.mutable_pieces()->begin(), e.mutable_pieces()->end(),
                     [](const Piece& a, const Piece& b) { return (a.replica() == 0) > (b.replica() == 0); });
    WEFT_RETURN_IF_ERROR(CheckCoverage(e));
  }
  const std::string tmp = absl::StrCat(options_.dir, "/", StepDirName(job.step), ".tmp");
  WEFT_RETURN_IF_ERROR(WriteFileDurably(absl::StrCat(tmp, "/", kMetadataFile), SerializeMetadata(meta)));
  WEFT_RETURN_IF_ERROR(FsyncPath(tmp));
  Fault("metadata_written");
  WEFT_RETURN_IF_ERROR(DurableRename(tmp, absl::StrCat(options_.dir, "/", StepDirName(job.step))));
  Fault("renamed");
  WEFT_RETURN_IF_ERROR(Prune(options_.dir, options_.keep_last));
  WEFT_RETURN_IF_ERROR(RemoveLeftovers(options_.dir));
  Fault("pruned");
  return absl::OkStatus();
}

}  // namespace weft::ckpt
