// Error files: how a launcher tells the rank that failed first from the
// ranks that failed because of it. When one rank dies, its peers fail too
// ("connection closed by rank 2"), and the launcher may reap one of them
// first; each worker's failure, written with its time to the file the
// launcher names in WEFT_ERROR_FILE, orders them.
#ifndef WEFT_TOOLS_LAUNCH_ERROR_FILE_H_
#define WEFT_TOOLS_LAUNCH_ERROR_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace weft::launch {

inline constexpr char kErrorFileEnv[] = "WEFT_ERROR_FILE";
// Set by torchrun for each worker; read into its failure summary.
inline constexpr char kTorchrunErrorFileEnv[] = "TORCHELASTIC_ERROR_FILE";

// Writes the current time and `message` to $WEFT_ERROR_FILE, and as JSON
// ({"message": ..., "timestamp": seconds}) to $TORCHELASTIC_ERROR_FILE,
// when set. Best effort: a worker that cannot write them fails the same way.
void RecordFailure(absl::string_view message);

struct RecordedFailure {
  int64_t unix_ns = 0;  // when the worker recorded it
  std::string message;
};

// The failure a worker recorded in `path`; nullopt when it wrote none (it
// was killed, or it is not a weft program).
std::optional<RecordedFailure> ReadFailure(const std::string& path);

}  // namespace weft::launch

#endif  // WEFT_TOOLS_LAUNCH_ERROR_FILE_H_
