#include "comm/gloo/store_adapter.h"

#include <gloo/common/error.h>

namespace weft::comm {
namespace {

[[noreturn]] void Throw(const absl::Status& status) {
  throw ::gloo::IoException(std::string(status.message()));
}

}  // namespace

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status s = store_->Set(key, absl::string_view(data.data(), data.size()));
  if (!s.ok()) Throw(s);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  absl::StatusOr<std::string> value = store_->Get(key, timeout_);
  if (!value.ok()) Throw(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  absl::Status s = store_->Wait(keys, timeout_);
  if (!s.ok()) Throw(s);
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  // gloo passes kNoTimeout (0) for "use your default".
  const absl::Duration t = timeout.count() > 0 ? absl::FromChrono(timeout) : timeout_;
  absl::Status s = store_->Wait(keys, t);
  if (!s.ok()) Throw(s);
}

}  // namespace weft::comm
