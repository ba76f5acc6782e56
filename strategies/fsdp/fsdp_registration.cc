#include "core/parallel/strategy_registry.h"
#include "strategies/fsdp/fsdp.h"

WEFT_REGISTER_STRATEGY(fsdp, weft::FsdpStrategy::Create);
