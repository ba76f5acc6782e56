// Store: the key-value rendezvous every process group bootstraps from.
//
// Ranks publish addresses and ids under agreed keys and wait for each other's.
// Implementations: HashStore (threads of one process), FileStore (processes
// sharing a filesystem), TcpStore (processes on any host), and PrefixStore (a
// namespace inside another store, one per subgroup).
//
// Contract shared by every implementation:
//   - Values are arbitrary bytes. Add stores its counter as a decimal string,
//     so Get("n") after Add("n", 3) returns "3".
//   - Every blocking call (Get, Wait) takes a timeout and returns
//     absl::StatusCode::kDeadlineExceeded naming the missing keys when it
//     expires. Nothing in a Store blocks forever.
//   - All methods are thread-safe.
#ifndef WEFT_COMM_STORE_STORE_H_
#define WEFT_COMM_STORE_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace weft::comm {

// How long blocking store calls wait when the caller has no better number.
inline constexpr absl::Duration kDefaultStoreTimeout = absl::Seconds(300);

class Store {
 public:
  virtual ~Store() = default;

  // Sets `key` to `value`, replacing any previous value, and wakes waiters.
  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // The value of `key`, waiting up to `timeout` for it to be set.
  virtual absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) = 0;

  // Atomically adds `delta` to the integer at `key` (a missing key counts as
  // 0) and returns the new value. InvalidArgument if the value is not an
  // integer.
  virtual absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) = 0;

  // Atomically: if the current value equals `expected` (a missing key equals
  // the empty string), sets it to `desired`. Returns the value stored
  // afterwards ("" when the key is still missing).
  virtual absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                                 absl::string_view expected,
                                                 absl::string_view desired) = 0;

  // Waits until every key in `keys` exists. DeadlineExceeded lists the keys
  // still missing when `timeout` expires.
  virtual absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) = 0;

  // True when every key exists, without waiting.
  virtual absl::StatusOr<bool> Check(absl::Span<const std::string> keys) = 0;

  // Removes `key`; returns whether it existed.
  virtual absl::StatusOr<bool> DeleteKey(absl::string_view key) = 0;

  // Number of keys in the store (for a PrefixStore: in the store it wraps).
  virtual absl::StatusOr<int64_t> NumKeys() = 0;

  // The timeout this store was configured with; callers without a better
  // number pass it to Get and Wait.
  virtual absl::Duration timeout() const = 0;

  // Convenience forms that use timeout().
  absl::StatusOr<std::string> Get(absl::string_view key) { return Get(key, timeout()); }
  absl::Status Wait(absl::Span<const std::string> keys) { return Wait(keys, timeout()); }
};

// The error every store returns when Get/Wait time out: names the keys that
// are still missing, the ones that were asked for, and where to look.
absl::Status StoreTimeoutError(absl::string_view store_description,
                               absl::Span<const std::string> requested,
                               absl::Span<const std::string> missing, absl::Duration timeout);

// Parses a counter written by Add; InvalidArgument names the key otherwise.
absl::StatusOr<int64_t> ParseCounter(absl::string_view key, absl::string_view value);

}  // namespace weft::comm

#endif  // WEFT_COMM_STORE_STORE_H_
