#include "core/runtime/step_graph.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<std::unique_ptr<StepGraph>> StepGraph::Create(const Stream& stream) {
  const Device device = stream.device();
  WEFT_ASSIGN_OR_RETURN(DeviceBackend * backend, GetDeviceBackend(device.type));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Allocator> pool,
                        backend->CreateGraphAllocator(
                            device.index, absl::StrCat(device.ToString(), " step graph")));
  std::unique_ptr<StepGraph> g(new StepGraph(stream, backend, std::move(pool)));
  g->tracked_ = std::make_unique<TrackingAllocator>("activations", g->pool_.get());
  WEFT_ASSIGN_OR_RETURN(g->staged_seed_,
                        Tensor::Zeros({1}, DType::kI64, Device::Cpu(), PinnedHostAllocator()));
  WEFT_ASSIGN_OR_RETURN(g->seed_,
                        Tensor::Zeros({1}, DType::kI64, device, nullptr, stream.native()));
  return g;
}

StepGraph::~StepGraph() {
  if (graph_ != nullptr) backend_->DestroyGraph(device_index_, graph_);
}

absl::Status StepGraph::SetInput(int micro, const std::string& field, const Tensor& value) {
  for (StaticInput& in : inputs_) {
    if (in.micro != micro || in.field != field) continue;
    if (in.buffer.shape() != value.shape() || in.buffer.dtype() != value.dtype()) {
      return InvalidArgument(
          absl::StrCat("--cuda_graph: micro-batch ", micro, " field '", field, "' is ",
                       ShapeString(value.shape()), " ", DTypeName(value.dtype())),
          absl::StrCat("the captured step's ", ShapeString(in.buffer.shape()), " ",
                       DTypeName(in.buffer.dtype()), " at every step"),
          "a replayed graph needs static shapes; drop --cuda_graph for ragged batches");
    }
    return in.buffer.CopyFrom(value, stream_.native());
  }
  // The shared device allocator: the buffer outlives every replay.
  WEFT_ASSIGN_OR_RETURN(Tensor buffer, Tensor::Empty(value.shape(), value.dtype(),
                                                     stream_.device(), nullptr, stream_.native()));
  WEFT_RETURN_IF_ERROR(buffer.CopyFrom(value, stream_.native()));
  inputs_.push_back({micro, field, std::move(buffer)});
  return absl::OkStatus();
}

Tensor StepGraph::Input(int micro, const std::string& field) const {
  for (const StaticInput& in : inputs_) {
    if (in.micro == micro && in.field == field) return in.buffer;
  }
  return Tensor();
}

void StepGraph::StageDropoutSeed(uint64_t seed) {
  *static_cast<uint64_t*>(staged_seed_.raw_data()) = seed;
}

absl::Status StepGraph::CopyDropoutSeed() {
  return seed_.CopyFrom(staged_seed_, stream_.native(), /*async=*/true);
}

absl::Status StepGraph::Capture(const std::function<absl::Status()>& issue_step) {
  if (graph_ != nullptr) {
    return FailedPrecondition("StepGraph: a second capture of the step", "one capture per graph",
                              "replay the captured step with Launch, or make a new StepGraph");
  }
  const int index = device_index_;
  WEFT_RETURN_IF_ERROR(backend_->BeginCapture(index, stream_.native()));
  const absl::Status issued = issue_step();
  // The capture always ends, so the stream is usable whatever failed.
  absl::StatusOr<NativeGraph> graph = backend_->EndCapture(index, stream_.native());
  if (!issued.ok()) {
    if (graph.ok()) backend_->DestroyGraph(index, *graph);
    return Annotate(issued, "while capturing the step into a CUDA graph (--cuda_graph)");
  }
  WEFT_RETURN_IF_ERROR(graph.status());
  graph_ = *graph;
  return absl::OkStatus();
}

absl::Status StepGraph::Launch() {
  if (graph_ == nullptr) {
    return FailedPrecondition("StepGraph: Launch before Capture", "a captured step",
                              "call Capture once (the trainer does after its eager steps)");
  }
  return backend_->LaunchGraph(device_index_, graph_, stream_.native());
}

}  // namespace weft
