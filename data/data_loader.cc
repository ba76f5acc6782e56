#include "data/data_loader.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/tensor/allocator.h"

namespace weft::data {
namespace {

constexpr int kMaxWorkers = 256;
constexpr int kMaxPrefetch = 256;
// Slots beyond the prefetch depth: the batch the consumer holds, and one
// whose copy is in flight (CUDA) or that the consumer holds a little longer.
constexpr int kExtraSlots = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(
    std::shared_ptr<const Dataset> dataset, const Options& options) {
  if (dataset == nullptr) return InvalidArgument("null dataset", "a dataset");
  if (options.batch_size < 1) {
    return InvalidArgument(absl::StrCat("batch size ", options.batch_size),
                           "at least 1 sample per batch");
  }
  if (options.num_workers < 0 || options.num_workers > kMaxWorkers) {
    return InvalidArgument(absl::StrCat(options.num_workers, " loader workers"),
                           absl::StrCat("0 (load on the caller's thread) to ", kMaxWorkers));
  }
  if (options.prefetch_depth < 1 || options.prefetch_depth > kMaxPrefetch) {
    return InvalidArgument(absl::StrCat("prefetch depth ", options.prefetch_depth),
                           absl::StrCat("1 to ", kMaxPrefetch));
  }
  const std::vector<FieldSpec> fields = dataset->fields();
  if (fields.empty()) return InvalidArgument(dataset->Describe() + " has no fields", ">= 1 field");
  for (const FieldSpec& f : fields) {
    if (f.SampleBytes() == 0) {
      return InvalidArgument(absl::StrCat("field '", f.name, "' of shape ", ShapeString(f.shape),
                                          " is empty"),
                             "at least one element per sample");
    }
  }
  SamplerOptions so;
  so.num_samples = dataset->num_samples();
  so.world_size = options.world_size;
  so.rank = options.rank;
  so.shuffle = options.shuffle;
  so.seed = options.seed;
  so.drop_last = options.drop_last;
  so.global_batch = options.global_batch;
  if (options.global_batch < 0 ||
      options.global_batch % (options.batch_size * options.world_size) != 0) {
    return InvalidArgument(
        absl::StrCat("global batch ", options.global_batch, " with batches of ",
                     options.batch_size, " on ", options.world_size, " ranks"),
        "a global batch divisible by batch_size x world_size",
        "the global batch is batch_size x world_size x accumulation steps");
  }
  absl::StatusOr<DistributedSampler> sampler = DistributedSampler::Create(so);
  if (!sampler.ok()) return Annotate(sampler.status(), dataset->Describe());
  const int64_t per_rank = sampler->num_samples_per_rank();
  const int64_t b = options.batch_size;
  const int64_t batches = options.drop_last ? per_rank / b : (per_rank + b - 1) / b;
  if (batches == 0) {
    return InvalidArgument(
        absl::StrCat("each of ", options.world_size, " ranks gets ", per_rank,
                     " samples of ", dataset->Describe(), ", fewer than one batch of ", b),
        "at least batch_size samples per rank with drop_last",
        "use a smaller --micro_batch or --global_batch, fewer ranks, or more data");
  }
  std::unique_ptr<DataLoader> loader(
      new DataLoader(std::move(dataset), options, *std::move(sampler), batches));
  WEFT_RETURN_IF_ERROR(loader->Init());
  return loader;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, const Options& options,
                       DistributedSampler sampler, int64_t batches_per_epoch)
    : dataset_(std::move(dataset)),
      options_(options),
      sampler_(std::move(sampler)),
      batches_per_epoch_(batches_per_epoch) {}

absl::Status DataLoader::Init() {
  auto fields = std::make_shared<std::vector<FieldSpec>>(dataset_->fields());
  for (const FieldSpec& f : *fields) sample_bytes_.push_back(f.SampleBytes());
  fields_ = std::move(fields);
  if (options_.device.is_cuda()) {
    WEFT_ASSIGN_OR_RETURN(Stream s, Stream::Create(options_.device));
    copy_stream_ = std::move(s);
  }
  WEFT_ASSIGN_OR_RETURN(ring_, BatchRing::Create(*fields_, options_.batch_size,
                                                 options_.prefetch_depth + kExtraSlots,
                                                 PinnedHostAllocator()));
  ring_->ResetTickets(0);
  StartWorkers();
  return absl::OkStatus();
}

DataLoader::~DataLoader() {
  StopWorkers();
  staged_.reset();
}

void DataLoader::StartWorkers() {
  for (int i = 0; i < options_.num_workers; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

void DataLoader::StopWorkers() {
  if (ring_ == nullptr) return;  // Init failed before the ring existed
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  ring_->Cancel();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [seq, ready] : assembled_) ring_->Release(ready.slot);
  assembled_.clear();
  stop_ = false;
}

void DataLoader::WorkerLoop(int worker) {
  for (;;) {
    int64_t seq;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || next_claim_ < next_out_ + options_.prefetch_depth; });
      if (stop_) return;
      seq = next_claim_++;
    }
    const int slot = ring_->Acquire(seq);
    if (slot < 0) return;  // cancelled
    absl::Status status = ProduceObserved(seq, slot, worker);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        ring_->Release(slot);
        return;
      }
      assembled_[seq] = Ready{slot, std::move(status)};
    }
    cv_.notify_all();
  }
}

int64_t DataLoader::RowsOf(int64_t seq) const {
  const int64_t first = (seq % batches_per_epoch_) * options_.batch_size;
  return std::min(options_.batch_size, sampler_.num_samples_per_rank() - first);
}

std::shared_ptr<const std::vector<int64_t>> DataLoader::IndicesFor(int64_t epoch) {
  std::lock_guard<std::mutex> lock(epoch_mu_);
  auto it = epoch_indices_.find(epoch);
  if (it != epoch_indices_.end()) return it->second;
  DistributedSampler sampler = sampler_;
  sampler.SetEpoch(epoch);
  auto indices = std::make_shared<const std::vector<int64_t>>(sampler.Indices());
  epoch_indices_[epoch] = indices;
  // Workers run at most prefetch_depth batches ahead: a few epochs suffice.
  while (epoch_indices_.size() > 3) epoch_indices_.erase(epoch_indices_.begin());
  return indices;
}

absl::Status DataLoader::ProduceObserved(int64_t seq, int slot, int worker) {
  if (!options_.on_assembled) return Produce(seq, slot);
  auto now_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t begin = now_us();
  absl::Status s = Produce(seq, slot);
  options_.on_assembled(worker, seq, begin, now_us());
  return s;
}

absl::Status DataLoader::Produce(int64_t seq, int slot) {
  // The slot's previous batch may still be on its way to the device.
  WEFT_RETURN_IF_ERROR(ring_->WaitForCopy(slot));
  const int64_t epoch = seq / batches_per_epoch_;
  const int64_t index = seq % batches_per_epoch_;
  const std::shared_ptr<const std::vector<int64_t>> indices = IndicesFor(epoch);
  const int64_t first = index * options_.batch_size;
  const int64_t rows = RowsOf(seq);
  const size_t num_fields = sample_bytes_.size();
  absl::InlinedVector<void*, 4> dst(num_fields);
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t f = 0; f < num_fields; ++f) {
      dst[f] = static_cast<char*>(ring_->FieldData(slot, static_cast<int>(f))) +
               r * sample_bytes_[f];
    }
    const int64_t sample = (*indices)[first + r];
    absl::Status s = dataset_->Fill(sample, absl::MakeConstSpan(dst));
    if (!s.ok()) {
      return Annotate(s, absl::StrCat("sample ", sample, " of batch ", index, " (epoch ", epoch,
                                      ", rank ", options_.rank, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> DataLoader::TakeAssembled(int64_t seq) {
  // With ticketed slots the oldest batch always gets the next free slot, so
  // the only way to wait forever is the consumer holding every slot.
  if (ring_->NumLent() == ring_->num_slots()) {
    return FailedPrecondition(
        absl::StrCat("all ", ring_->num_slots(), " loader ring slots are held by live batches"),
        "earlier batches (and tensor views of them) destroyed before asking for more",
        "drop batches once used, or raise prefetch_depth (the ring has prefetch_depth + 2 slots)");
  }
  if (options_.num_workers == 0) {
    const int slot = ring_->Acquire(seq);
    absl::Status s = ProduceObserved(seq, slot, -1);
    if (!s.ok()) {
      ring_->Release(slot);
      return s;
    }
    return slot;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return assembled_.contains(seq); });
  Ready ready = std::move(assembled_[seq]);
  assembled_.erase(seq);
  if (!ready.status.ok()) {
    ring_->Release(ready.slot);
    return ready.status;
  }
  return ready.slot;
}

absl::StatusOr<Batch> DataLoader::ToBatch(int64_t seq, int slot) {
  const int64_t epoch = seq / batches_per_epoch_;
  const int64_t index = seq % batches_per_epoch_;
  std::vector<Tensor> host = ring_->Lend(slot, RowsOf(seq));
  if (!copy_stream_) return Batch(fields_, std::move(host), epoch, index, nullptr);

  const NativeStream stream = copy_stream_->native();
  // One event per batch, so compute waits for its own batch's copy only.
  absl::StatusOr<Event> event = Event::Create(options_.device);
  if (!event.ok()) return event.status();  // nothing queued yet: `host` may free the slot
  auto done = std::make_shared<Event>(*std::move(event));
  std::vector<Tensor> device;
  absl::Status s = [&]() -> absl::Status {
    for (const Tensor& h : host) {
      WEFT_ASSIGN_OR_RETURN(Tensor d,
                            Tensor::Empty(h.shape(), h.dtype(), options_.device, nullptr, stream));
      WEFT_RETURN_IF_ERROR(d.CopyFrom(h, stream, /*async=*/true));
      device.push_back(std::move(d));
    }
    return done->Record(*copy_stream_);
  }();
  if (!s.ok()) {
    // Copies may be queued: let them finish before the slot can be reused.
    (void)copy_stream_->Synchronize();
    return Annotate(s, absl::StrCat("copying batch ", index, " of epoch ", epoch, " to ",
                                    options_.device.ToString()));
  }
  // Before `host` dies and frees the slot, so its next writer waits for the copy.
  ring_->SetPendingCopy(slot, done);
  return Batch(fields_, std::move(device), epoch, index, std::move(done));
}

void DataLoader::StageNext() {
  if (!copy_stream_ || options_.num_workers == 0 || staged_.has_value() || !error_.ok()) return;
  const int64_t seq = next_out_;
  int slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = assembled_.find(seq);
    // Failed batches stay for Next to report in order.
    if (it == assembled_.end() || !it->second.status.ok()) return;
    slot = it->second.slot;
    assembled_.erase(it);
  }
  absl::StatusOr<Batch> batch = ToBatch(seq, slot);
  if (batch.ok()) {
    staged_ = *std::move(batch);
  } else {
    error_ = batch.status();
  }
}

absl::Status DataLoader::Fail(absl::Status status) {
  error_ = status;
  return status;
}

absl::StatusOr<Batch> DataLoader::Next() {
  if (!error_.ok()) return error_;
  const int64_t seq = next_out_;  // only this thread writes next_out_
  Batch batch;
  if (staged_.has_value()) {
    batch = *std::move(staged_);
    staged_.reset();
  } else {
    absl::StatusOr<int> slot = TakeAssembled(seq);
    if (!slot.ok()) return Fail(slot.status());
    absl::StatusOr<Batch> b = ToBatch(seq, *slot);
    if (!b.ok()) return Fail(b.status());
    batch = *std::move(b);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++next_out_;
  }
  cv_.notify_all();
  StageNext();
  return batch;
}

LoaderState DataLoader::State() const {
  std::lock_guard<std::mutex> lock(mu_);
  LoaderState s;
  s.epoch = next_out_ / batches_per_epoch_;
  s.batch = next_out_ % batches_per_epoch_;
  s.seed = options_.seed;
  s.num_samples = dataset_->num_samples();
  s.batch_size = options_.batch_size;
  s.world_size = options_.world_size;
  s.shuffle = options_.shuffle;
  s.drop_last = options_.drop_last;
  s.global_batch = options_.global_batch;
  return s;
}

absl::Status DataLoader::Restore(const LoaderState& state) {
  if (state.num_samples != dataset_->num_samples() || state.batch_size != options_.batch_size ||
      state.world_size != options_.world_size || state.shuffle != options_.shuffle ||
      state.drop_last != options_.drop_last ||
      (state.global_batch != 0 && state.global_batch != options_.global_batch)) {
    return InvalidArgument(
        absl::StrCat("loader state for ", state.num_samples, " samples, batch size ",
                     state.batch_size, ", world size ", state.world_size, ", shuffle ",
                     state.shuffle, ", drop_last ", state.drop_last, ", global batch ",
                     state.global_batch),
        absl::StrCat(dataset_->num_samples(), " samples, batch size ", options_.batch_size,
                     ", world size ", options_.world_size, ", shuffle ", options_.shuffle,
                     ", drop_last ", options_.drop_last, ", global batch ",
                     options_.global_batch, " (this loader)"),
        absl::StrCat(
            "resume with the checkpointed run's data, --shuffle and --global_batch (the global "
            "batch sets the epochs' length); the micro-batch and world size may change",
            // The count alone differing was not traced to the flags that
            // make it (--seq_len=32 resuming a 64-token run: 28091 vs 14045).
            state.num_samples != dataset_->num_samples()
                ? ". The sample count differs: it follows the data files and, for text, "
                  "--seq_len and --val_fraction"
                : ""));
  }
  if (state.epoch < 0 || state.batch < 0 || state.batch >= batches_per_epoch_) {
    return InvalidArgument(absl::StrCat("loader position epoch ", state.epoch, " batch ",
                                        state.batch),
                           absl::StrCat("a batch in [0, ", batches_per_epoch_, ")"));
  }
  const int64_t seq = state.epoch * batches_per_epoch_ + state.batch;
  if (state.seed == options_.seed && error_.ok()) {
    // Already there (a loader restored to where it stands, as an evaluation
    // finds its unmoved validation loader): keep what it prefetched.
    std::lock_guard<std::mutex> lock(mu_);
    if (next_out_ == seq) return absl::OkStatus();
  }
  SamplerOptions so = sampler_.options();
  so.seed = state.seed;
  WEFT_ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::Create(so));
  StopWorkers();
  staged_.reset();
  error_ = absl::OkStatus();
  sampler_ = std::move(sampler);
  options_.seed = state.seed;
  {
    std::lock_guard<std::mutex> lock(epoch_mu_);
    epoch_indices_.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_out_ = next_claim_ = seq;
  }
  ring_->ResetTickets(seq);
  StartWorkers();
  return absl::OkStatus();
}

}  // namespace weft::data
