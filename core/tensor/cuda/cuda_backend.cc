// The CUDA device backend: caching device allocator per GPU, pinned host
// memory, streams, events and copies. Registered at load time; binaries get
// it by depending on //core/tensor/cuda:backend.
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/tensor/caching_allocator.h"
#include "core/tensor/cuda/copy_kernels.h"
#include "core/tensor/cuda/cuda_check.h"
#include "core/tensor/cuda/device_guard.h"
#include "core/tensor/cuda/pinned_allocator.h"
#include "core/tensor/device_backend.h"
#include "core/tensor/device_count_status.h"

namespace weft::cuda {
namespace {

constexpr int kMaxGpus = 64;

static_assert(kCudaSuccess == cudaSuccess);
static_assert(kCudaErrorNoDevice == cudaErrorNoDevice);
static_assert(kCudaErrorInsufficientDriver == cudaErrorInsufficientDriver);

cudaStream_t AsStream(NativeStream s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t AsEvent(NativeEvent e) { return static_cast<cudaEvent_t>(e); }

// Captures open (BeginCapture to EndCapture), process-wide and on this
// thread: what CudaMemorySource::Capturing answers from.
std::atomic<int> open_captures{0};
thread_local int open_captures_on_this_thread = 0;

// cudaMalloc for one GPU, with events for the allocator's cross-stream safety.
class CudaMemorySource : public DeviceMemorySource {
 public:
  explicit CudaMemorySource(int index) : index_(index) {}

  absl::StatusOr<void*> Malloc(size_t bytes) override {
    DeviceGuard guard(index_);
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free OOM error
      return CudaError(err, "cudaMalloc", __FILE__, __LINE__);
    }
    return ptr;
  }
  void Free(void* ptr) override {
    DeviceGuard guard(index_);
    (void)cudaFree(ptr);
  }
  absl::StatusOr<NativeEvent> RecordEvent(NativeStream stream) override {
    DeviceGuard guard(index_);
    cudaEvent_t e;
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(e, AsStream(stream)));
    return static_cast<NativeEvent>(e);
  }
  absl::StatusOr<bool> EventDone(NativeEvent event) override {
    const cudaError_t err = cudaEventQuery(AsEvent(event));
    if (err == cudaErrorNotReady) return false;
    WEFT_CUDA_RETURN_IF_ERROR(err);
    return true;
  }
  void DestroyEvent(NativeEvent event) override { (void)cudaEventDestroy(AsEvent(event)); }
  Device device() const override { return Device::Cuda(index_); }
  bool Capturing(NativeStream stream) override {
    if (open_captures_on_this_thread > 0) return true;
    // No capture anywhere: no driver call (the stream may even be gone).
    if (open_captures.load(std::memory_order_acquire) == 0) return false;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(AsStream(stream), &status) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return status != cudaStreamCaptureStatusNone;
  }

 private:
  const int index_;
};

class CudaBackend : public DeviceBackend {
 public:
  DeviceType type() const override { return DeviceType::kCUDA; }

  absl::StatusOr<int> DeviceCount() override {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) (void)cudaGetLastError();
    return DeviceCountFromResult(static_cast<int>(err), n, cudaGetErrorName(err),
                                 cudaGetErrorString(err));
  }

  int64_t HostSyncCount() const override { return host_syncs_.load(std::memory_order_relaxed); }
  int64_t HostSyncCountOnThisThread() const override { return thread_host_syncs_; }

  absl::StatusOr<Allocator*> GetAllocator(int index) override {
    WEFT_RETURN_IF_ERROR(CheckIndex(index));
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = allocators_[index];
    if (slot == nullptr) {
      slot = std::make_unique<CachingAllocator>(absl::StrCat("cuda:", index, " caching"),
                                                std::make_unique<CudaMemorySource>(index));
    }
    return slot.get();
  }

  Allocator* PinnedHostAllocator() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (pinned_ == nullptr) pinned_ = std::make_unique<CudaPinnedAllocator>();
    return pinned_.get();
  }

  absl::StatusOr<NativeStream> CreateStream(int index, int priority) override {
    WEFT_RETURN_IF_ERROR(CheckIndex(index));
    DeviceGuard guard(index);
    cudaStream_t s;
    // Non-blocking: weft streams never serialize with the legacy default stream.
    WEFT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority));
    return static_cast<NativeStream>(s);
  }
  void DestroyStream(int index, NativeStream stream) override {
    DeviceGuard guard(index);
    (void)cudaStreamDestroy(AsStream(stream));
  }
  absl::Status SynchronizeStream(int index, NativeStream stream) override {
    DeviceGuard guard(index);
    CountHostSync();
    WEFT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
    return absl::OkStatus();
  }

  absl::StatusOr<NativeEvent> CreateEvent(int index, bool enable_timing) override {
    WEFT_RETURN_IF_ERROR(CheckIndex(index));
    DeviceGuard guard(index);
    cudaEvent_t e;
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&e, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
    return static_cast<NativeEvent>(e);
  }
  void DestroyEvent(int index, NativeEvent event) override {
    DeviceGuard guard(index);
    (void)cudaEventDestroy(AsEvent(event));
  }
  absl::Status RecordEvent(int index, NativeEvent event, NativeStream stream) override {
    DeviceGuard guard(index);
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(AsEvent(event), AsStream(stream)));
    return absl::OkStatus();
  }
  absl::Status StreamWaitEvent(int index, NativeStream stream, NativeEvent event) override {
    DeviceGuard guard(index);
    WEFT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(AsStream(stream), AsEvent(event), 0));
    return absl::OkStatus();
  }
  absl::StatusOr<bool> QueryEvent(int, NativeEvent event) override {
    const cudaError_t err = cudaEventQuery(AsEvent(event));
    if (err == cudaErrorNotReady) return false;
    WEFT_CUDA_RETURN_IF_ERROR(err);
    return true;
  }
  absl::Status SynchronizeEvent(int, NativeEvent event) override {
    CountHostSync();
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(AsEvent(event)));
    return absl::OkStatus();
  }
  absl::StatusOr<float> ElapsedMs(int, NativeEvent start, NativeEvent end) override {
    float ms = 0;
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, AsEvent(start), AsEvent(end)));
    return ms;
  }

  absl::Status Copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes, NativeStream stream, bool async) override {
    if (bytes == 0) return absl::OkStatus();
    if (dst_device.is_cpu() && src_device.is_cpu()) {
      std::memmove(dst, src, bytes);
      return absl::OkStatus();
    }
    const int index = dst_device.is_cuda() ? dst_device.index : src_device.index;
    DeviceGuard guard(index);
    const bool device_to_device = dst_device.is_cuda() && src_device.is_cuda();
    if (stream == nullptr && !async) {
      // No stream named: the source may have been written on any (non-blocking)
      // stream, which the legacy default stream does not order with. Keep the
      // conservative device-wide wait for this case only.
      CountHostSync();
      WEFT_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      WEFT_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, AsStream(stream)));
      WEFT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
      return absl::OkStatus();
    }
    // Stream-ordered: the copy runs after the work queued on `stream`.
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, AsStream(stream)));
    if (!async && !device_to_device) {
      // Host memory (pageable) must not be read or reused before the copy
      // finished: wait for this stream only.
      CountHostSync();
      WEFT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
    }
    return absl::OkStatus();
  }

  absl::Status CopyStrided(int index, const StridedView& dst, const StridedView& src,
                           NativeStream stream) override {
    DeviceGuard guard(index);
    return LaunchCopyStrided(dst, src, AsStream(stream));
  }

  absl::Status Memset(int index, void* dst, int value, size_t bytes,
                      NativeStream stream) override {
    DeviceGuard guard(index);
    WEFT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, value, bytes, AsStream(stream)));
    return absl::OkStatus();
  }

  // Relaxed mode: the loader's worker threads keep issuing their own copies
  // during a capture, and the graph's allocator may cudaMalloc a segment.
  absl::Status BeginCapture(int index, NativeStream stream) override {
    WEFT_RETURN_IF_ERROR(CheckIndex(index));
    DeviceGuard guard(index);
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaStreamBeginCapture(AsStream(stream), cudaStreamCaptureModeRelaxed));
    open_captures.fetch_add(1, std::memory_order_acq_rel);
    ++open_captures_on_this_thread;
    return absl::OkStatus();
  }
  absl::StatusOr<NativeGraph> EndCapture(int index, NativeStream stream) override {
    DeviceGuard guard(index);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(AsStream(stream), &graph);
    if (open_captures_on_this_thread > 0) {
      --open_captures_on_this_thread;
      open_captures.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (ended != cudaSuccess) {
      (void)cudaGetLastError();
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      return FailedPrecondition(
          absl::StrCat("capturing the step into a CUDA graph failed: ", cudaGetErrorName(ended),
                       " (", cudaGetErrorString(ended), ")"),
          "a step with no host synchronization and no work outside its stream",
          "run without --cuda_graph to find the op; a host read inside the step invalidates "
          "the capture");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    WEFT_CUDA_RETURN_IF_ERROR(made);
    return static_cast<NativeGraph>(exec);
  }
  absl::Status LaunchGraph(int index, NativeGraph graph, NativeStream stream) override {
    DeviceGuard guard(index);
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), AsStream(stream)));
    return absl::OkStatus();
  }
  void DestroyGraph(int index, NativeGraph graph) override {
    DeviceGuard guard(index);
    (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }
  absl::StatusOr<std::unique_ptr<Allocator>> CreateGraphAllocator(int index,
                                                                  std::string name) override {
    WEFT_RETURN_IF_ERROR(CheckIndex(index));
    return std::unique_ptr<Allocator>(std::make_unique<CachingAllocator>(
        std::move(name), std::make_unique<CudaMemorySource>(index), /*capture_private=*/true));
  }

 private:
  absl::Status CheckIndex(int index) {
    WEFT_ASSIGN_OR_RETURN(int count, DeviceCount());
    if (index < 0 || index >= count || index >= kMaxGpus) {
      return InvalidArgument(absl::StrCat("cuda:", index, " does not exist"),
                             absl::StrCat("an index below the ", count, " visible GPU(s)"),
                             "check CUDA_VISIBLE_DEVICES and LOCAL_RANK");
    }
    return absl::OkStatus();
  }

  void CountHostSync() {
    host_syncs_.fetch_add(1, std::memory_order_relaxed);
    ++thread_host_syncs_;
  }
  static inline thread_local int64_t thread_host_syncs_ = 0;

  std::atomic<int64_t> host_syncs_{0};
  std::mutex mu_;
  std::array<std::unique_ptr<CachingAllocator>, kMaxGpus> allocators_;
  std::unique_ptr<CudaPinnedAllocator> pinned_;
};

const bool kRegistered = RegisterDeviceBackendAtStartup(std::make_unique<CudaBackend>());

}  // namespace
}  // namespace weft::cuda
