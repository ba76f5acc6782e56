// KvTable: the single-threaded key-value semantics shared by every store
// (HashStore wraps it in a mutex, the TCP server in its event loop, FileStore
// rebuilds it from the log), so Add and CompareSet behave identically
// everywhere.
#ifndef WEFT_COMM_STORE_KV_TABLE_H_
#define WEFT_COMM_STORE_KV_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace weft::comm {

class KvTable {
 public:
  void Set(absl::string_view key, absl::string_view value);
  // nullptr when missing. Invalidated by the next mutation.
  const std::string* Find(absl::string_view key) const;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta);
  std::string CompareSet(absl::string_view key, absl::string_view expected,
                         absl::string_view desired);
  bool Delete(absl::string_view key);
  int64_t size() const { return static_cast<int64_t>(map_.size()); }
  // The keys of `keys` that are not present, in order.
  std::vector<std::string> Missing(absl::Span<const std::string> keys) const;

 private:
  absl::flat_hash_map<std::string, std::string> map_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_STORE_KV_TABLE_H_
