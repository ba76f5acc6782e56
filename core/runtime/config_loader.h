// Command-line configuration: a protobuf text file plus flag overrides.
//
//   train --config=models/gpt/configs/tiny.textproto --steps=50 --lr=1e-3
//
// Every field of the job message can be set by its dotted path
// (--train.optim.lr) or by any tail of it that is unique in the message tree
// (--optim.lr, --lr). Booleans also accept --name and --noname. Unknown or ambiguous names are
// errors that list the candidates; nothing is silently ignored.
#ifndef WEFT_CORE_RUNTIME_CONFIG_LOADER_H_
#define WEFT_CORE_RUNTIME_CONFIG_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace weft {

// Parses a text-format file into `message` (merging over its contents).
absl::Status LoadTextProto(const std::string& path, google::protobuf::Message* message);

// Sets one field by leaf name or dotted path from its text value.
absl::Status SetConfigField(google::protobuf::Message* message, absl::string_view key,
                            absl::string_view value);

// Applies argv: first --config=PATH (if present), then every --key=value in
// order. Arguments listed in `passthrough` (by key) are skipped and returned
// in *skipped for the caller.
absl::Status LoadConfigFromArgs(const std::vector<std::string>& args,
                                google::protobuf::Message* message,
                                const std::vector<std::string>& passthrough = {},
                                std::vector<std::string>* skipped = nullptr);

// One line per field: "--optim.lr (lr) = 0.0006", for --help.
std::string DescribeConfig(const google::protobuf::Message& message);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_CONFIG_LOADER_H_
