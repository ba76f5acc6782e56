#include "core/base/user_path.h"

#include <cstdlib>

namespace weft {

std::string ResolveUserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  return cwd != nullptr ? std::string(cwd) + "/" + path : path;
}

}  // namespace weft
