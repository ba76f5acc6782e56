// Paths the user typed, as the program must open them.
#ifndef WEFT_CORE_BASE_USER_PATH_H_
#define WEFT_CORE_BASE_USER_PATH_H_

#include <string>

namespace weft {

// `path` made absolute against BUILD_WORKING_DIRECTORY (set by `bazel run`,
// which starts the program in its runfiles tree) when it is relative;
// unchanged otherwise.
std::string ResolveUserPath(const std::string& path);

}  // namespace weft

#endif  // WEFT_CORE_BASE_USER_PATH_H_
