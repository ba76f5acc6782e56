#include "comm/store/kv_table.h"

#include "absl/strings/str_cat.h"
#include "comm/store/store.h"

namespace weft::comm {

void KvTable::Set(absl::string_view key, absl::string_view value) {
  map_[key] = std::string(value);
}

const std::string* KvTable::Find(absl::string_view key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

absl::StatusOr<int64_t> KvTable::Add(absl::string_view key, int64_t delta) {
  int64_t value = 0;
  if (const std::string* current = Find(key)) {
    absl::StatusOr<int64_t> parsed = ParseCounter(key, *current);
    if (!parsed.ok()) return parsed.status();
    value = *parsed;
  }
  // Wrap like two's complement instead of overflowing (undefined behavior).
  value = static_cast<int64_t>(static_cast<uint64_t>(value) + static_cast<uint64_t>(delta));
  map_[key] = absl::StrCat(value);
  return value;
}

std::string KvTable::CompareSet(absl::string_view key, absl::string_view expected,
                                absl::string_view desired) {
  const std::string* current = Find(key);
  const absl::string_view now = current == nullptr ? absl::string_view() : *current;
  if (now == expected) {
    map_[key] = std::string(desired);
    return std::string(desired);
  }
  return std::string(now);
}

bool KvTable::Delete(absl::string_view key) {
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  map_.erase(it);
  return true;
}

std::vector<std::string> KvTable::Missing(absl::Span<const std::string> keys) const {
  std::vector<std::string> missing;
  for (const std::string& k : keys) {
    if (Find(k) == nullptr) missing.push_back(k);
  }
  return missing;
}

}  // namespace weft::comm
