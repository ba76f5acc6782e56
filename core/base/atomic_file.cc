#include "core/base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {

absl::StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Open(const std::string &path) {
  // Found before the file is written, not as a rename error after it.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument(absl::StrCat("'", path, "' is a directory"), "a file to write",
                           absl::StrCat("name a file inside it, e.g. '", path, "/out'"));
  }
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    const int err = errno;
    // The hint for what the error says: a missing directory, or one this
    // process may not write (permissions, a read-only filesystem).
    return InvalidArgument(absl::StrCat("cannot create '", tmp, "': ", std::strerror(err)),
                           "a writable directory",
                           err == ENOENT ? "create the output directory first"
                                         : "write the output to a directory this user can write");
  }
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, std::move(tmp), f));
}

AtomicFileWriter::AtomicFileWriter(std::string path, std::string tmp, std::FILE *file)
    : path_(std::move(path)), tmp_(std::move(tmp)), file_(file) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

absl::Status AtomicFileWriter::Write(absl::string_view bytes) {
  if (file_ == nullptr) {
    return FailedPrecondition(absl::StrCat("write to '", path_, "' after Commit"),
                              "all writes before Commit");
  }
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return Internal(absl::StrCat("short write to '", tmp_, "': ", std::strerror(errno)), "",
                    "check free disk space");
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (file_ == nullptr) {
    return FailedPrecondition(absl::StrCat("'", path_, "' committed twice"), "one Commit");
  }
  std::FILE *f = file_;
  file_ = nullptr;
  // fflush moves stdio's buffer to the kernel; fsync moves the kernel's to
  // disk.
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!flushed || !closed) {
    std::remove(tmp_.c_str());
    return Internal(absl::StrCat("cannot flush '", tmp_, "': ", std::strerror(flush_errno)), "",
                    "check free disk space");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_.c_str());
    return Internal(
        absl::StrCat("cannot rename '", tmp_, "' to '", path_, "': ", std::strerror(err)));
  }
  // The rename itself is durable only once the directory entry is synced.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace weft
