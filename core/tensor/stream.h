// Stream and Event: RAII owners of device streams and events.
//
// On CUDA a Stream is a cudaStream_t; work queued on it runs in order, and
// Events order work across streams without blocking the host:
//   Event done = Event::Create(dev).value();
//   done.Record(copy_stream);  compute_stream.Wait(done);
// On CPU streams are null and every operation is synchronous; events record
// host timestamps, so ElapsedMs measures host time.
#ifndef WEFT_CORE_TENSOR_STREAM_H_
#define WEFT_CORE_TENSOR_STREAM_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/device.h"
#include "core/tensor/device_backend.h"

namespace weft {

class Event;

class Stream {
 public:
  // A new stream on `device`. Lower priority numbers run first on CUDA.
  static absl::StatusOr<Stream> Create(Device device, int priority = 0);
  // The device's default stream: not owned, never destroyed.
  static Stream Default(Device device) { return Stream(device, nullptr, nullptr, false); }

  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  Device device() const { return device_; }
  NativeStream native() const { return native_; }

  // Blocks the host until all work queued so far has finished.
  absl::Status Synchronize() const;
  // Makes this stream wait for `event`; the host does not block.
  absl::Status Wait(const Event& event) const;

 private:
  Stream(Device device, DeviceBackend* backend, NativeStream native, bool owned)
      : device_(device), backend_(backend), native_(native), owned_(owned) {}
  void Reset();

  Device device_;
  DeviceBackend* backend_ = nullptr;
  NativeStream native_ = nullptr;
  bool owned_ = false;
};

class Event {
 public:
  static absl::StatusOr<Event> Create(Device device, bool enable_timing = false);

  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  Device device() const { return device_; }
  NativeEvent native() const { return native_; }

  // Captures the work queued on `stream` so far.
  absl::Status Record(const Stream& stream);
  // True once the recorded work has finished.
  absl::StatusOr<bool> Query() const;
  absl::Status Synchronize() const;
  // Milliseconds between two recorded timing events.
  static absl::StatusOr<float> ElapsedMs(const Event& start, const Event& end);

 private:
  Event(Device device, DeviceBackend* backend, NativeEvent native)
      : device_(device), backend_(backend), native_(native) {}
  void Reset();

  Device device_;
  DeviceBackend* backend_ = nullptr;
  NativeEvent native_ = nullptr;
};

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_STREAM_H_
