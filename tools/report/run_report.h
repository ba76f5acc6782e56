// --report=path.html for training binaries: the report is built from the
// run's metrics file at the end, so the run needs one (run_metrics.h).
#ifndef WEFT_TOOLS_REPORT_RUN_REPORT_H_
#define WEFT_TOOLS_REPORT_RUN_REPORT_H_

#include "absl/status/status.h"
#include "core/runtime/train_config.pb.h"

namespace weft::report {

// Before the trainer starts: resolves --report against the caller's
// directory and, without --metrics_out, sends the metrics to
// <report>.jsonl so the report has something to read.
void PrepareRunReport(TrainConfig* config);

// After training: rank 0 writes the report (no-op without --report).
absl::Status FinishRunReport(const TrainConfig& config, int rank);

}  // namespace weft::report

#endif  // WEFT_TOOLS_REPORT_RUN_REPORT_H_
