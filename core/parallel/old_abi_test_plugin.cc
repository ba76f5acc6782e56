// A plugin compiled against another plugin ABI (the BUILD sets
// WEFT_STRATEGY_ABI_BUILT=0): LoadStrategyPlugin must refuse it.
#include <memory>

#include "core/parallel/strategy_registry.h"

WEFT_REGISTER_STRATEGY(old_abi_test, [] { return std::unique_ptr<weft::Strategy>(); });
