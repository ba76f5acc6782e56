#include "core/parallel/strategy_registry.h"
#include "strategies/zero/zero.h"

WEFT_REGISTER_STRATEGY(zero, weft::ZeroStrategy::Create);
