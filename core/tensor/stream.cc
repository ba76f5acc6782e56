#include "core/tensor/stream.h"

#include <utility>

#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<Stream> Stream::Create(Device device, int priority) {
  WEFT_ASSIGN_OR_RETURN(DeviceBackend * backend, GetDeviceBackend(device.type));
  WEFT_ASSIGN_OR_RETURN(NativeStream native, backend->CreateStream(device.index, priority));
  return Stream(device, backend, native, true);
}

Stream::Stream(Stream&& other) noexcept
    : device_(other.device_),
      backend_(std::exchange(other.backend_, nullptr)),
      native_(std::exchange(other.native_, nullptr)),
      owned_(std::exchange(other.owned_, false)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Reset();
    device_ = other.device_;
    backend_ = std::exchange(other.backend_, nullptr);
    native_ = std::exchange(other.native_, nullptr);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

Stream::~Stream() { Reset(); }

void Stream::Reset() {
  if (owned_ && backend_ != nullptr) backend_->DestroyStream(device_.index, native_);
  owned_ = false;
  native_ = nullptr;
}

absl::Status Stream::Synchronize() const {
  DeviceBackend* backend = backend_;
  if (backend == nullptr) {
    WEFT_ASSIGN_OR_RETURN(backend, GetDeviceBackend(device_.type));
  }
  return backend->SynchronizeStream(device_.index, native_);
}

absl::Status Stream::Wait(const Event& event) const {
  if (event.device() != device_) {
    return InvalidArgument("stream on " + device_.ToString() + " asked to wait for an event on " +
                               event.device().ToString(),
                           "an event of the same device");
  }
  DeviceBackend* backend = backend_;
  if (backend == nullptr) {
    WEFT_ASSIGN_OR_RETURN(backend, GetDeviceBackend(device_.type));
  }
  return backend->StreamWaitEvent(device_.index, native_, event.native());
}

absl::StatusOr<Event> Event::Create(Device device, bool enable_timing) {
  WEFT_ASSIGN_OR_RETURN(DeviceBackend * backend, GetDeviceBackend(device.type));
  WEFT_ASSIGN_OR_RETURN(NativeEvent native, backend->CreateEvent(device.index, enable_timing));
  return Event(device, backend, native);
}

Event::Event(Event&& other) noexcept
    : device_(other.device_),
      backend_(std::exchange(other.backend_, nullptr)),
      native_(std::exchange(other.native_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Reset();
    device_ = other.device_;
    backend_ = std::exchange(other.backend_, nullptr);
    native_ = std::exchange(other.native_, nullptr);
  }
  return *this;
}

Event::~Event() { Reset(); }

void Event::Reset() {
  if (backend_ != nullptr && native_ != nullptr) backend_->DestroyEvent(device_.index, native_);
  native_ = nullptr;
}

absl::Status Event::Record(const Stream& stream) {
  if (stream.device() != device_) {
    return InvalidArgument("event on " + device_.ToString() + " recorded on a stream of " +
                               stream.device().ToString(),
                           "a stream of the same device");
  }
  return backend_->RecordEvent(device_.index, native_, stream.native());
}

absl::StatusOr<bool> Event::Query() const { return backend_->QueryEvent(device_.index, native_); }

absl::Status Event::Synchronize() const {
  return backend_->SynchronizeEvent(device_.index, native_);
}

absl::StatusOr<float> Event::ElapsedMs(const Event& start, const Event& end) {
  return start.backend_->ElapsedMs(start.device_.index, start.native_, end.native_);
}

}  // namespace weft
