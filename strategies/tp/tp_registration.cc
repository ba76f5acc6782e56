#include "core/parallel/strategy_registry.h"
#include "strategies/tp/tp.h"

WEFT_REGISTER_STRATEGY(tp, weft::TensorParallelStrategy::CreateTp);
WEFT_REGISTER_STRATEGY(sp, weft::TensorParallelStrategy::CreateSp);
