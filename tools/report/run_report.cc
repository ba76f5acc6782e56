#include "tools/report/run_report.h"

#include <cstdio>

#include "tools/report/report_html.h"
#include "tools/train_main/train_main.h"

namespace weft::report {

void PrepareRunReport(TrainConfig* config) {
  if (config->report().empty()) return;
  config->set_report(ResolveUserPath(config->report()));
  if (config->metrics_out().empty()) config->set_metrics_out(config->report() + ".jsonl");
}

absl::Status FinishRunReport(const TrainConfig& config, int rank) {
  if (config.report().empty() || rank != 0) return absl::OkStatus();
  absl::Status s = WriteReport({config.metrics_out()}, config.report());
  if (s.ok()) std::printf("report: %s\n", config.report().c_str());
  return s;
}

}  // namespace weft::report
