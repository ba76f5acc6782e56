// The strategy registry: names to factories.
//
// Built-in strategies register from a tiny *_registration.cc in an
// alwayslink target:
//   WEFT_REGISTER_STRATEGY(fsdp, FsdpStrategy::Create);
// Out-of-tree plugins are shared objects loaded with LoadStrategyPlugin
// (--plugin=path.so); their registration runs when the library loads.
// A duplicate name is a hard error (abort at load time); an unknown name is
// NotFound and lists the registered names. Each registration records the
// plugin ABI it was compiled against, and a plugin of another ABI is
// refused at load, before any of its code runs on weft's structs.
#ifndef WEFT_CORE_PARALLEL_STRATEGY_REGISTRY_H_
#define WEFT_CORE_PARALLEL_STRATEGY_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/parallel/strategy.h"

namespace weft {

using StrategyFactory = std::function<std::unique_ptr<Strategy>()>;

// The plugin ABI: what a strategy compiled elsewhere relies on (Strategy,
// StepParticipant, StrategyContext, ParallelState, the tensor and comm
// types in plugin_sdk). Bump it when one of them changes layout or meaning.
// 2: Apply returns a StrategyResult; StrategyContext::applied replaced
// the writable state; After, JoinsUnnamed, Implies, KeepsParametersWhole
// and CapturableInStepGraph were added.
// 3: HintBesideDataParallel was added.
inline constexpr int kStrategyAbiVersion = 3;

// Aborts on a duplicate name (a programmer error: two plugins claim it).
void RegisterStrategy(absl::string_view name, StrategyFactory factory);
// `abi`: the kStrategyAbiVersion the registering code was compiled with.
bool RegisterStrategyAtStartup(absl::string_view name, StrategyFactory factory, int abi);
// Plugins built before ABI versions call this one: ABI 0.
bool RegisterStrategyAtStartup(absl::string_view name, StrategyFactory factory);

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(absl::string_view name);
std::vector<std::string> RegisteredStrategies();  // sorted

// dlopen()s a plugin; its static registrations run. Errors carry dlerror().
absl::Status LoadStrategyPlugin(const std::string& path);

}  // namespace weft

// Tests build a plugin of another ABI by defining this.
#ifndef WEFT_STRATEGY_ABI_BUILT
#define WEFT_STRATEGY_ABI_BUILT ::weft::kStrategyAbiVersion
#endif

#define WEFT_STRATEGY_CONCAT_INNER_(a, b) a##b
#define WEFT_STRATEGY_CONCAT_(a, b) WEFT_STRATEGY_CONCAT_INNER_(a, b)
#define WEFT_REGISTER_STRATEGY(name, factory)                                        \
  static const bool WEFT_STRATEGY_CONCAT_(weft_strategy_registered_, __COUNTER__) = \
      ::weft::RegisterStrategyAtStartup(#name, factory, WEFT_STRATEGY_ABI_BUILT)

#endif  // WEFT_CORE_PARALLEL_STRATEGY_REGISTRY_H_
