// Small file helpers shared by the data package and its tools: whole-file
// reads, atomic writes (temporary name + rename, so a crash never leaves a
// half-written shard or tokenizer under the final name), and listings.
#ifndef WEFT_DATA_FILE_UTIL_H_
#define WEFT_DATA_FILE_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::data {

// The whole file as bytes. NotFound names the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `contents` to `path` through `path.tmp.<pid>` and a rename.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

bool IsDirectory(const std::string& path);
bool FileExists(const std::string& path);

// Regular files directly inside `dir` whose name contains `contains` and ends
// with `suffix`, as full paths in lexicographic order (shard order).
absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& dir,
                                                   absl::string_view contains,
                                                   absl::string_view suffix);

std::string JoinPath(absl::string_view dir, absl::string_view name);

}  // namespace weft::data

#endif  // WEFT_DATA_FILE_UTIL_H_
