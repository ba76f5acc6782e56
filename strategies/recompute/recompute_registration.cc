#include "core/parallel/strategy_registry.h"
#include "strategies/recompute/recompute.h"

WEFT_REGISTER_STRATEGY(recompute, weft::RecomputeStrategy::Create);
