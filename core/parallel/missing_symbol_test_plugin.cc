// A plugin that calls a weft function the host binary lacks (as one built
// against a newer weft would): dlopen fails, and the error names it in C++.
#include <memory>

#include "core/parallel/strategy_registry.h"

namespace weft {
void FunctionThisBinaryLacks(int);
}  // namespace weft

WEFT_REGISTER_STRATEGY(missing_symbol_test, [] {
  weft::FunctionThisBinaryLacks(1);
  return std::unique_ptr<weft::Strategy>();
});
