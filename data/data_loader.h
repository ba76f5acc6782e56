// DataLoader: batches from a Dataset for one rank, assembled by worker
// threads into a ring of pinned host buffers and, on CUDA, copied to the
// device asynchronously on a dedicated copy stream.
//
//   // As the trainer does: one loader per data-parallel rank, one Next() per
//   // micro-batch (ranks of one tp, cp or pp group pass the same dp rank).
//   DataLoader::Options opt;
//   opt.batch_size = micro_batch; opt.rank = dp_rank; opt.world_size = dp_size;
//   opt.global_batch = global_batch; opt.device = Device::Cuda(local_rank);
//   WEFT_ASSIGN_OR_RETURN(auto loader, DataLoader::Create(dataset, opt));
//   for (int micro = 0; micro < accum_steps; ++micro) {  // one optimizer step
//     WEFT_ASSIGN_OR_RETURN(Batch b, loader->Next());
//     WEFT_RETURN_IF_ERROR(b.WaitOn(compute_stream));  // event wait, no host sync
//     ctx.slot = micro;
//     WEFT_ASSIGN_OR_RETURN(Tensor losses, model.ForwardLoss(ctx, b.Get("inputs"),
//                                                            b.Get("targets"), dloss_scale));
//     WEFT_RETURN_IF_ERROR(model.BackwardFromLoss(ctx));
//   }
//   std::string saved = loader->State().Serialize();  // kept in the checkpoint
//   // On resume: loader->Restore(LoaderState::Parse(saved).value()).
//
// Order and contents. Batch j of epoch e holds samples
// sampler(e).Indices()[j*B, (j+1)*B) (distributed_sampler.h), whatever the
// number of workers or the timing: workers only decide who assembles a
// batch, never what is in it. The stream runs through epochs without end;
// Batch::epoch()/index() say where it is, batches_per_epoch() how long an
// epoch is.
//
// Threads. num_workers threads assemble batches ahead of the consumer, at
// most prefetch_depth of them, into a ring of prefetch_depth + 2 slots
// (batch_ring.h). With num_workers = 0, Next assembles on the caller's thread.
// On CUDA, Next also starts the copy of the following batch when it is
// already assembled, so that copy overlaps the caller's compute. Next,
// State and Restore are for one consumer thread.
//
// Errors. A failing sample (corrupt shard, id >= vocab) makes Next return the
// dataset's error (naming the file) with the batch position added; the
// loader then stays failed. The destructor stops and joins the workers
// without waiting for the consumer; it never hangs on undrained batches.
#ifndef WEFT_DATA_DATA_LOADER_H_
#define WEFT_DATA_DATA_LOADER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/device.h"
#include "core/tensor/stream.h"
#include "data/batch.h"
#include "data/batch_ring.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/loader_state.h"

namespace weft::data {

class DataLoader {
 public:
  struct Options {
    int64_t batch_size = 1;   // samples per rank per Next() (the micro-batch)
    int rank = 0;
    int world_size = 1;
    bool shuffle = true;
    uint64_t seed = 0;
    // Drops the sampler's tail (instead of padding by wrapping around) and a
    // short last batch (instead of returning it with fewer rows).
    bool drop_last = true;
    // Samples per optimizer step over all ranks (batch_size x world_size x
    // accumulation steps). Epochs are cut to a multiple of it, so that they
    // end after the same samples, on a step boundary, for any world size
    // and batch_size (distributed_sampler.h). 0: the epoch is cut to a
    // multiple of world_size, then each rank drops its short last batch
    // (with drop_last; PyTorch's behaviour, which depends on both).
    // Evaluation loaders derived from the training options reset it to 0:
    // padded to a global batch they would count repeated samples.
    int64_t global_batch = 0;
    int num_workers = 2;      // 0 = assemble on the caller's thread
    int prefetch_depth = 4;   // batches assembled ahead of the consumer (>= 1)
    Device device = Device::Cpu();
    // Called after each batch is assembled (on the assembling thread), for
    // traces of the loader's activity. worker is -1 for the caller's thread
    // (num_workers = 0); times are microseconds on the system clock.
    std::function<void(int worker, int64_t seq, int64_t begin_us, int64_t end_us)> on_assembled;
  };

  static absl::StatusOr<std::unique_ptr<DataLoader>> Create(
      std::shared_ptr<const Dataset> dataset, const Options& options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch (blocks until it is assembled).
  absl::StatusOr<Batch> Next();
  // Position of the batch the next Next() returns.
  LoaderState State() const;
  // Continues from `state` (which must come from a loader over the same
  // dataset size, batch size and world size); the seed comes from the state.
  absl::Status Restore(const LoaderState& state);

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const std::vector<FieldSpec>& fields() const { return *fields_; }
  const Options& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }
  // The copy stream (CUDA only; null otherwise), e.g. for profiling.
  const Stream* copy_stream() const { return copy_stream_ ? &*copy_stream_ : nullptr; }

 private:
  struct Ready {
    int slot = -1;
    absl::Status status;
  };

  DataLoader(std::shared_ptr<const Dataset> dataset, const Options& options,
             DistributedSampler sampler, int64_t batches_per_epoch);
  absl::Status Init();
  void StartWorkers();
  void StopWorkers();  // joins; prefetched batches go back to the ring
  void WorkerLoop(int worker);
  // Produce, reported to options_.on_assembled.
  absl::Status ProduceObserved(int64_t seq, int slot, int worker);
  // Assembles batch `seq` (epoch * batches_per_epoch + index) into `slot`.
  absl::Status Produce(int64_t seq, int slot);
  int64_t RowsOf(int64_t seq) const;
  std::shared_ptr<const std::vector<int64_t>> IndicesFor(int64_t epoch);
  // Waits for batch `seq` to be assembled (or assembles it without workers).
  absl::StatusOr<int> TakeAssembled(int64_t seq);
  absl::StatusOr<Batch> ToBatch(int64_t seq, int slot);
  // CUDA: starts the copy of batch next_out_ if it is assembled already.
  void StageNext();
  absl::Status Fail(absl::Status status);

  const std::shared_ptr<const Dataset> dataset_;
  Options options_;
  DistributedSampler sampler_;
  const int64_t batches_per_epoch_;
  std::shared_ptr<const std::vector<FieldSpec>> fields_;
  std::vector<size_t> sample_bytes_;
  std::shared_ptr<BatchRing> ring_;
  std::optional<Stream> copy_stream_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_claim_ = 0;  // next batch a worker assembles
  int64_t next_out_ = 0;    // next batch Next() returns
  bool stop_ = false;
  absl::flat_hash_map<int64_t, Ready> assembled_;
  std::vector<std::thread> workers_;

  // Consumer-thread only.
  absl::Status error_;                   // sticky once a batch failed
  std::optional<Batch> staged_;          // batch next_out_, copy in flight

  std::mutex epoch_mu_;
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> epoch_indices_;
};

}  // namespace weft::data

#endif  // WEFT_DATA_DATA_LOADER_H_
