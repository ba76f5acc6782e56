#include "data/gpt2_tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/json.h"
#include "core/base/status_macros.h"
#include "data/bpe_tokenizer.h"  // PairKey
#include "data/gpt2_pretokenizer.h"
#include "data/unicode_classes.h"

namespace weft::data {
namespace {

constexpr char kHeader[] = "weft-tokenizer gpt2 v1";
constexpr char kEndOfText[] = "<|endoftext|>";
constexpr char kLlama3EndOfText[] = "<|end_of_text|>";
// Llama 3's split pattern in its tokenizer.json (tiktoken's cl100k).
constexpr char kLlama3Pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr size_t kMaxCacheEntries = 1 << 20;

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

absl::Status Bad(absl::string_view file, absl::string_view what) {
  return InvalidArgument(absl::StrCat(file, ": ", what),
                         "a GPT-2 byte-level BPE tokenizer (vocab.json with merges.txt, or a "
                         "tokenizer.json of a BPE model with the ByteLevel pre-tokenizer)");
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

// Serialize()'s hex token lines.
bool FromHex(absl::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  const auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Build(
    std::vector<std::string> tokens, const std::vector<std::pair<int32_t, int32_t>>& merges,
    int32_t eot, Scheme scheme, absl::string_view name) {
  std::unique_ptr<Gpt2Tokenizer> t(new Gpt2Tokenizer());
  const int32_t n = static_cast<int32_t>(tokens.size());
  std::vector<bool> special(tokens.size(), false);
  for (const auto& [text, id] : scheme.specials) {
    if (id < 0 || id >= n || tokens[id] != text) {
      return Bad(name, absl::StrCat("special token \"", absl::CHexEscape(text), "\" has id ", id,
                                    ", which the vocabulary gives another token"));
    }
    special[id] = true;
  }
  if (eot >= 0 && (eot >= n || !special[eot])) {
    return Bad(name, absl::StrCat("end-of-text id ", eot, " is not a special token"));
  }
  // Ordinary tokens by their bytes (the lower id when two spell the same).
  absl::flat_hash_map<std::string, int32_t>& by_bytes = t->by_bytes_;
  for (int32_t i = 0; i < n; ++i) {
    if (!special[i]) by_bytes.emplace(tokens[i], i);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == by_bytes.end()) {
      return Bad(name, absl::StrCat("no token for byte 0x", absl::Hex(b, absl::kZeroPad2),
                                    ": a byte-level vocabulary has all 256"));
    }
    t->byte_id_[b] = it->second;
  }
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto [l, rt] = merges[r];
    if (l < 0 || l >= n || rt < 0 || rt >= n || special[l] || special[rt]) {
      return Bad(name, absl::StrCat("merge ", r, " has ids ", l, " ", rt, " outside the vocabulary"));
    }
    const auto m = by_bytes.find(tokens[l] + tokens[rt]);
    if (m == by_bytes.end()) {
      return Bad(name, absl::StrCat("merge ", r, " makes a token the vocabulary lacks"));
    }
    // A repeated pair keeps its first (lowest) rank, as HF's BPE does.
    t->rank_.emplace(PairKey(l, rt), std::make_pair(static_cast<int32_t>(r), m->second));
  }
  t->tokens_ = std::move(tokens);
  t->merges_ = merges;
  t->eot_ = eot;
  // Longest first: where two specials start at one position, the longer wins.
  std::sort(scheme.specials.begin(), scheme.specials.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  t->scheme_ = std::move(scheme);
  return t;
}

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
  const std::string name = absl::StrCat("Hugging Face tokenizer.json '", file, "'");
  WEFT_ASSIGN_OR_RETURN(JsonValue j, ParseJson(json, {.what = name}));
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

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Parse(absl::string_view contents,
                                                                    absl::string_view name) {
  const std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n', absl::SkipEmpty());
  auto bad = [&](absl::string_view what) {
    return InvalidArgument(absl::StrCat("GPT-2 tokenizer file '", name, "': ", what),
                           "the format Serialize writes ('weft-tokenizer gpt2 v1', '<V> tokens', "
                           "V hex lines, '<M> merges', M lines 'left right', 'eot <id>')");
  };
  size_t at = 0;
  auto count = [&](absl::string_view word) -> absl::StatusOr<int64_t> {
    int64_t n = 0;
    const std::vector<absl::string_view> p = absl::StrSplit(at < lines.size() ? lines[at] : "", ' ');
    if (p.size() != 2 || p[1] != word || !absl::SimpleAtoi(p[0], &n) || n < 0 ||
        at + 1 + n > lines.size()) {
      return bad(absl::StrCat("no '<count> ", word, "' line where expected"));
    }
    ++at;
    return n;
  };
  if (lines.empty() || lines[0] != kHeader) return bad("missing 'weft-tokenizer gpt2 v1'");
  at = 1;
  WEFT_ASSIGN_OR_RETURN(int64_t v, count("tokens"));
  std::vector<std::string> tokens(v);
  for (int64_t i = 0; i < v; ++i, ++at) {
    if (lines[at] == "-") continue;  // an empty token (never made by merges)
    if (!FromHex(lines[at], &tokens[i])) return bad(absl::StrCat("bad token line ", at + 1));
  }
  WEFT_ASSIGN_OR_RETURN(int64_t m, count("merges"));
  std::vector<std::pair<int32_t, int32_t>> merges(m);
  for (int64_t i = 0; i < m; ++i, ++at) {
    const std::vector<absl::string_view> p = absl::StrSplit(lines[at], ' ');
    if (p.size() != 2 || !absl::SimpleAtoi(p[0], &merges[i].first) ||
        !absl::SimpleAtoi(p[1], &merges[i].second)) {
      return bad(absl::StrCat("bad merge line ", at + 1));
    }
  }
  int32_t eot = -1;
  const std::vector<absl::string_view> e = absl::StrSplit(at < lines.size() ? lines[at] : "", ' ');
  if (e.size() != 2 || e[0] != "eot" || !absl::SimpleAtoi(e[1], &eot)) return bad("no 'eot <id>' line");
  ++at;
  // Then optionally: "split llama3", "ignore_merges", "<S> specials" and S ids.
  Scheme scheme;
  if (at < lines.size() && lines[at] == "split llama3") scheme.split = Split::kLlama3, ++at;
  if (at < lines.size() && lines[at] == "ignore_merges") scheme.ignore_merges = true, ++at;
  if (at < lines.size()) {
    WEFT_ASSIGN_OR_RETURN(int64_t s, count("specials"));
    for (int64_t i = 0; i < s; ++i, ++at) {
      int32_t id = -1;
      if (!absl::SimpleAtoi(lines[at], &id) || id < 0 || id >= v) {
        return bad(absl::StrCat("bad special id line ", at + 1));
      }
      scheme.specials.emplace_back(tokens[id], id);
    }
  } else if (eot >= 0) {
    scheme.specials.emplace_back(tokens[eot], eot);  // GPT-2's one special
  }
  return Build(std::move(tokens), merges, eot, std::move(scheme), name);
}

namespace {

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
  std::string out = "\"";
  for (const char ch : name) {
    if (ch == '"' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  return out + "\"";
}

}  // namespace

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
  std::string pattern;
  for (const char ch : absl::string_view(kLlama3Pattern)) {
    if (ch == '\\' || ch == '"') pattern.push_back('\\');
    pattern.push_back(ch);
  }
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

std::string Gpt2Tokenizer::Serialize() const {
  std::string out = absl::StrCat(kHeader, "\n", tokens_.size(), " tokens\n");
  for (const std::string& t : tokens_) {
    absl::StrAppend(&out, t.empty() ? "-" : absl::BytesToHexString(t), "\n");
  }
  absl::StrAppend(&out, merges_.size(), " merges\n");
  for (const auto& [l, r] : merges_) absl::StrAppend(&out, l, " ", r, "\n");
  absl::StrAppend(&out, "eot ", eot_, "\n");
  if (scheme_.split == Split::kLlama3) absl::StrAppend(&out, "split llama3\n");
  if (scheme_.ignore_merges) absl::StrAppend(&out, "ignore_merges\n");
  std::vector<int32_t> ids;
  for (const auto& [text, id] : scheme_.specials) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  absl::StrAppend(&out, ids.size(), " specials\n");
  for (int32_t id : ids) absl::StrAppend(&out, id, "\n");
  return out;
}

void Gpt2Tokenizer::EncodeChunk(absl::string_view chunk, std::vector<int32_t>* ids) const {
  if (scheme_.ignore_merges) {
    const auto it = by_bytes_.find(chunk);
    if (it != by_bytes_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> syms(chunk.size());
  for (size_t i = 0; i < chunk.size(); ++i) syms[i] = byte_id_[static_cast<uint8_t>(chunk[i])];
  // Lowest rank first, all its occurrences left to right.
  while (syms.size() >= 2) {
    int32_t best = INT32_MAX, merged = -1;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const auto it = rank_.find(PairKey(syms[i], syms[i + 1]));
      if (it != rank_.end() && it->second.first < best) {
        best = it->second.first;
        merged = it->second.second;
      }
    }
    if (best == INT32_MAX) break;
    const auto [l, r] = merges_[best];
    size_t out = 0;
    for (size_t i = 0; i < syms.size();) {
      if (i + 1 < syms.size() && syms[i] == l && syms[i + 1] == r) {
        syms[out++] = merged;
        i += 2;
      } else {
        syms[out++] = syms[i++];
      }
    }
    syms.resize(out);
  }
  ids->insert(ids->end(), syms.begin(), syms.end());
}

absl::Status Gpt2Tokenizer::EncodeAppend(absl::string_view text, std::vector<int32_t>* ids) const {
  // Special tokens split out first, as Hugging Face does with its added
  // tokens: the earliest occurrence, the longest at one position.
  // Each special's next occurrence at or after `pos`, found again only once
  // passed, so many specials over a long text stay one scan each.
  const auto& specials = scheme_.specials;
  std::vector<size_t> next(specials.size());
  for (size_t i = 0; i < specials.size(); ++i) next[i] = text.find(specials[i].first);
  size_t pos = 0;
  while (true) {
    size_t best = absl::string_view::npos, which = 0;
    for (size_t i = 0; i < specials.size(); ++i) {
      if (next[i] < pos) next[i] = text.find(specials[i].first, pos);
      if (next[i] < best) best = next[i], which = i;  // sorted longest first: ties keep the longer
    }
    if (best == absl::string_view::npos) break;
    EncodeText(text.substr(pos, best - pos), ids);
    ids->push_back(specials[which].second);
    pos = best + specials[which].first.size();
  }
  EncodeText(text.substr(pos), ids);
  return absl::OkStatus();
}

void Gpt2Tokenizer::EncodeText(absl::string_view text, std::vector<int32_t>* ids) const {
  // chunk -> (offset, length) of its ids earlier in *ids.
  absl::flat_hash_map<absl::string_view, std::pair<size_t, uint32_t>> cache;
  const auto chunk_end = scheme_.split == Split::kLlama3 ? Llama3ChunkEnd : Gpt2ChunkEnd;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = chunk_end(text, pos);
    const absl::string_view chunk = text.substr(pos, end - pos);
    pos = end;
    const auto it = cache.find(chunk);
    if (it != cache.end()) {
      const auto [offset, length] = it->second;
      const size_t old = ids->size();
      ids->resize(old + length);
      std::copy_n(ids->data() + offset, length, ids->data() + old);
      continue;
    }
    const size_t offset = ids->size();
    EncodeChunk(chunk, ids);
    if (cache.size() >= kMaxCacheEntries) cache.clear();
    cache.emplace(chunk, std::make_pair(offset, static_cast<uint32_t>(ids->size() - offset)));
  }
}

absl::StatusOr<std::string> Gpt2Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return InvalidArgument(absl::StrCat("token id ", ids[i], " at position ", i),
                             absl::StrCat("ids in [0, ", vocab_size(), ") for this vocabulary"));
    }
    out.append(tokens_[ids[i]]);
  }
  return out;
}

}  // namespace weft::data
