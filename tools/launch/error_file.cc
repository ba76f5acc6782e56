#include "tools/launch/error_file.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/json.h"

namespace weft::launch {

void RecordFailure(absl::string_view message) {
  const absl::Time now = absl::Now();
  if (const char* path = std::getenv(kErrorFileEnv); path != nullptr && *path != '\0') {
    std::ofstream(path, std::ios::trunc) << absl::ToUnixNanos(now) << "\n" << message;
  }
  // torchrun's own error file: its summary then shows this error as the
  // failure's message, and orders the ranks' failures by the timestamp.
  if (const char* path = std::getenv(kTorchrunErrorFileEnv); path != nullptr && *path != '\0') {
    std::ofstream(path, std::ios::trunc) << "{\"message\": \"" << JsonEscape(message)
                                         << "\", \"timestamp\": " << absl::ToUnixSeconds(now)
                                         << "}\n";
  }
}

std::optional<RecordedFailure> ReadFailure(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string first;
  if (!std::getline(in, first)) return std::nullopt;
  RecordedFailure f;
  if (!absl::SimpleAtoi(first, &f.unix_ns)) return std::nullopt;
  f.message.assign(std::istreambuf_iterator<char>(in), {});
  return f;
}

}  // namespace weft::launch
