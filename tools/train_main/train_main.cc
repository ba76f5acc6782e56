#include "tools/train_main/train_main.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/parallel/strategy_options.h"
#include "core/parallel/strategy_registry.h"
#include "core/runtime/config_loader.h"
#include "core/runtime/stop_signals.h"
#include "tools/launch/error_file.h"
#include "tools/launch/relaunch.h"

namespace weft {

void ResolveCheckpointPaths(TrainConfig* config) {
  config->set_checkpoint_dir(ResolveUserPath(config->checkpoint_dir()));
  if (config->resume() != "latest" && config->resume() != "auto") {
    config->set_resume(ResolveUserPath(config->resume()));
  }
}

namespace {

// Resolves the job's train.parallel.plugin paths against the user's
// directory (bazel run starts in the runfiles) and returns them; none for a
// job without that field.
std::vector<std::string> ResolvePlugins(google::protobuf::Message* job) {
  google::protobuf::Message* m = job;
  for (const char* name : {"train", "parallel"}) {
    const google::protobuf::FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(name);
    if (f == nullptr || f->message_type() == nullptr) return {};
    m = m->GetReflection()->MutableMessage(m, f);
  }
  const google::protobuf::FieldDescriptor* f = m->GetDescriptor()->FindFieldByName("plugin");
  if (f == nullptr || f->type() != google::protobuf::FieldDescriptor::TYPE_STRING) return {};
  std::vector<std::string> paths;
  for (absl::string_view p : absl::StrSplit(m->GetReflection()->GetString(*m, f), ',',
                                            absl::SkipEmpty())) {
    // A bare name ("libfoo.so") is for the dynamic linker's search path.
    const std::string path(p);
    paths.push_back(path.find('/') == std::string::npos ? path : ResolveUserPath(path));
  }
  if (!paths.empty()) m->GetReflection()->SetString(m, f, absl::StrJoin(paths, ","));
  return paths;
}

}  // namespace

int TrainMain(int argc, char** argv, const std::string& usage, google::protobuf::Message* job,
              const std::function<absl::Status()>& run) {
  // --nproc_per_node=N (and the other launch flags): become the launcher of
  // N copies of this binary, or, as a worker, just drop those flags.
  absl::StatusOr<launch::RelaunchResult> relaunch = launch::MaybeRelaunchSelf(&argc, argv);
  if (!relaunch.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(relaunch.status().message()).c_str());
    // Launch flags that do not fit are usage errors; a failed launch is 1.
    return relaunch.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (relaunch->relaunched) return relaunch->exit_code;
  std::vector<std::string> args;
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help = true;
      continue;
    }
    if (absl::StartsWith(a, "--config=")) a = "--config=" + ResolveUserPath(a.substr(9));
    args.push_back(a);
  }
  absl::Status parsed = LoadConfigFromArgs(args, job);
  const std::vector<std::string> plugin_paths = ResolvePlugins(job);
  if (help) {
    // --plugin's strategies and their options are listed too.
    absl::Status plugins = absl::OkStatus();
    for (const std::string& p : plugin_paths) {
      if (plugins.ok()) plugins = LoadStrategyPlugin(p);
    }
    std::printf("%s\n\nFlags (current values):\n%s", usage.c_str(), DescribeConfig(*job).c_str());
    // Binaries that link no strategy (//models/gpt:sample) have none to list.
    const std::string strategies = DescribeRegisteredStrategies();
    if (!strategies.empty()) {
      std::printf("\nStrategies (--strategy) and their options "
                  "(--strategy_options=key=value,... or strategy.key=value):\n%s",
                  strategies.c_str());
    }
    if (!plugins.ok()) std::fprintf(stderr, "error: %s\n", std::string(plugins.message()).c_str());
    return parsed.ok() && plugins.ok() ? 0 : 2;
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  absl::Status s = run();
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    // For a launcher: when peers fail because this rank did, this is first.
    launch::RecordFailure(absl::StrCat("error: ", s.ToString()));
    return 1;
  }
  // Stopped early by SIGTERM/SIGUSR1 after a checkpoint: the status a shell
  // gives a process the signal ended, so a script sees the run unfinished.
  if (const int sig = StoppedBySignal(); sig != 0) return 128 + sig;
  return 0;
}

}  // namespace weft
