// Gpt2Tokenizer's Hugging Face and OpenAI files: vocab.json + merges.txt,
// tokenizer.json (read and written), and GPT-2's byte-to-unicode names.
#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/json.h"
#include "core/base/status_macros.h"
#include "data/gpt2_tokenizer.h"
#include "data/gpt2_tokenizer_internal.h"
#include "data/unicode_classes.h"

namespace weft::data {
namespace {

using gpt2_internal::Bad;

constexpr char kEndOfText[] = "<|endoftext|>";
constexpr char kLlama3EndOfText[] = "<|end_of_text|>";
// Llama 3's split pattern in its tokenizer.json (tiktoken's cl100k).
constexpr char kLlama3Pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for
// themselves, the other 68 for U+0100 onwards in byte order.
bool Printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

struct ByteNames {
  std::array<char32_t, 256> name{};
  absl::flat_hash_map<char32_t, uint8_t> byte;
  ByteNames() {
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      name[b] = Printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
      byte[name[b]] = static_cast<uint8_t>(b);
    }
  }
};
const ByteNames& Names() {
  static const ByteNames* names = new ByteNames();
  return *names;
}

// A vocabulary entry's bytes: each code point of its name is one byte.
absl::StatusOr<std::string> NameToBytes(absl::string_view name, absl::string_view file) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    const CodePoint cp = DecodeUtf8(name, i);
    const auto it = Names().byte.find(cp.value);
    if (it == Names().byte.end()) {
      return InvalidArgument(absl::StrCat(file, ": token \"", absl::CHexEscape(name),
                                          "\" has a character outside GPT-2's byte table"),
                             "a byte-level BPE vocabulary (tokens spelled in GPT-2's byte names)");
    }
    out.push_back(static_cast<char>(it->second));
    i += cp.length;
  }
  return out;
}


// vocab (name -> id) and the merges as name pairs, to id tokens and id
// merges; `eot` the id of "<|endoftext|>" when the vocabulary has it.
struct Vocabulary {
  std::vector<std::string> tokens;  // id -> bytes
  std::vector<std::pair<int32_t, int32_t>> merges;
  int32_t eot = -1;
};

absl::StatusOr<Vocabulary> FromNames(const JsonValue& vocab,
                                     const std::vector<std::pair<std::string, std::string>>& merges,
                                     const absl::flat_hash_set<std::string>& specials,
                                     absl::string_view file) {
  if (!vocab.is_object() || vocab.object.empty()) return Bad(file, "no vocabulary object");
  Vocabulary v;
  v.tokens.resize(vocab.object.size());
  std::vector<bool> seen(vocab.object.size(), false);
  absl::flat_hash_map<std::string, int32_t> id_of;  // by name
  for (const auto& [name, id] : vocab.object) {
    const int64_t n = id.is_number() ? static_cast<int64_t>(id.number) : -1;
    if (n < 0 || n >= static_cast<int64_t>(v.tokens.size()) || seen[n]) {
      return Bad(file, absl::StrCat("token \"", absl::CHexEscape(name), "\" has id ",
                                    id.is_number() ? absl::StrCat(id.number) : "?",
                                    ": ids must be 0..", v.tokens.size() - 1, ", each once"));
    }
    seen[n] = true;
    id_of[name] = static_cast<int32_t>(n);
    if (specials.contains(name)) {  // text, not byte names
      v.tokens[n] = name;
      if (name == kEndOfText || (name == kLlama3EndOfText && v.eot < 0)) {
        v.eot = static_cast<int32_t>(n);
      }
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(v.tokens[n], NameToBytes(name, file));
  }
  v.merges.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [left, right] = merges[r];
    const auto l = id_of.find(left), rt = id_of.find(right), m = id_of.find(left + right);
    if (l == id_of.end() || rt == id_of.end() || m == id_of.end()) {
      return Bad(file, absl::StrCat("merge ", r, " (\"", absl::CHexEscape(left), "\" \"",
                                    absl::CHexEscape(right), "\") names a token the vocabulary lacks"));
    }
    v.merges.emplace_back(l->second, rt->second);
  }
  return v;
}

// merges.txt: an optional "#version" line, then "left right" per line.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMergesTxt(
    absl::string_view text, absl::string_view file) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && absl::StartsWith(line, "#version"))) continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return Bad(file, absl::StrCat("line ", line_no, " is not 'left right'"));
    }
    out.emplace_back(std::string(parts[0]), std::string(parts[1]));
  }
  return out;
}

const JsonValue* Member(const JsonValue& j, const char* key) {
  const JsonValue* v = j.Find(key);
  return v == nullptr || v->kind == JsonValue::Kind::kNull ? nullptr : v;
}

bool IsTrue(const JsonValue* v) { return v != nullptr && v->kind == JsonValue::Kind::kBool && v->boolean; }

std::string TypeOf(const JsonValue& p) {
  const JsonValue* type = Member(p, "type");
  return type != nullptr && type->is_string() ? type->string : "?";
}

// A ByteLevel step: no prefix space (GPT-2's and Llama 3's add none), and
// the GPT-2 regex on (`regex`) or off (after Llama 3's split).
absl::Status CheckByteLevel(const JsonValue& p, bool regex, absl::string_view file) {
  if (TypeOf(p) != "ByteLevel") return Bad(file, absl::StrCat("a ", TypeOf(p), " pre-tokenizer step"));
  if (IsTrue(Member(p, "add_prefix_space"))) {
    return Bad(file, "the ByteLevel pre-tokenizer adds a prefix space (GPT-2's and Llama 3's do not)");
  }
  const JsonValue* use = Member(p, "use_regex");
  const bool uses = use == nullptr || use->kind != JsonValue::Kind::kBool || use->boolean;
  if (uses != regex) {
    return Bad(file, regex ? "the ByteLevel pre-tokenizer runs without GPT-2's regex"
                           : "the ByteLevel step after the split runs GPT-2's regex too");
  }
  return absl::OkStatus();
}

// GPT-2's scheme (ByteLevel with its regex) or Llama 3's (a Split by its
// pattern, isolated, then ByteLevel without the regex); anything else is
// named.
absl::StatusOr<Gpt2Tokenizer::Split> SplitOf(const JsonValue* p, absl::string_view file) {
  if (p == nullptr) return Bad(file, "no pre_tokenizer (GPT-2's is ByteLevel)");
  std::vector<const JsonValue*> steps = {p};
  if (TypeOf(*p) == "Sequence") {
    steps.clear();
    const JsonValue* items = Member(*p, "pretokenizers");
    if (items != nullptr && items->is_array()) {
      for (const JsonValue& i : items->array) steps.push_back(&i);
    }
  }
  if (steps.size() == 1) {
    if (TypeOf(*steps[0]) != "ByteLevel") {
      return Bad(file, absl::StrCat("the pre_tokenizer is ", TypeOf(*steps[0]),
                                    ", not GPT-2's ByteLevel or Llama 3's split then ByteLevel"));
    }
    WEFT_RETURN_IF_ERROR(CheckByteLevel(*steps[0], /*regex=*/true, file));
    return Gpt2Tokenizer::Split::kGpt2;
  }
  if (steps.size() == 2 && TypeOf(*steps[0]) == "Split") {
    const JsonValue* pattern = Member(*steps[0], "pattern");
    const JsonValue* regex = pattern != nullptr ? Member(*pattern, "Regex") : nullptr;
    const JsonValue* behavior = Member(*steps[0], "behavior");
    if (regex == nullptr || !regex->is_string() || regex->string != kLlama3Pattern) {
      return Bad(file, absl::StrCat("the pre_tokenizer splits by the pattern ",
                                    regex != nullptr && regex->is_string()
                                        ? absl::StrCat("\"", absl::CHexEscape(regex->string), "\"")
                                        : std::string("?"),
                                    "; the patterns read are GPT-2's and Llama 3's (Qwen's "
                                    "differs in its digits)"));
    }
    if (behavior == nullptr || !behavior->is_string() || behavior->string != "Isolated" ||
        IsTrue(Member(*steps[0], "invert"))) {
      return Bad(file, "the split is not Llama 3's (behavior Isolated, not inverted)");
    }
    WEFT_RETURN_IF_ERROR(CheckByteLevel(*steps[1], /*regex=*/false, file));
    return Gpt2Tokenizer::Split::kLlama3;
  }
  return Bad(file, absl::StrCat("the pre_tokenizer is ", TypeOf(*p), " of ", steps.size(),
                                " steps; the schemes read are GPT-2's ByteLevel and Llama 3's "
                                "split then ByteLevel"));
}

absl::Status CheckDecoder(const JsonValue* d, absl::string_view file) {
  if (d == nullptr || TypeOf(*d) != "ByteLevel") {
    return Bad(file, absl::StrCat("the decoder is ", d == nullptr ? "missing" : TypeOf(*d),
                                  ", not ByteLevel"));
  }
  return absl::OkStatus();
}

// A token's name in GPT-2's byte table, as a JSON string literal.
std::string JsonName(absl::string_view bytes, bool special) {
  std::string name;
  if (special) {
    name = std::string(bytes);
  } else {
    for (const char b : bytes) {
      const char32_t c = Names().name[static_cast<uint8_t>(b)];
      if (c < 0x80) {
        name.push_back(static_cast<char>(c));
      } else {  // U+0080..U+07FF: two UTF-8 bytes
        name.push_back(static_cast<char>(0xC0 | (c >> 6)));
        name.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      }
    }
  }
  return absl::StrCat("\"", JsonEscape(name), "\"");
}


}  // namespace

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::FromVocabAndMerges(
    absl::string_view vocab_json, absl::string_view merges_txt, absl::string_view name) {
  WEFT_ASSIGN_OR_RETURN(JsonValue vocab, ParseJson(vocab_json, {.what = name}));
  WEFT_ASSIGN_OR_RETURN(auto merges, ParseMergesTxt(merges_txt, name));
  WEFT_ASSIGN_OR_RETURN(Vocabulary v, FromNames(vocab, merges, {kEndOfText}, name));
  Scheme scheme;  // GPT-2's: <|endoftext|> its one special token
  if (v.eot >= 0) scheme.specials.emplace_back(kEndOfText, v.eot);
  return Build(std::move(v.tokens), v.merges, v.eot, std::move(scheme), name);
}


absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::FromTokenizerJson(
    absl::string_view json, absl::string_view file) {
  WEFT_ASSIGN_OR_RETURN(
      JsonValue j,
      ParseJson(json, {.what = absl::StrCat("Hugging Face tokenizer.json '", file, "'")}));
  return FromTokenizerJson(j, file);
}

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::FromTokenizerJson(
    const JsonValue& j, absl::string_view file) {
  const std::string name = absl::StrCat("Hugging Face tokenizer.json '", file, "'");
  const JsonValue* model = Member(j, "model");
  const JsonValue* type = model != nullptr ? Member(*model, "type") : nullptr;
  if (type == nullptr || !type->is_string() || type->string != "BPE") {
    return Bad(name, absl::StrCat("the model is ", type != nullptr && type->is_string()
                                                       ? type->string
                                                       : std::string("missing"),
                                  ", not BPE"));
  }
  if (Member(j, "normalizer") != nullptr) return Bad(name, "it has a normalizer (GPT-2's has none)");
  Scheme scheme;
  WEFT_ASSIGN_OR_RETURN(scheme.split, SplitOf(Member(j, "pre_tokenizer"), name));
  WEFT_RETURN_IF_ERROR(CheckDecoder(Member(j, "decoder"), name));
  scheme.ignore_merges = IsTrue(Member(*model, "ignore_merges"));
  if (IsTrue(Member(*model, "byte_fallback"))) return Bad(name, "the BPE model falls back to bytes");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const JsonValue* a = Member(*model, affix);
    if (a != nullptr && a->is_string() && !a->string.empty()) {
      return Bad(name, absl::StrCat("the BPE model has a ", affix));
    }
  }
  // merges: "left right" strings (tokenizers < 0.20) or [left, right] pairs.
  std::vector<std::pair<std::string, std::string>> merges;
  if (const JsonValue* m = Member(*model, "merges"); m != nullptr && m->is_array()) {
    for (const JsonValue& e : m->array) {
      if (e.is_string()) {
        const size_t space = e.string.find(' ');
        if (space == std::string::npos) return Bad(name, "a merge without a space");
        merges.emplace_back(e.string.substr(0, space), e.string.substr(space + 1));
      } else if (e.is_array() && e.array.size() == 2 && e.array[0].is_string() &&
                 e.array[1].is_string()) {
        merges.emplace_back(e.array[0].string, e.array[1].string);
      } else {
        return Bad(name, "a merge that is neither \"left right\" nor [left, right]");
      }
    }
  }
  // Added tokens: the special ones split out of the text (GPT-2's
  // <|endoftext|>, Llama 3's <|begin_of_text|> and reserved ones).
  JsonValue vocab = *Member(*model, "vocab");
  absl::flat_hash_set<std::string> special_names = {kEndOfText};
  if (const JsonValue* added = Member(j, "added_tokens"); added != nullptr && added->is_array()) {
    for (const JsonValue& a : added->array) {
      const JsonValue* content = Member(a, "content");
      const JsonValue* id = Member(a, "id");
      if (content == nullptr || id == nullptr || !content->is_string() || !id->is_number()) continue;
      if (!IsTrue(Member(a, "special"))) {
        return Bad(name, absl::StrCat("added token \"", absl::CHexEscape(content->string),
                                      "\" is not special (only special added tokens are read)"));
      }
      special_names.insert(content->string);
      scheme.specials.emplace_back(content->string, static_cast<int32_t>(id->number));
      if (vocab.Find(content->string) == nullptr) vocab.object.emplace_back(content->string, *id);
    }
  }
  WEFT_ASSIGN_OR_RETURN(Vocabulary v, FromNames(vocab, merges, special_names, name));
  if (v.eot >= 0 && std::none_of(scheme.specials.begin(), scheme.specials.end(),
                                 [&](const auto& s) { return s.second == v.eot; })) {
    scheme.specials.emplace_back(v.tokens[v.eot], v.eot);  // in the vocabulary only
  }
  return Build(std::move(v.tokens), v.merges, v.eot, std::move(scheme), name);
}


std::string Gpt2Tokenizer::ToTokenizerJson() const {
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  absl::StrAppend(&out, "  \"added_tokens\": [");
  std::vector<std::pair<int32_t, std::string>> specials;
  for (const auto& [text, id] : scheme_.specials) specials.emplace_back(id, text);
  std::sort(specials.begin(), specials.end());
  std::vector<bool> special(tokens_.size(), false);
  for (size_t i = 0; i < specials.size(); ++i) {
    special[specials[i].first] = true;
    absl::StrAppend(&out, i == 0 ? "" : ", ", "{\"id\": ", specials[i].first, ", \"content\": ",
                    JsonName(specials[i].second, true),
                    ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                    "\"normalized\": false, \"special\": true}");
  }
  const std::string byte_level = absl::StrCat(
      "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
      "\"use_regex\": ", scheme_.split == Split::kGpt2 ? "true" : "false", "}");
  const std::string pattern = JsonEscape(kLlama3Pattern);
  const std::string pre =
      scheme_.split == Split::kGpt2
          ? byte_level
          : absl::StrCat("{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                         "\"pattern\": {\"Regex\": \"", pattern,
                         "\"}, \"behavior\": \"Isolated\", \"invert\": false}, ", byte_level, "]}");
  absl::StrAppend(
      &out, "],\n  \"normalizer\": null,\n", "  \"pre_tokenizer\": ", pre,
      ",\n  \"post_processor\": null,\n",
      "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": "
      "true, \"use_regex\": true},\n",
      "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
      "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, "
      "\"byte_fallback\": false, \"ignore_merges\": ", scheme_.ignore_merges ? "true" : "false",
      ",\n    \"vocab\": {");
  for (size_t i = 0; i < tokens_.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", JsonName(tokens_[i], special[i]), ": ", i);
  }
  absl::StrAppend(&out, "},\n    \"merges\": [");
  for (size_t r = 0; r < merges_.size(); ++r) {
    absl::StrAppend(&out, r == 0 ? "" : ", ", "[", JsonName(tokens_[merges_[r].first], false), ", ",
                    JsonName(tokens_[merges_[r].second], false), "]");
  }
  absl::StrAppend(&out, "]}\n}\n");
  return out;
}


}  // namespace weft::data
