// OptionSchema: the options one strategy declares (name, type, default,
// help), and StrategyOptionSet: the values a job gives them, typed.
//
//   OptionSchema Options() const override {
//     OptionSchema s;
//     s.Int("zero_stage", 1, "1 optimizer state, 2 + gradients, 3 + parameters");
//     s.Enum("reduce_dtype", "auto", {"auto", "f32", "bf16"}, "dtype of reductions");
//     return s;
//   }
//   ... options.GetInt("zero_stage")
//
// Header-only on purpose: strategies built as .so plugins against the
// headers-only //core/parallel:plugin_sdk declare and read options with
// these inline functions; parsing text into a set happens in the host
// binary (strategy_options.h).
#ifndef WEFT_CORE_PARALLEL_OPTION_SCHEMA_H_
#define WEFT_CORE_PARALLEL_OPTION_SCHEMA_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace weft {

enum class OptionType { kInt, kDouble, kBool, kString, kEnum };

inline const char* OptionTypeName(OptionType t) {
  switch (t) {
    case OptionType::kInt: return "int";
    case OptionType::kDouble: return "double";
    case OptionType::kBool: return "bool";
    case OptionType::kString: return "string";
    case OptionType::kEnum: return "enum";
  }
  return "?";
}

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::kString;
  std::string default_value;         // as text, parsed like a user value
  std::string help;
  std::vector<std::string> choices;  // kEnum only
};

class OptionSchema {
 public:
  OptionSchema& Int(std::string name, int64_t def, std::string help) {
    return Add({std::move(name), OptionType::kInt, std::to_string(def), std::move(help), {}});
  }
  OptionSchema& Double(std::string name, double def, std::string help) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", def);
    return Add({std::move(name), OptionType::kDouble, buf, std::move(help), {}});
  }
  OptionSchema& Bool(std::string name, bool def, std::string help) {
    return Add({std::move(name), OptionType::kBool, def ? "true" : "false", std::move(help), {}});
  }
  OptionSchema& String(std::string name, std::string def, std::string help) {
    return Add({std::move(name), OptionType::kString, std::move(def), std::move(help), {}});
  }
  OptionSchema& Enum(std::string name, std::string def, std::vector<std::string> choices,
                     std::string help) {
    return Add({std::move(name), OptionType::kEnum, std::move(def), std::move(help),
                std::move(choices)});
  }

  const std::vector<OptionSpec>& specs() const { return specs_; }
  const OptionSpec* Find(const std::string& name) const {
    for (const OptionSpec& s : specs_) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

 private:
  OptionSchema& Add(OptionSpec spec) {
    specs_.push_back(std::move(spec));
    return *this;
  }
  std::vector<OptionSpec> specs_;
};

// One option's parsed value; which member is meaningful follows its type.
struct OptionValue {
  OptionType type = OptionType::kString;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;  // kString, kEnum (and the text of every value)
};

// The values of one strategy's options (every declared option has one: the
// job's or the default). Built by ResolveStrategyOptions in the host.
// Asking for an undeclared option or the wrong type is a programmer error
// and aborts with the name.
class StrategyOptionSet {
 public:
  StrategyOptionSet() = default;
  StrategyOptionSet(std::string strategy, std::map<std::string, OptionValue> values)
      : strategy_(std::move(strategy)), values_(std::move(values)) {}

  int64_t GetInt(const std::string& name) const { return Get(name, OptionType::kInt).i; }
  double GetDouble(const std::string& name) const { return Get(name, OptionType::kDouble).d; }
  bool GetBool(const std::string& name) const { return Get(name, OptionType::kBool).b; }
  const std::string& GetString(const std::string& name) const {
    return Get(name, OptionType::kString).s;
  }
  const std::string& GetEnum(const std::string& name) const {
    return Get(name, OptionType::kEnum).s;
  }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  const std::string& strategy() const { return strategy_; }

 private:
  const OptionValue& Get(const std::string& name, OptionType type) const {
    auto it = values_.find(name);
    if (it == values_.end() || it->second.type != type) {
      std::fprintf(stderr, "strategy '%s' reads option '%s' as %s, which it does not declare\n",
                   strategy_.c_str(), name.c_str(), OptionTypeName(type));
      std::abort();
    }
    return it->second;
  }

  std::string strategy_;
  std::map<std::string, OptionValue> values_;
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_OPTION_SCHEMA_H_
