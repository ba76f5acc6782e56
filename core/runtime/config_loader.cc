#include "core/runtime/config_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace weft {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

struct LeafPath {
  std::string dotted;                         // "optim.lr"
  std::vector<const FieldDescriptor*> chain;  // message fields, then the leaf
};

void CollectLeaves(const Descriptor* d, const std::string& prefix,
                   std::vector<const FieldDescriptor*> chain, std::vector<LeafPath>* out) {
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    auto c = chain;
    c.push_back(f);
    const std::string path = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      CollectLeaves(f->message_type(), path, c, out);
    } else {
      out->push_back({path, c});
    }
  }
}

// Protobuf's parse errors as text, instead of its log on stderr.
struct ErrorText : google::protobuf::io::ErrorCollector {
  std::string errors;
  void AddError(int line, int column, const std::string& msg) override {
    // Several errors are joined with "; " (none trailing: the status adds
    // "; expected ..." after them).
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", "line ", line + 1, ":", column + 1,
                    ": ", msg);
  }
};

absl::StatusOr<LeafPath> Resolve(const Message& m, absl::string_view key) {
  std::vector<LeafPath> leaves;
  CollectLeaves(m.GetDescriptor(), "", {}, &leaves);
  std::vector<LeafPath> hits;
  for (const LeafPath& l : leaves) {
    if (l.dotted == key) return l;
    // A tail of the path at a dot: the leaf name (--lr) or more (--optim.lr).
    if (absl::EndsWith(l.dotted, key) && l.dotted[l.dotted.size() - key.size() - 1] == '.') {
      hits.push_back(l);
    }
  }
  if (hits.size() == 1) return hits[0];
  if (hits.size() > 1) {
    std::vector<std::string> names;
    for (const LeafPath& l : hits) names.push_back("--" + l.dotted);
    return InvalidArgument(absl::StrCat("flag --", key, " is ambiguous"),
                           absl::StrCat("one of ", absl::StrJoin(names, ", ")));
  }
  // Suggest fields that share a word with the unknown key.
  std::vector<std::string> near;
  for (const LeafPath& l : leaves) {
    for (absl::string_view part : absl::StrSplit(key, absl::ByAnyChar("._"))) {
      if (part.size() >= 3 && absl::StrContains(l.dotted, part)) {
        near.push_back("--" + l.dotted);
        break;
      }
    }
  }
  return InvalidArgument(absl::StrCat("unknown flag --", key),
                         near.empty() ? "a field of " + m.GetDescriptor()->full_name()
                                      : absl::StrCat("one of ", absl::StrJoin(near, ", ")),
                         "run with --help to list every flag");
}

}  // namespace

absl::Status LoadTextProto(const std::string& path, Message* message) {
  // Only a regular file: a directory read as empty ran with the defaults,
  // and /dev/zero or a FIFO never ended.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) {
    return NotFound(absl::StrCat("cannot open config file '", path, "'"),
                    "a readable protobuf text file", "check the path (relative to the "
                    "workspace root under bazel run)");
  }
  if (!std::filesystem::is_regular_file(st)) {
    return InvalidArgument(
        absl::StrCat("config '", path, "' is ",
                     std::filesystem::is_directory(st) ? "a directory" : "not a regular file"),
        "a protobuf text file", "e.g. --config=models/gpt/configs/tiny.textproto");
  }
  constexpr uintmax_t kMaxBytes = 16 << 20;
  if (const uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxBytes) {
    return InvalidArgument(absl::StrCat("config '", path, "' is ", size, " bytes"),
                           "a protobuf text file of at most 16 MiB");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound(absl::StrCat("cannot open config file '", path, "'"),
                    "a readable protobuf text file", "check the path (relative to the "
                    "workspace root under bazel run)");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if (b < 0x20 && b != '\n' && b != '\r' && b != '\t') {
      return InvalidArgument(
          absl::StrCat("config '", path, "' holds byte 0x", absl::Hex(b, absl::kZeroPad2),
                       " at offset ", i, ": not a text file"),
          "a protobuf text file", "is this a checkpoint or a data file?");
    }
  }
  google::protobuf::TextFormat::Parser parser;
  ErrorText collector;
  parser.RecordErrorsTo(&collector);
  if (!parser.MergeFromString(text, message)) {
    // Escaped: the parser quotes what it read, which reaches the terminal.
    std::string shown;
    for (const char ch : collector.errors) {
      const unsigned char b = static_cast<unsigned char>(ch);
      if (b >= 0x20 && b < 0x7f) {
        shown.push_back(ch);
      } else {
        absl::StrAppend(&shown, "\\x", absl::Hex(b, absl::kZeroPad2));
      }
    }
    return InvalidArgument(absl::StrCat("cannot parse config '", path, "': ", shown),
                           absl::StrCat("text format for ", message->GetDescriptor()->full_name()));
  }
  return absl::OkStatus();
}

absl::Status SetConfigField(Message* message, absl::string_view key, absl::string_view value) {
  WEFT_ASSIGN_OR_RETURN(LeafPath path, Resolve(*message, key));
  Message* m = message;
  for (size_t i = 0; i + 1 < path.chain.size(); ++i) {
    m = m->GetReflection()->MutableMessage(m, path.chain[i]);
  }
  const FieldDescriptor* f = path.chain.back();
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    m->GetReflection()->SetString(m, f, std::string(value));
    return absl::OkStatus();
  }
  // A parser of our own: the static helper logs its complaint to stderr
  // ahead of our message.
  google::protobuf::TextFormat::Parser parser;
  ErrorText ignored;
  parser.RecordErrorsTo(&ignored);
  if (!parser.ParseFieldValueFromString(std::string(value), f, m)) {
    return InvalidArgument(absl::StrCat("--", path.dotted, "=", value, " is not a valid ",
                                        f->cpp_type_name()),
                           absl::StrCat("a ", f->cpp_type_name(), " value"));
  }
  return absl::OkStatus();
}

absl::Status LoadConfigFromArgs(const std::vector<std::string>& args, Message* message,
                                const std::vector<std::string>& passthrough,
                                std::vector<std::string>* skipped) {
  for (const std::string& a : args) {
    if (absl::StartsWith(a, "--config=")) {
      WEFT_RETURN_IF_ERROR(LoadTextProto(a.substr(9), message));
    }
  }
  for (const std::string& a : args) {
    if (absl::StartsWith(a, "--config=")) continue;
    if (!absl::StartsWith(a, "--")) {
      return InvalidArgument(absl::StrCat("unexpected argument '", a, "'"), "--name=value flags");
    }
    std::string key = a.substr(2), value;
    const size_t eq = key.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    if (std::find(passthrough.begin(), passthrough.end(), key) != passthrough.end()) {
      if (skipped != nullptr) skipped->push_back(a);
      continue;
    }
    if (!has_value) {
      // Bare boolean: --recompute or --norecompute.
      auto resolved = Resolve(*message, key);
      if (resolved.ok() && resolved->chain.back()->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
        WEFT_RETURN_IF_ERROR(SetConfigField(message, key, "true"));
        continue;
      }
      if (absl::StartsWith(key, "no")) {
        auto negated = Resolve(*message, key.substr(2));
        if (negated.ok() &&
            negated->chain.back()->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
          WEFT_RETURN_IF_ERROR(SetConfigField(message, key.substr(2), "false"));
          continue;
        }
      }
      if (!resolved.ok()) return resolved.status();
      return InvalidArgument(absl::StrCat("flag --", key, " has no value"),
                             absl::StrCat("--", key, "=<value>"));
    }
    WEFT_RETURN_IF_ERROR(SetConfigField(message, key, value));
  }
  return absl::OkStatus();
}

std::string DescribeConfig(const Message& message) {
  std::vector<LeafPath> leaves;
  CollectLeaves(message.GetDescriptor(), "", {}, &leaves);
  std::string out;
  for (const LeafPath& l : leaves) {
    const Message* m = &message;
    for (size_t i = 0; i + 1 < l.chain.size(); ++i) {
      m = &m->GetReflection()->GetMessage(*m, l.chain[i]);
    }
    std::string value;
    google::protobuf::TextFormat::PrintFieldValueToString(*m, l.chain.back(), -1, &value);
    absl::StrAppend(&out, "  --", l.dotted, " = ", value, "\n");
  }
  return out;
}

}  // namespace weft
