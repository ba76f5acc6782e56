#include "tools/launch/launch_options.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::launch {
namespace {

absl::StatusOr<int> ParseInt(absl::string_view flag, absl::string_view value) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return InvalidArgument(absl::StrCat("--", flag, "=", value, " is not an integer"),
                           "a decimal integer");
  }
  return n;
}

}  // namespace

absl::StatusOr<OutputMode> ParseOutputMode(absl::string_view text) {
  if (text == "prefix") return OutputMode::kPrefix;
  if (text == "rank0") return OutputMode::kRank0;
  if (text == "raw") return OutputMode::kRaw;
  return InvalidArgument(absl::StrCat("output mode '", text, "'"), "prefix, rank0 or raw");
}

absl::Status LaunchOptions::Validate() const {
  if (nproc_per_node < 1) {
    return InvalidArgument(absl::StrCat("--nproc_per_node=", nproc_per_node),
                           "at least one worker per node");
  }
  // 1000 workers ran the machine out of memory after 95 s, one by one.
  constexpr int kMaxWorkersPerNode = 256;
  if (nproc_per_node > kMaxWorkersPerNode) {
    return InvalidArgument(absl::StrCat("--nproc_per_node=", nproc_per_node),
                           absl::StrCat("at most ", kMaxWorkersPerNode, " workers per node"),
                           "one worker per GPU, or a few CPU ranks per core; more ranks come "
                           "from more nodes (--nnodes)");
  }
  if (nnodes < 1) return InvalidArgument(absl::StrCat("--nnodes=", nnodes), "at least one node");
  if (node_rank < 0 || node_rank >= nnodes) {
    return InvalidArgument(absl::StrCat("--node_rank=", node_rank, " with --nnodes=", nnodes),
                           "0 <= node_rank < nnodes");
  }
  if (master_port < 0 || master_port > 65535) {
    return InvalidArgument(absl::StrCat("--master_port=", master_port), "a port in 0..65535");
  }
  if (nnodes > 1 && master_port == 0) {
    return InvalidArgument("--master_port is needed with --nnodes > 1",
                           "the same port on every node",
                           "pick a free port on the master node, e.g. --master_port=29500");
  }
  if (teardown_grace < absl::ZeroDuration()) {
    return InvalidArgument("a negative --teardown_grace_s", "seconds >= 0");
  }
  if (stop_grace < absl::ZeroDuration()) {
    return InvalidArgument("a negative --stop_grace_s", "seconds >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedLaunchArgs> ParseLaunchArgs(const std::vector<std::string>& args,
                                                 absl::string_view output_flag,
                                                 bool stop_at_first_positional) {
  ParsedLaunchArgs parsed;
  LaunchOptions& o = parsed.options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      // Everything after "--" belongs to the program.
      if (!stop_at_first_positional) parsed.rest.push_back(arg);
      parsed.rest.insert(parsed.rest.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (!absl::StartsWith(arg, "--")) {
      if (stop_at_first_positional) {
        parsed.rest.insert(parsed.rest.end(), args.begin() + i, args.end());
        break;
      }
      parsed.rest.push_back(arg);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const bool known = name == "nproc_per_node" || name == "nnodes" || name == "node_rank" ||
                       name == "master_addr" || name == "master_port" || name == output_flag ||
                       name == "teardown_grace_s" || name == "stop_grace_s";
    if (!known) {
      if (stop_at_first_positional) {
        return InvalidArgument(absl::StrCat("unknown launcher flag '", arg, "'"),
                               "launcher flags, then '--', then the program and its arguments",
                               "put the program's own flags after '--'");
      }
      parsed.rest.push_back(arg);
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return InvalidArgument(absl::StrCat("--", name, " has no value"), "--flag=value");
    }
    if (name == "nproc_per_node") {
      WEFT_ASSIGN_OR_RETURN(o.nproc_per_node, ParseInt(name, value));
      parsed.saw_nproc_per_node = true;
    } else if (name == "nnodes") {
      WEFT_ASSIGN_OR_RETURN(o.nnodes, ParseInt(name, value));
    } else if (name == "node_rank") {
      WEFT_ASSIGN_OR_RETURN(o.node_rank, ParseInt(name, value));
    } else if (name == "master_addr") {
      o.master_addr = value;
    } else if (name == "master_port") {
      WEFT_ASSIGN_OR_RETURN(o.master_port, ParseInt(name, value));
    } else if (name == "teardown_grace_s" || name == "stop_grace_s") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds)) {
        return InvalidArgument(absl::StrCat("--", name, "=", value), "a number of seconds");
      }
      (name == "stop_grace_s" ? o.stop_grace : o.teardown_grace) = absl::Seconds(seconds);
    } else {
      WEFT_ASSIGN_OR_RETURN(o.output, ParseOutputMode(value));
    }
  }
  WEFT_RETURN_IF_ERROR(o.Validate());
  return parsed;
}

}  // namespace weft::launch
