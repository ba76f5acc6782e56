// tp=1 on one rank against the same job without tp, in this process (an
// in-memory store): tp then swaps every planned layer for its parallel
// version and runs the vocabulary-parallel embedding and loss, with
// collectives over a group of one. The numbers must not change beyond
// rounding, on CPU (gloo) and on CUDA (NCCL).
#ifndef WEFT_TESTS_TP_SINGLE_RANK_H_
#define WEFT_TESTS_TP_SINGLE_RANK_H_

#include <string>

#include "models/gpt/gpt_config.pb.h"

namespace weft::testing {

// Trains `job` for `steps` steps plain and with --strategy=tp --tp=1 over
// `backend`, and expects per-step losses within loss_rtol and parameters
// within param_tol (relative to max(1, |x|)); prints the differences.
void ExpectTp1MatchesPlain(GptJob job, const std::string& backend, int steps, double loss_rtol,
                           double param_tol);

}  // namespace weft::testing

#endif  // WEFT_TESTS_TP_SINGLE_RANK_H_
