#include "core/parallel/strategy_registry.h"
#include "strategies/dp/dp.h"

WEFT_REGISTER_STRATEGY(dp, weft::DpStrategy::Create);
