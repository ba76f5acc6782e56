// StepGraph: a training step captured once as a CUDA graph and replayed
// every step after (--cuda_graph), so the host issues one launch instead of
// the step's hundreds of kernels.
//
// A replay repeats the captured kernels with the same arguments at the same
// addresses, so whatever changes between steps must live in memory that
// stays put:
// - the batch: copied into static device buffers (one per micro-batch and
//   field) before each launch; the captured step reads those;
// - lr and AdamW's bias corrections: staged in pinned memory and copied by
//   the step itself (Optimizer::KeepStepScalarsInMemory); likewise the
//   step's dropout seed (StageDropoutSeed, RunContext::dropout_seed_in_memory);
// - everything the step allocates: from the graph's private caching
//   allocator, which nothing outside the graph uses, so the captured
//   addresses are never handed to other tensors.
// The shared allocator refuses a stream being captured (an allocation
// that bypassed the run context's allocator fails the capture instead of
// corrupting memory later), and a host read inside the step invalidates the
// capture: both are errors, never a silent eager fallback.
#ifndef WEFT_CORE_RUNTIME_STEP_GRAPH_H_
#define WEFT_CORE_RUNTIME_STEP_GRAPH_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/device_backend.h"
#include "core/tensor/stream.h"
#include "core/tensor/tensor.h"
#include "core/tensor/tracking_allocator.h"

namespace weft {

class StepGraph {
 public:
  // `stream` (the compute stream) must outlive the graph.
  static absl::StatusOr<std::unique_ptr<StepGraph>> Create(const Stream& stream);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // What the captured step allocates from (and the warm-up steps before it,
  // so the capture finds its memory cached): tracked for the memory report.
  TrackingAllocator* allocator() { return tracked_.get(); }
  const Allocator& pool() const { return *pool_; }

  // Copies `value` into micro-batch `micro`'s static buffer for `field`
  // (made on first use, on the device), ordered on the stream. Every later
  // value must have the first one's shape and dtype.
  absl::Status SetInput(int micro, const std::string& field, const Tensor& value);
  // The static buffer; undefined before SetInput.
  Tensor Input(int micro, const std::string& field) const;

  // The step's dropout seed: written to pinned memory here before each
  // launch, and copied to dropout_seed() by the step (CopyDropoutSeed,
  // which the capture records), where the dropout kernels read it.
  void StageDropoutSeed(uint64_t seed);
  absl::Status CopyDropoutSeed();
  const Tensor& dropout_seed() const { return seed_; }

  bool captured() const { return graph_ != nullptr; }
  // Records `issue_step` (the step's device work, enqueued on the stream)
  // into the graph. Nothing runs until Launch.
  absl::Status Capture(const std::function<absl::Status()>& issue_step);
  // Runs the captured step on the stream.
  absl::Status Launch();

 private:
  StepGraph(const Stream& stream, DeviceBackend* backend, std::unique_ptr<Allocator> pool)
      : stream_(stream),
        device_index_(stream.device().index),
        backend_(backend),
        pool_(std::move(pool)) {}

  struct StaticInput {
    int micro;
    std::string field;
    Tensor buffer;
  };

  const Stream& stream_;
  const int device_index_;
  DeviceBackend* const backend_;
  std::unique_ptr<Allocator> pool_;
  std::unique_ptr<TrackingAllocator> tracked_;
  std::vector<StaticInput> inputs_;
  Tensor staged_seed_;  // pinned host, one i64
  Tensor seed_;         // its device copy
  NativeGraph graph_ = nullptr;
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_STEP_GRAPH_H_
