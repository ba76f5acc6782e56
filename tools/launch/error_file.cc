#include "tools/launch/error_file.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace weft::launch {

void RecordFailure(absl::string_view message) {
  const char* path = std::getenv(kErrorFileEnv);
  if (path == nullptr || *path == '\0') return;
  std::ofstream out(path, std::ios::trunc);
  out << absl::ToUnixNanos(absl::Now()) << "\n" << message;
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
