// DeviceBackend: what core/tensor needs from a device kind (memory, streams,
// events, copies), registered by name so CPU-only builds link no CUDA code.
// The CUDA backend lives in //core/tensor/cuda:backend (an alwayslink target)
// and registers itself at load time; the CPU backend is always present.
//
// Stream and event handles are opaque (cudaStream_t / cudaEvent_t on CUDA).
// A null stream means the device's default stream.
#ifndef WEFT_CORE_TENSOR_DEVICE_BACKEND_H_
#define WEFT_CORE_TENSOR_DEVICE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/allocator.h"
#include "core/tensor/device.h"
#include "core/tensor/strided_view.h"

namespace weft {

using NativeEvent = void*;
using NativeGraph = void*;  // an instantiated, replayable graph (cudaGraphExec_t)

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual DeviceType type() const = 0;

  virtual absl::StatusOr<int> DeviceCount() = 0;
  virtual absl::StatusOr<Allocator*> GetAllocator(int index) = 0;
  // Page-locked host memory, or nullptr when the backend cannot provide it.
  virtual Allocator* PinnedHostAllocator() = 0;

  virtual absl::StatusOr<NativeStream> CreateStream(int index, int priority) = 0;
  virtual void DestroyStream(int index, NativeStream stream) = 0;
  virtual absl::Status SynchronizeStream(int index, NativeStream stream) = 0;

  virtual absl::StatusOr<NativeEvent> CreateEvent(int index, bool enable_timing) = 0;
  virtual void DestroyEvent(int index, NativeEvent event) = 0;
  virtual absl::Status RecordEvent(int index, NativeEvent event, NativeStream stream) = 0;
  // Makes `stream` wait for `event` without blocking the host.
  virtual absl::Status StreamWaitEvent(int index, NativeStream stream, NativeEvent event) = 0;
  virtual absl::StatusOr<bool> QueryEvent(int index, NativeEvent event) = 0;
  virtual absl::Status SynchronizeEvent(int index, NativeEvent event) = 0;
  virtual absl::StatusOr<float> ElapsedMs(int index, NativeEvent start, NativeEvent end) = 0;

  // Copies `bytes` between host and device or within the device, ordered on
  // `stream`. Device-to-device copies never block the host. With async=false
  // a copy touching host memory returns once it is done (it waits for
  // `stream` only); with async=true the host does not wait and the host side
  // should be pinned memory. A null stream with async=false waits for the
  // whole device first (the source may come from any stream).
  virtual absl::Status Copy(void* dst, Device dst_device, const void* src, Device src_device,
                            size_t bytes, NativeStream stream, bool async) = 0;
  // Element-wise copy between strided views on this backend's device, with
  // dtype conversion (round to nearest even) when the dtypes differ.
  virtual absl::Status CopyStrided(int index, const StridedView& dst, const StridedView& src,
                                   NativeStream stream) = 0;
  // Host-blocking synchronizations (stream/event/device waits, blocking
  // copies) this backend performed since start; for tests that count syncs
  // per step. Backends that never block the host return 0.
  virtual int64_t HostSyncCount() const { return 0; }
  // The same, counting only the calling thread's waits (a training loop's
  // stalls, without the data loader's workers waiting on their own copies).
  virtual int64_t HostSyncCountOnThisThread() const { return 0; }

  virtual absl::Status Memset(int index, void* dst, int value, size_t bytes,
                              NativeStream stream) = 0;

  // Graphs (CUDA graphs): the work queued on `stream` between BeginCapture
  // and EndCapture is recorded instead of run, and EndCapture returns it
  // instantiated; LaunchGraph replays it on a stream, with the same
  // arguments and addresses. Backends without graphs answer FailedPrecondition.
  virtual absl::Status BeginCapture(int index, NativeStream stream);
  virtual absl::StatusOr<NativeGraph> EndCapture(int index, NativeStream stream);
  virtual absl::Status LaunchGraph(int index, NativeGraph graph, NativeStream stream);
  virtual void DestroyGraph(int index, NativeGraph graph) {}
  // A caching allocator for device `index` that shares no memory with
  // GetAllocator's: a graph's own, used for its capture and nothing else
  // (caching_allocator.h).
  virtual absl::StatusOr<std::unique_ptr<Allocator>> CreateGraphAllocator(int index,
                                                                          std::string name);
};

// Registers a backend for its device type. A second backend for the same type
// is a programmer error (aborts), like a duplicate strategy name.
void RegisterDeviceBackend(std::unique_ptr<DeviceBackend> backend);

// The backend for `type`, or FailedPrecondition saying it is not linked in.
absl::StatusOr<DeviceBackend*> GetDeviceBackend(DeviceType type);

// Used by backends' registration files: `static const bool kRegistered = ...`.
bool RegisterDeviceBackendAtStartup(std::unique_ptr<DeviceBackend> backend);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_DEVICE_BACKEND_H_
