#include "comm/store/hash_store.h"

#include "comm/util/deadline.h"

namespace weft::comm {

absl::Status HashStore::Set(absl::string_view key, absl::string_view value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    table_.Set(key, value);
  }
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> HashStore::Get(absl::string_view key, absl::Duration timeout) {
  const std::string k(key);
  absl::Status waited = Wait({&k, 1}, timeout);
  if (!waited.ok()) return waited;
  std::lock_guard<std::mutex> lock(mu_);
  const std::string* value = table_.Find(key);
  // Deleted between Wait and here: report it as the same timeout.
  if (value == nullptr) return StoreTimeoutError("HashStore", {&k, 1}, {&k, 1}, timeout);
  return *value;
}

absl::StatusOr<int64_t> HashStore::Add(absl::string_view key, int64_t delta) {
  absl::StatusOr<int64_t> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result = table_.Add(key, delta);
  }
  changed_.notify_all();
  return result;
}

absl::StatusOr<std::string> HashStore::CompareSet(absl::string_view key,
                                                  absl::string_view expected,
                                                  absl::string_view desired) {
  std::string result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result = table_.CompareSet(key, expected, desired);
  }
  changed_.notify_all();
  return result;
}

absl::Status HashStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool ready = changed_.wait_until(lock, Deadline::After(timeout).time_point(),
                                         [&] { return table_.Missing(keys).empty(); });
  if (ready) return absl::OkStatus();
  return StoreTimeoutError("HashStore", keys, table_.Missing(keys), timeout);
}

absl::StatusOr<bool> HashStore::Check(absl::Span<const std::string> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.Missing(keys).empty();
}

absl::StatusOr<bool> HashStore::DeleteKey(absl::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.Delete(key);
}

absl::StatusOr<int64_t> HashStore::NumKeys() {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.size();
}

}  // namespace weft::comm
