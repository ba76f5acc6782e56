// FileStore: a Store kept in one file on a filesystem every rank can see
// (a local disk for processes of one host, a shared filesystem across hosts).
//
// The file is an append-only log of set/delete records. Each operation holds
// an flock(2) on the file, replays records appended since its last look and
// appends its own, so any number of processes (and threads, through one
// FileStore or several) see one consistent table. Waiters poll the file.
//
// The file is not removed afterwards and a stale file from an earlier run
// would satisfy waits at once: give every job a fresh path (for example one
// that contains the job id). flock on NFS needs a lock daemon; prefer
// TcpStore across hosts when it is available.
#ifndef WEFT_COMM_STORE_FILE_STORE_H_
#define WEFT_COMM_STORE_FILE_STORE_H_

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>

#include "comm/store/kv_table.h"
#include "comm/store/store.h"
#include "comm/util/socket.h"

namespace weft::comm {

class FileStore : public Store {
 public:
  // Opens (creating if needed) the store file at `path`.
  static absl::StatusOr<std::shared_ptr<FileStore>> Create(
      const std::string& path, absl::Duration timeout = kDefaultStoreTimeout);

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

  const std::string& path() const { return path_; }

 private:
  FileStore(std::string path, ScopedFd fd, absl::Duration timeout)
      : path_(std::move(path)), fd_(std::move(fd)), timeout_(timeout) {}

  // RAII flock on fd_, held together with mu_.
  class Lock;
  absl::Status RefreshLocked();
  absl::Status AppendLocked(bool is_delete, absl::string_view key, absl::string_view value);
  // Waits (polling) until `keys` exist; optionally returns keys[0]'s value.
  absl::Status PollFor(absl::Span<const std::string> keys, absl::Duration timeout,
                       std::string* first_value);

  const std::string path_;
  ScopedFd fd_;
  const absl::Duration timeout_;
  std::mutex mu_;
  KvTable table_;  // the log replayed up to offset_
  off_t offset_ = 0;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_STORE_FILE_STORE_H_
