#include "core/parallel/strategy_options.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/parallel/strategy_registry.h"

namespace weft {
namespace {

std::string KeysOf(const std::string& strategy, const OptionSchema& schema) {
  std::vector<std::string> keys;
  for (const OptionSpec& s : schema.specs()) keys.push_back(s.name);
  return absl::StrCat(strategy, ": ", keys.empty() ? "(no options)" : absl::StrJoin(keys, ", "));
}

// Registered strategies, other than the applied ones, that declare `key`.
std::vector<std::string> OtherOwners(const std::string& key,
                                     const std::vector<const Strategy*>& applied) {
  std::vector<std::string> owners;
  for (const std::string& name : RegisteredStrategies()) {
    if (std::any_of(applied.begin(), applied.end(),
                    [&](const Strategy* s) { return s->Name() == name; })) {
      continue;
    }
    absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(name);
    if (s.ok() && (*s)->Options().Find(key) != nullptr) owners.push_back(name);
  }
  return owners;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseOptionList(const std::string& list) {
  std::map<std::string, std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const size_t eq = part.find('=');
    std::string key(absl::StripAsciiWhitespace(part.substr(0, eq)));
    if (eq == absl::string_view::npos || key.empty()) {
      return InvalidArgument(absl::StrCat("'", part, "' in --strategy_options='", list, "'"),
                             "key=value pairs separated by commas",
                             "e.g. --strategy_options=zero_stage=2,bucket_mb=10");
    }
    std::string value(absl::StripAsciiWhitespace(part.substr(eq + 1)));
    if (!out.emplace(key, value).second) {
      return InvalidArgument(absl::StrCat("option '", key, "' is given twice in --strategy_options"),
                             "each key once");
    }
  }
  return out;
}

absl::StatusOr<OptionValue> ParseOptionValue(const std::string& strategy, const OptionSpec& spec,
                                             const std::string& text) {
  OptionValue v;
  v.type = spec.type;
  v.s = text;
  bool ok = true;
  switch (spec.type) {
    case OptionType::kInt:
      ok = absl::SimpleAtoi(text, &v.i);
      break;
    case OptionType::kDouble:
      ok = absl::SimpleAtod(text, &v.d);
      break;
    case OptionType::kBool:
      ok = absl::SimpleAtob(text, &v.b);
      break;
    case OptionType::kString:
      break;
    case OptionType::kEnum:
      ok = std::find(spec.choices.begin(), spec.choices.end(), text) != spec.choices.end();
      break;
  }
  if (!ok) {
    return InvalidArgument(
        absl::StrCat("option ", strategy, ".", spec.name, "='", text, "'"),
        spec.type == OptionType::kEnum
            ? absl::StrCat("one of: ", absl::StrJoin(spec.choices, ", "))
            : absl::StrCat("a value of type ", OptionTypeName(spec.type)),
        absl::StrCat(spec.name, ": ", spec.help));
  }
  return v;
}

absl::StatusOr<std::vector<StrategyOptionSet>> ResolveStrategyOptions(
    const std::vector<const Strategy*>& strategies, const StrategyOptionValues& values) {
  // Which keys each applied strategy takes; every given key must be taken.
  std::vector<OptionSchema> schemas;
  for (const Strategy* s : strategies) schemas.push_back(s->Options());
  for (const auto& [key, value] : values.given) {
    bool taken = false;
    const size_t dot = key.find('.');
    for (size_t i = 0; i < strategies.size(); ++i) {
      const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
      if (dot != std::string::npos && key.substr(0, dot) != strategies[i]->Name()) continue;
      taken |= schemas[i].Find(name) != nullptr;
    }
    if (taken) continue;
    std::vector<std::string> valid;
    for (size_t i = 0; i < strategies.size(); ++i) {
      valid.push_back(KeysOf(strategies[i]->Name(), schemas[i]));
    }
    const std::vector<std::string> others =
        OtherOwners(dot == std::string::npos ? key : key.substr(dot + 1), strategies);
    return InvalidArgument(
        absl::StrCat("unknown strategy option '", key, "' in --strategy_options"),
        valid.empty() ? std::string("no options: no strategy is applied")
                      : absl::StrCat("an option of an applied strategy (",
                                     absl::StrJoin(valid, "; "), ")"),
        others.empty() ? std::string("run with --help to list every strategy's options")
                       : absl::StrCat("'", key, "' belongs to ", absl::StrJoin(others, ", "),
                                      ", which is not in --strategy"));
  }
  std::vector<StrategyOptionSet> sets;
  for (size_t i = 0; i < strategies.size(); ++i) {
    const std::string& strategy = strategies[i]->Name();
    std::map<std::string, OptionValue> parsed;
    for (const OptionSpec& spec : schemas[i].specs()) {
      std::string text = spec.default_value;
      for (const auto* source : {&values.from_flags, &values.given}) {
        auto plain = source->find(spec.name);
        if (plain != source->end()) text = plain->second;
        auto qualified = source->find(strategy + "." + spec.name);
        if (qualified != source->end()) text = qualified->second;
      }
      absl::StatusOr<OptionValue> v = ParseOptionValue(strategy, spec, text);
      if (!v.ok()) return v.status();
      parsed[spec.name] = *std::move(v);
    }
    sets.emplace_back(strategy, std::move(parsed));
  }
  return sets;
}

std::vector<std::string> UnreadFlagNotes(const std::vector<std::string>& names,
                                         const StrategyOptionValues& values) {
  std::vector<std::unique_ptr<Strategy>> owned;
  std::vector<const Strategy*> applied;
  for (const std::string& n : names) {
    absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(n);
    if (!s.ok()) continue;
    applied.push_back(s->get());
    owned.push_back(*std::move(s));
  }
  std::vector<std::string> notes;
  // With strategies, an unknown --strategy_options key is an error
  // (ResolveStrategyOptions); with none, nothing reads any of them.
  if (names.empty()) {
    for (const auto& [key, value] : values.given) {
      notes.push_back(absl::StrCat("--strategy_options ", key, "=", value,
                                   " is read by no applied strategy (none) and changes nothing"));
    }
  }
  for (const auto& [key, value] : values.from_flags) {
    if (std::any_of(applied.begin(), applied.end(),
                    [&](const Strategy* s) { return s->Options().Find(key) != nullptr; })) {
      continue;
    }
    const std::vector<std::string> owners = OtherOwners(key, applied);
    notes.push_back(absl::StrCat(
        "--", key, "=", value, " is read by no applied strategy (",
        names.empty() ? "none" : absl::StrJoin(names, ","), ") and changes nothing",
        owners.empty() ? "" : absl::StrCat("; it is an option of ", absl::StrJoin(owners, ", "))));
  }
  return notes;
}

std::string DescribeOptionSchema(const OptionSchema& schema) {
  std::string out;
  for (const OptionSpec& s : schema.specs()) {
    std::string type = OptionTypeName(s.type);
    if (s.type == OptionType::kEnum) type = absl::StrJoin(s.choices, "|");
    absl::StrAppend(&out, "    ", s.name, " (", type, ", default '", s.default_value, "'): ",
                    s.help, "\n");
  }
  return out;
}

std::string DescribeRegisteredStrategies() {
  std::string out;
  for (const std::string& name : RegisteredStrategies()) {
    absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(name);
    if (!s.ok()) continue;
    const OptionSchema schema = (*s)->Options();
    absl::StrAppend(&out, "  ", name, schema.specs().empty() ? " (no options)" : "", "\n",
                    DescribeOptionSchema(schema));
  }
  return out;
}

}  // namespace weft
