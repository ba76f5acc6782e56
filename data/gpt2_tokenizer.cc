#include "data/gpt2_tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstring>

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
    if (name == kEndOfText) {
      v.tokens[n] = kEndOfText;
      v.eot = static_cast<int32_t>(n);
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

// The pre-tokenizer must be GPT-2's ByteLevel (with the regex, no prefix space).
absl::Status CheckByteLevel(const JsonValue* p, const char* what, absl::string_view file) {
  if (p == nullptr) return Bad(file, absl::StrCat("no ", what, " (GPT-2's is ByteLevel)"));
  const JsonValue* type = Member(*p, "type");
  const std::string t = type != nullptr && type->is_string() ? type->string : "?";
  if (t == "Sequence") {
    const JsonValue* items = Member(*p, strcmp(what, "decoder") == 0 ? "decoders" : "pretokenizers");
    if (items != nullptr && items->is_array() && items->array.size() == 1) {
      return CheckByteLevel(&items->array[0], what, file);
    }
  }
  if (t != "ByteLevel") {
    return Bad(file, absl::StrCat("the ", what, " is ", t,
                                  " (Llama 3's and Qwen's split by another regex first), not "
                                  "GPT-2's ByteLevel; only GPT-2's scheme is read"));
  }
  // (The ByteLevel decoder's add_prefix_space does nothing on decode.)
  if (strcmp(what, "pre_tokenizer") == 0 && IsTrue(Member(*p, "add_prefix_space"))) {
    return Bad(file, absl::StrCat("the ", what, " adds a prefix space (GPT-2's does not)"));
  }
  const JsonValue* regex = Member(*p, "use_regex");
  if (strcmp(what, "pre_tokenizer") == 0 && regex != nullptr && regex->kind == JsonValue::Kind::kBool &&
      !regex->boolean) {
    return Bad(file, "the ByteLevel pre-tokenizer runs without GPT-2's regex");
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
    int32_t eot, absl::string_view name) {
  std::unique_ptr<Gpt2Tokenizer> t(new Gpt2Tokenizer());
  absl::flat_hash_map<std::string, int32_t> by_bytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (static_cast<int32_t>(i) != eot) by_bytes.emplace(tokens[i], static_cast<int32_t>(i));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == by_bytes.end()) {
      return Bad(name, absl::StrCat("no token for byte 0x", absl::Hex(b, absl::kZeroPad2),
                                    ": a byte-level vocabulary has all 256"));
    }
    t->byte_id_[b] = it->second;
  }
  const int32_t n = static_cast<int32_t>(tokens.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto [l, rt] = merges[r];
    if (l < 0 || l >= n || rt < 0 || rt >= n || l == eot || rt == eot) {
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
  return t;
}

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::FromVocabAndMerges(
    absl::string_view vocab_json, absl::string_view merges_txt, absl::string_view name) {
  WEFT_ASSIGN_OR_RETURN(JsonValue vocab, ParseJson(vocab_json, {.what = name}));
  WEFT_ASSIGN_OR_RETURN(auto merges, ParseMergesTxt(merges_txt, name));
  WEFT_ASSIGN_OR_RETURN(Vocabulary v, FromNames(vocab, merges, name));
  return Build(std::move(v.tokens), v.merges, v.eot, name);
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
  WEFT_RETURN_IF_ERROR(CheckByteLevel(Member(j, "pre_tokenizer"), "pre_tokenizer", name));
  WEFT_RETURN_IF_ERROR(CheckByteLevel(Member(j, "decoder"), "decoder", name));
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
  // Added tokens beyond the model's vocabulary (e.g. <|endoftext|>).
  JsonValue vocab = *Member(*model, "vocab");
  if (const JsonValue* added = Member(j, "added_tokens"); added != nullptr && added->is_array()) {
    for (const JsonValue& a : added->array) {
      const JsonValue* content = Member(a, "content");
      const JsonValue* id = Member(a, "id");
      if (content == nullptr || id == nullptr || !content->is_string()) continue;
      if (vocab.Find(content->string) != nullptr) continue;
      if (content->string != kEndOfText) {
        return Bad(name, absl::StrCat("added token \"", content->string,
                                      "\": only <|endoftext|> is read beside the vocabulary"));
      }
      vocab.object.emplace_back(content->string, *id);
    }
  }
  WEFT_ASSIGN_OR_RETURN(Vocabulary v, FromNames(vocab, merges, name));
  return Build(std::move(v.tokens), v.merges, v.eot, name);
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
  return Build(std::move(tokens), merges, eot, name);
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
  if (eot_ >= 0) {
    absl::StrAppend(&out, "{\"id\": ", eot_, ", \"content\": \"", kEndOfText,
                    "\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                    "\"normalized\": false, \"special\": true}");
  }
  absl::StrAppend(
      &out, "],\n  \"normalizer\": null,\n",
      "  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
      "\"trim_offsets\": true, \"use_regex\": true},\n  \"post_processor\": null,\n",
      "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": "
      "true, \"use_regex\": true},\n",
      "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
      "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, "
      "\"byte_fallback\": false, \"ignore_merges\": false,\n    \"vocab\": {");
  for (size_t i = 0; i < tokens_.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", JsonName(tokens_[i], static_cast<int32_t>(i) == eot_),
                    ": ", i);
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
  return out;
}

void Gpt2Tokenizer::EncodeChunk(absl::string_view chunk, std::vector<int32_t>* ids) const {
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
  // "<|endoftext|>" in the text is the end-of-text token, as Hugging Face
  // splits its special tokens out before pre-tokenizing.
  if (eot_ >= 0) {
    for (size_t at = text.find(kEndOfText); at != absl::string_view::npos;
         at = text.find(kEndOfText)) {
      WEFT_RETURN_IF_ERROR(EncodeAppend(text.substr(0, at), ids));
      ids->push_back(eot_);
      text.remove_prefix(at + sizeof(kEndOfText) - 1);
    }
  }
  // chunk -> (offset, length) of its ids earlier in *ids.
  absl::flat_hash_map<absl::string_view, std::pair<size_t, uint32_t>> cache;
  ForEachGpt2Chunk(text, [&](absl::string_view chunk) {
    const auto it = cache.find(chunk);
    if (it != cache.end()) {
      const auto [offset, length] = it->second;
      const size_t old = ids->size();
      ids->resize(old + length);
      std::copy_n(ids->data() + offset, length, ids->data() + old);
      return;
    }
    const size_t offset = ids->size();
    EncodeChunk(chunk, ids);
    if (cache.size() >= kMaxCacheEntries) cache.clear();
    cache.emplace(chunk, std::make_pair(offset, static_cast<uint32_t>(ids->size() - offset)));
  });
  return absl::OkStatus();
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
