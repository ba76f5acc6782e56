#include "core/parallel/strategy_registry.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, StrategyFactory> factories;
};

Registry& GetRegistry() {
  static auto* r = new Registry;
  return *r;
}

}  // namespace

void RegisterStrategy(absl::string_view name, StrategyFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  WEFT_CHECK(r.factories.count(std::string(name)) == 0)
      << "strategy '" << name << "' is registered twice: two plugins claim the same name";
  r.factories.emplace(std::string(name), std::move(factory));
}

bool RegisterStrategyAtStartup(absl::string_view name, StrategyFactory factory) {
  RegisterStrategy(name, std::move(factory));
  return true;
}

std::vector<std::string> RegisteredStrategies() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [n, f] : r.factories) names.push_back(n);
  return names;
}

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(absl::string_view name) {
  StrategyFactory factory;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(std::string(name));
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    const std::vector<std::string> names = RegisteredStrategies();
    return NotFound(absl::StrCat("unknown strategy '", name, "'"),
                    absl::StrCat("one of the registered strategies: ",
                                 names.empty() ? "(none)" : absl::StrJoin(names, ", ")),
                    "load out-of-tree strategies with --plugin=path.so");
  }
  std::unique_ptr<Strategy> s = factory();
  if (s == nullptr) return Internal(absl::StrCat("factory of strategy '", name, "' returned null"));
  return s;
}

absl::Status LoadStrategyPlugin(const std::string& path) {
  static std::mutex mu;
  static auto* loaded = new std::set<void*>;  // a second load of one file registers nothing
  std::lock_guard<std::mutex> lock(mu);
  const size_t before = RegisteredStrategies().size();
  // RTLD_GLOBAL so the plugin resolves weft's symbols from this binary.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return FailedPrecondition(absl::StrCat("cannot load strategy plugin '", path,
                                           "': ", err ? err : "unknown error"),
                              "a shared object built against this weft",
                              "build it as a cc_binary with linkshared = True");
  }
  if (loaded->contains(handle)) return absl::OkStatus();
  // Registrations run in the library's constructors, during dlopen.
  if (RegisteredStrategies().size() == before) {
    return FailedPrecondition(absl::StrCat("strategy plugin '", path, "' registered no strategy"),
                              "a shared object that registers one with WEFT_REGISTER_STRATEGY",
                              "check that --plugin names the plugin's .so and that its "
                              "WEFT_REGISTER_STRATEGY line is compiled into it");
  }
  loaded->insert(handle);
  return absl::OkStatus();
}

}  // namespace weft
