// AtomicFileWriter: streams bytes to `path.tmp.<pid>`, then Commit() flushes,
// fsyncs, renames over `path` and fsyncs the directory, so a crash at any
// point leaves either the previous file or the complete new one under
// `path`, never a torn one. Abandoning the writer (no Commit) removes the
// temporary file.
#ifndef WEFT_CORE_BASE_ATOMIC_FILE_H_
#define WEFT_CORE_BASE_ATOMIC_FILE_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft {

class AtomicFileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<AtomicFileWriter>> Open(const std::string &path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;

  absl::Status Write(absl::string_view bytes);
  // Makes the file durable under its final name. The writer is closed after.
  absl::Status Commit();

  const std::string &temp_path() const { return tmp_; }

 private:
  AtomicFileWriter(std::string path, std::string tmp, std::FILE *file);

  std::string path_, tmp_;
  std::FILE *file_;
};

}  // namespace weft

#endif  // WEFT_CORE_BASE_ATOMIC_FILE_H_
