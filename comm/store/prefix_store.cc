#include "comm/store/prefix_store.h"

#include "absl/strings/str_cat.h"

namespace weft::comm {

std::string PrefixStore::Join(absl::string_view key) const {
  return absl::StrCat(prefix_, "/", key);
}

std::vector<std::string> PrefixStore::JoinAll(absl::Span<const std::string> keys) const {
  std::vector<std::string> joined;
  joined.reserve(keys.size());
  for (const std::string& k : keys) joined.push_back(Join(k));
  return joined;
}

absl::Status PrefixStore::Set(absl::string_view key, absl::string_view value) {
  return base_->Set(Join(key), value);
}

absl::StatusOr<std::string> PrefixStore::Get(absl::string_view key, absl::Duration timeout) {
  return base_->Get(Join(key), timeout);
}

absl::StatusOr<int64_t> PrefixStore::Add(absl::string_view key, int64_t delta) {
  return base_->Add(Join(key), delta);
}

absl::StatusOr<std::string> PrefixStore::CompareSet(absl::string_view key,
                                                    absl::string_view expected,
                                                    absl::string_view desired) {
  return base_->CompareSet(Join(key), expected, desired);
}

absl::Status PrefixStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  return base_->Wait(JoinAll(keys), timeout);
}

absl::StatusOr<bool> PrefixStore::Check(absl::Span<const std::string> keys) {
  return base_->Check(JoinAll(keys));
}

absl::StatusOr<bool> PrefixStore::DeleteKey(absl::string_view key) {
  return base_->DeleteKey(Join(key));
}

}  // namespace weft::comm
