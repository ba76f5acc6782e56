#include "data/file_util.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft::data {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  // /dev/zero never ends and opening a FIFO blocks until a writer comes:
  // only regular files are read.
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    return InvalidArgument(absl::StrCat("'", path, "' is not a regular file"),
                           "a text or token file (or, for --data, a directory of them)",
                           "check the path");
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot open '", path, "': ", std::strerror(err));
    if (err == ENOENT) return NotFound(what, "an existing file", "check the path");
    return InvalidArgument(what, "a readable file");
  }
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Internal(absl::StrCat("read error on '", path, "'"));
  return out;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return InvalidArgument(absl::StrCat("cannot create '", tmp, "': ", std::strerror(errno)),
                           "a writable directory", "create the output directory first");
  }
  const bool wrote = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    std::remove(tmp.c_str());
    return Internal(absl::StrCat("short write to '", tmp, "' (disk full?)"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return Internal(absl::StrCat("cannot rename '", tmp, "' to '", path, "': ",
                                 std::strerror(err)));
  }
  return absl::OkStatus();
}

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

bool FileExists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& dir,
                                                   absl::string_view contains,
                                                   absl::string_view suffix) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return NotFound(absl::StrCat("cannot list '", dir, "': ", ec.message()),
                    "an existing directory");
  }
  std::vector<std::string> out;
  for (const fs::directory_entry& entry : it) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    if (absl::StrContains(name, contains) && absl::EndsWith(name, suffix)) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty()) return std::string(name);
  if (absl::EndsWith(dir, "/")) return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

}  // namespace weft::data
