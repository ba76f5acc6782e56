#include "core/parallel/strategy_registry.h"
#include "strategies/ddp/ddp.h"

WEFT_REGISTER_STRATEGY(ddp, weft::DdpStrategy::Create);
