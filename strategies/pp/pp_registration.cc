#include "core/parallel/strategy_registry.h"
#include "strategies/pp/pp.h"

WEFT_REGISTER_STRATEGY(pp, weft::PipelineStrategy::Create);
