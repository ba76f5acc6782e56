// Moving materialized values into a parallel replacement module: each new
// parameter gets its local box of the old (whole) parameter of the same
// local name, so a tp-sharded model holds exactly the slices of the
// single-process initialization (or of loaded weights).
#ifndef WEFT_STRATEGIES_TP_ADOPT_VALUES_H_
#define WEFT_STRATEGIES_TP_ADOPT_VALUES_H_

#include "absl/status/status.h"
#include "core/nn/materialize.h"
#include "core/nn/module.h"

namespace weft::tp {

struct AdoptOptions {
  ReplaceOptions tensors;
  DType grad_dtype = DType::kF32;  // when the old parameter has no gradient
};

// For every own parameter of `fresh`: value = its box of the same-named
// own parameter of `old` (whose value is the whole tensor, in any shape of
// the same size), grad = zeros. Nothing to do when `old` is not
// materialized yet (materialization then initializes the local box).
absl::Status AdoptValues(const Module& old, Module& fresh, const AdoptOptions& options);

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_ADOPT_VALUES_H_
