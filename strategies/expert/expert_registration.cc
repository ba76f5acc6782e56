// Registers --strategy=expert.
#include "core/parallel/strategy_registry.h"
#include "strategies/expert/expert.h"

WEFT_REGISTER_STRATEGY(expert, weft::ExpertStrategy::Create);
