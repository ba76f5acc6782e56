#include "core/parallel/strategy_registry.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, StrategyFactory> factories;
  std::map<std::string, int> abi;  // by name, from RegisterStrategyAtStartup
};

Registry& GetRegistry() {
  static auto* r = new Registry;
  return *r;
}

// dlerror's "undefined symbol: _ZN4weft..." with the C++ name beside it.
std::string DemangleUndefinedSymbol(const std::string& err) {
  const std::string marker = "undefined symbol: ";
  const size_t at = err.find(marker);
  if (at == std::string::npos) return err;
  const size_t start = at + marker.size();
  size_t end = start;
  while (end < err.size() && err[end] != ' ' && err[end] != ',' && err[end] != ')') ++end;
  const std::string mangled = err.substr(start, end - start);
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (plain == nullptr) return err;
  const std::string out = absl::StrCat(err, " (", plain, ")");
  std::free(plain);
  return out;
}

// Removes the strategies registered since `before` whose ABI is not this
// binary's, returning them with theirs.
std::vector<std::pair<std::string, int>> UnregisterOtherAbi(const std::vector<std::string>& before) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  const std::set<std::string> old(before.begin(), before.end());
  std::vector<std::pair<std::string, int>> stale;
  for (const auto& [name, abi] : r.abi) {
    if (!old.contains(name) && abi != kStrategyAbiVersion) stale.emplace_back(name, abi);
  }
  for (const auto& [name, abi] : stale) {
    r.factories.erase(name);
    r.abi.erase(name);
  }
  return stale;
}

}  // namespace

void RegisterStrategy(absl::string_view name, StrategyFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  WEFT_CHECK(r.factories.count(std::string(name)) == 0)
      << "strategy '" << name << "' is registered twice: two plugins claim the same name";
  r.factories.emplace(std::string(name), std::move(factory));
}

bool RegisterStrategyAtStartup(absl::string_view name, StrategyFactory factory, int abi) {
  RegisterStrategy(name, std::move(factory));
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.abi[std::string(name)] = abi;
  return true;
}

bool RegisterStrategyAtStartup(absl::string_view name, StrategyFactory factory) {
  return RegisterStrategyAtStartup(name, std::move(factory), 0);
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
  const std::vector<std::string> before_names = RegisteredStrategies();
  const size_t before = before_names.size();
  // RTLD_GLOBAL so the plugin resolves weft's symbols from this binary.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    const std::string what = err != nullptr ? DemangleUndefinedSymbol(err) : "unknown error";
    const bool undefined = what.find("undefined symbol") != std::string::npos;
    return FailedPrecondition(
        absl::StrCat("cannot load strategy plugin '", path, "': ", what),
        "a shared object built against this weft",
        undefined ? "the plugin calls weft code this binary lacks: rebuild the plugin against "
                    "this weft, and link the training binary with -rdynamic (weft's are)"
                  : "build it as a cc_binary with linkshared = True");
  }
  if (loaded->contains(handle)) return absl::OkStatus();
  // Registrations run in the library's constructors, during dlopen.
  if (RegisteredStrategies().size() == before) {
    return FailedPrecondition(absl::StrCat("strategy plugin '", path, "' registered no strategy"),
                              "a shared object that registers one with WEFT_REGISTER_STRATEGY",
                              "check that --plugin names the plugin's .so and that its "
                              "WEFT_REGISTER_STRATEGY line is compiled into it");
  }
  // Another ABI: its strategies would read weft's structs at other offsets.
  // Refused before any of its factories runs.
  const std::vector<std::pair<std::string, int>> stale = UnregisterOtherAbi(before_names);
  if (!stale.empty()) {
    std::vector<std::string> named;
    for (const auto& [name, abi] : stale) named.push_back(absl::StrCat(name, " (ABI ", abi, ")"));
    return FailedPrecondition(
        absl::StrCat("strategy plugin '", path, "' was built against another weft: ",
                     absl::StrJoin(named, ", "), "; this binary has plugin ABI ",
                     kStrategyAbiVersion),
        "a plugin compiled against this weft's headers (//core/parallel:plugin_sdk)",
        "rebuild the plugin from this checkout");
  }
  loaded->insert(handle);
  return absl::OkStatus();
}

}  // namespace weft
