// From the job's text to each applied strategy's typed options.
//
// Values come from --strategy_options=key=value,... where a key is an
// option name ("bucket_mb", given to every applied strategy declaring it)
// or "<strategy>.<name>" ("zero.bucket_mb", to that one). A key no applied
// strategy declares is an error that lists the valid keys per strategy.
// The convenience flags (--zero_stage, --bucket_mb, ...) arrive as
// `from_flags`: they go to the applied strategies that declare them and are
// unused otherwise (the run notes each unused one: UnreadFlagNotes);
// --strategy_options wins over them.
#ifndef WEFT_CORE_PARALLEL_STRATEGY_OPTIONS_H_
#define WEFT_CORE_PARALLEL_STRATEGY_OPTIONS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/parallel/option_schema.h"
#include "core/parallel/strategy.h"

namespace weft {

struct StrategyOptionValues {
  std::map<std::string, std::string> given;       // --strategy_options
  std::map<std::string, std::string> from_flags;  // --zero_stage, ... (set ones only)
};

// "a=1,b=x" -> {a: 1, b: x}. Empty parts are skipped; a part without '=' or
// a repeated key is an error.
absl::StatusOr<std::map<std::string, std::string>> ParseOptionList(const std::string& list);

// Parses `text` as the option `spec` of `strategy` (which names it in errors).
absl::StatusOr<OptionValue> ParseOptionValue(const std::string& strategy, const OptionSpec& spec,
                                             const std::string& text);

// One set per strategy, in the order given.
absl::StatusOr<std::vector<StrategyOptionSet>> ResolveStrategyOptions(
    const std::vector<const Strategy*>& strategies, const StrategyOptionValues& values);

// A note for each convenience flag (from_flags) that no strategy in
// `names` declares: it changes nothing, which the user should hear rather
// than assume (--zero_stage=2 beside --strategy=ddp trains ddp). Names that
// are not registered are skipped (composing reports them).
std::vector<std::string> UnreadFlagNotes(const std::vector<std::string>& names,
                                         const StrategyOptionValues& values);

// "  bucket_mb (double, default 25): ..." lines for one schema.
std::string DescribeOptionSchema(const OptionSchema& schema);
// Every registered strategy with its options, for --help.
std::string DescribeRegisteredStrategies();

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_STRATEGY_OPTIONS_H_
