// HashStore: an in-memory Store shared by threads of one process. Tests run
// N ranks as threads over one HashStore; single-process jobs use it as the
// world store.
#ifndef WEFT_COMM_STORE_HASH_STORE_H_
#define WEFT_COMM_STORE_HASH_STORE_H_

#include <condition_variable>
#include <mutex>

#include "comm/store/kv_table.h"
#include "comm/store/store.h"

namespace weft::comm {

class HashStore : public Store {
 public:
  explicit HashStore(absl::Duration timeout = kDefaultStoreTimeout) : timeout_(timeout) {}

  using Store::Get;
  using Store::Wait;
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  absl::StatusOr<int64_t> NumKeys() override;
  absl::Duration timeout() const override { return timeout_; }

 private:
  const absl::Duration timeout_;
  std::mutex mu_;
  std::condition_variable changed_;
  KvTable table_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_STORE_HASH_STORE_H_
