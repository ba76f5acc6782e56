#include "core/parallel/strategy_registry.h"
#include "strategies/cp/cp.h"

WEFT_REGISTER_STRATEGY(cp, weft::ContextParallelStrategy::Create);
