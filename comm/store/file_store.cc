#include "comm/store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "comm/util/deadline.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

constexpr uint8_t kSetRecord = 1;
constexpr uint8_t kDeleteRecord = 2;
constexpr size_t kHeaderBytes = 9;  // type, key length, value length

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

class FileStore::Lock {
 public:
  Lock(FileStore* store, bool exclusive) : store_(store), guard_(store->mu_) {
    while (::flock(store_->fd_.get(), exclusive ? LOCK_EX : LOCK_SH) != 0 && errno == EINTR) {
    }
  }
  ~Lock() { ::flock(store_->fd_.get(), LOCK_UN); }

 private:
  FileStore* store_;
  std::lock_guard<std::mutex> guard_;
};

absl::StatusOr<std::shared_ptr<FileStore>> FileStore::Create(const std::string& path,
                                                             absl::Duration timeout) {
  ScopedFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return InvalidArgument(absl::StrCat("cannot open FileStore file '", path, "': ",
                                        ErrnoMessage(errno)),
                           "a writable path on a filesystem every rank can see",
                           "create the directory first, or pick a path under /tmp or the job's "
                           "shared scratch directory");
  }
  return std::shared_ptr<FileStore>(new FileStore(path, std::move(fd), timeout));
}

absl::Status FileStore::RefreshLocked() {
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) {
    return Internal(absl::StrCat("fstat of FileStore '", path_, "' failed: ", ErrnoMessage(errno)));
  }
  if (st.st_size < offset_) {  // truncated behind our back: start over
    table_ = KvTable();
    offset_ = 0;
  }
  if (st.st_size == offset_) return absl::OkStatus();
  std::string data(static_cast<size_t>(st.st_size - offset_), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd_.get(), data.data() + got, data.size() - got, offset_ + got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Internal(absl::StrCat("reading FileStore '", path_, "' failed: ",
                                   n < 0 ? ErrnoMessage(errno) : "unexpected end of file"));
    }
    got += static_cast<size_t>(n);
  }
  size_t pos = 0;
  while (data.size() - pos >= kHeaderBytes) {
    const uint8_t type = static_cast<uint8_t>(data[pos]);
    const uint32_t klen = GetU32(&data[pos + 1]);
    const uint32_t vlen = GetU32(&data[pos + 5]);
    if (data.size() - pos - kHeaderBytes < static_cast<size_t>(klen) + vlen) break;
    const absl::string_view key(&data[pos + kHeaderBytes], klen);
    const absl::string_view value(&data[pos + kHeaderBytes + klen], vlen);
    if (type == kSetRecord) {
      table_.Set(key, value);
    } else if (type == kDeleteRecord) {
      table_.Delete(key);
    } else {
      return Internal(absl::StrCat("FileStore '", path_, "' is corrupt at byte ", offset_ + pos),
                      "a file written only by weft FileStores",
                      "delete the file and restart every rank");
    }
    pos += kHeaderBytes + klen + vlen;
  }
  offset_ += static_cast<off_t>(pos);
  return absl::OkStatus();
}

absl::Status FileStore::AppendLocked(bool is_delete, absl::string_view key,
                                     absl::string_view value) {
  std::string record;
  record.push_back(static_cast<char>(is_delete ? kDeleteRecord : kSetRecord));
  PutU32(&record, static_cast<uint32_t>(key.size()));
  PutU32(&record, static_cast<uint32_t>(value.size()));
  record.append(key.data(), key.size());
  record.append(value.data(), value.size());
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_.get(), record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Internal(absl::StrCat("writing FileStore '", path_, "' failed: ", ErrnoMessage(errno)));
    }
    done += static_cast<size_t>(n);
  }
  // Our own record is now part of the file; replay it like anyone else's.
  return RefreshLocked();
}

absl::Status FileStore::Set(absl::string_view key, absl::string_view value) {
  Lock lock(this, /*exclusive=*/true);
  return AppendLocked(false, key, value);
}

absl::StatusOr<int64_t> FileStore::Add(absl::string_view key, int64_t delta) {
  Lock lock(this, true);
  if (absl::Status s = RefreshLocked(); !s.ok()) return s;
  int64_t current = 0;
  if (const std::string* v = table_.Find(key)) {
    auto parsed = ParseCounter(key, *v);
    if (!parsed.ok()) return parsed.status();
    current = *parsed;
  }
  // Wrap like KvTable::Add instead of overflowing.
  const int64_t next =
      static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(delta));
  if (absl::Status s = AppendLocked(false, key, absl::StrCat(next)); !s.ok()) return s;
  return next;
}

absl::StatusOr<std::string> FileStore::CompareSet(absl::string_view key,
                                                  absl::string_view expected,
                                                  absl::string_view desired) {
  Lock lock(this, true);
  if (absl::Status s = RefreshLocked(); !s.ok()) return s;
  const std::string* current = table_.Find(key);
  const std::string now = current == nullptr ? std::string() : *current;
  if (now != expected) return now;
  if (absl::Status s = AppendLocked(false, key, desired); !s.ok()) return s;
  return std::string(desired);
}

absl::Status FileStore::PollFor(absl::Span<const std::string> keys, absl::Duration timeout,
                                std::string* first_value) {
  const Deadline deadline = Deadline::After(timeout);
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    std::vector<std::string> missing;
    {
      Lock lock(this, /*exclusive=*/false);
      if (absl::Status s = RefreshLocked(); !s.ok()) return s;
      missing = table_.Missing(keys);
      if (missing.empty()) {
        if (first_value != nullptr) *first_value = *table_.Find(keys[0]);
        return absl::OkStatus();
      }
    }
    if (deadline.Expired()) {
      return StoreTimeoutError(absl::StrCat("FileStore '", path_, "'"), keys, missing, timeout);
    }
    absl::SleepFor(std::min(backoff, deadline.Remaining()));
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
}

absl::StatusOr<std::string> FileStore::Get(absl::string_view key, absl::Duration timeout) {
  const std::string k(key);
  std::string value;
  if (absl::Status s = PollFor({&k, 1}, timeout, &value); !s.ok()) return s;
  return value;
}

absl::Status FileStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  return PollFor(keys, timeout, nullptr);
}

absl::StatusOr<bool> FileStore::Check(absl::Span<const std::string> keys) {
  Lock lock(this, false);
  if (absl::Status s = RefreshLocked(); !s.ok()) return s;
  return table_.Missing(keys).empty();
}

absl::StatusOr<bool> FileStore::DeleteKey(absl::string_view key) {
  Lock lock(this, true);
  if (absl::Status s = RefreshLocked(); !s.ok()) return s;
  if (table_.Find(key) == nullptr) return false;
  if (absl::Status s = AppendLocked(true, key, ""); !s.ok()) return s;
  return true;
}

absl::StatusOr<int64_t> FileStore::NumKeys() {
  Lock lock(this, false);
  if (absl::Status s = RefreshLocked(); !s.ok()) return s;
  return table_.size();
}

}  // namespace weft::comm
