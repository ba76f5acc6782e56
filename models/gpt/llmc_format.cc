#include "models/gpt/llmc_format.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/tensor/dtype.h"
#include "core/tensor/tensor.h"

namespace weft {
namespace {

static_assert(std::endian::native == std::endian::little, "llm.c files are little-endian");

constexpr int32_t kMagic = 20240326;
constexpr int32_t kVersionF32 = 3;
constexpr int32_t kVersionBf16 = 5;
constexpr int kHeaderInts = 256;
constexpr int64_t kHeaderBytes = kHeaderInts * 4;

struct LlmcHeader {
  int32_t version, max_t, vocab, layers, heads, channels, padded_vocab;
  int64_t ElementBytes() const { return version == kVersionF32 ? 4 : 2; }
};

// One of llm.c's 16 tensors: which weft parameter(s) it fills and the
// shape of one piece. Per-layer tensors stack L pieces, one per block.
struct LlmcTensor {
  std::string llmc_name;
  std::vector<std::string> weft_names;
  std::vector<int64_t> piece_shape;
  int64_t file_rows = 0;  // wte/wpe only: rows in the file (Vp or maxT)
};

// llm.c's order (fill_in_parameter_sizes in train_gpt2.c). `file` gives
// the header's L, C, Vp and maxT; wte and wpe get weft's row counts.
std::vector<LlmcTensor> Layout(const LlmcHeader& file, int64_t weft_vocab_rows,
                               int64_t weft_positions) {
  const int64_t c = file.channels;
  struct PerLayer {
    const char* llmc;
    const char* weft;
    std::vector<int64_t> shape;
  };
  const PerLayer per_layer[] = {
      {"ln1w", "ln1.weight", {c}},
      {"ln1b", "ln1.bias", {c}},
      {"qkvw", "attn.qkv.weight", {3 * c, c}},
      {"qkvb", "attn.qkv.bias", {3 * c}},
      {"attprojw", "attn.proj.weight", {c, c}},
      {"attprojb", "attn.proj.bias", {c}},
      {"ln2w", "ln2.weight", {c}},
      {"ln2b", "ln2.bias", {c}},
      {"fcw", "mlp.fc.weight", {4 * c, c}},
      {"fcb", "mlp.fc.bias", {4 * c}},
      {"fcprojw", "mlp.proj.weight", {c, 4 * c}},
      {"fcprojb", "mlp.proj.bias", {c}},
  };
  std::vector<LlmcTensor> out;
  out.push_back({"wte", {"embed.wte"}, {weft_vocab_rows, c}, file.padded_vocab});
  out.push_back({"wpe", {"embed.wpe"}, {weft_positions, c}, file.max_t});
  for (const PerLayer& t : per_layer) {
    LlmcTensor entry{t.llmc, {}, t.shape};
    for (int l = 0; l < file.layers; ++l) {
      entry.weft_names.push_back(absl::StrCat("blocks.", l, ".", t.weft));
    }
    out.push_back(std::move(entry));
  }
  out.push_back({"lnfw", {"ln_f.weight"}, {c}});
  out.push_back({"lnfb", {"ln_f.bias"}, {c}});
  return out;
}

// Elements of `t` in the file.
int64_t FileElements(const LlmcTensor& t) {
  if (t.file_rows > 0) return t.file_rows * t.piece_shape[1];
  return static_cast<int64_t>(t.weft_names.size()) * NumElements(t.piece_shape);
}

// Sizes the llm.c layout divides by or multiplies with; Gpt::Create checks
// the rest of the config.
absl::Status CheckSizes(const GptConfig& c) {
  if (c.n_layer() < 1 || c.n_head() < 1 || c.d_model() < 1 || c.vocab_size() < 1 ||
      c.max_seq_len() < 1 || c.vocab_pad_multiple() < 1) {
    return InvalidArgument(
        absl::StrCat("model config n_layer=", c.n_layer(), " n_head=", c.n_head(), " d_model=",
                     c.d_model(), " vocab_size=", c.vocab_size(), " max_seq_len=", c.max_seq_len(),
                     " vocab_pad_multiple=", c.vocab_pad_multiple()),
        "all >= 1", "set vocab_size (0 means 'from the tokenizer' only at training time)");
  }
  return absl::OkStatus();
}

int64_t PaddedVocab(const GptConfig& c) {
  const int64_t m = c.vocab_pad_multiple();
  return (int64_t{c.vocab_size()} + m - 1) / m * m;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

absl::StatusOr<File> OpenForRead(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot open '", path, "': ", std::strerror(err));
    if (err == ENOENT) return NotFound(what, "an existing llm.c model file", "check the path");
    return InvalidArgument(what, "a readable file");
  }
  return f;
}

// Reads and validates the header; leaves `f` positioned at the parameters.
absl::StatusOr<LlmcHeader> ReadHeader(std::FILE* f, const std::string& path) {
  int32_t h[kHeaderInts];
  if (std::fread(h, 4, kHeaderInts, f) != kHeaderInts) {
    return InvalidArgument(absl::StrCat("'", path, "' is shorter than the llm.c header"),
                           absl::StrCat(kHeaderBytes, " header bytes"), "the file is truncated");
  }
  if (h[0] != kMagic) {
    return InvalidArgument(absl::StrCat("'", path, "' starts with magic ", h[0]),
                           absl::StrCat(kMagic, " (an llm.c GPT-2 model file)"),
                           h[0] == 20240527 ? "this is an llm.c optimizer state file; pass the "
                                              "model .bin written next to it"
                                            : "pass a model file from train_gpt2.py or "
                                              "train_gpt2.cu, e.g. gpt2_124M.bin");
  }
  LlmcHeader hd{h[1], h[2], h[3], h[4], h[5], h[6], h[7]};
  if (hd.version != kVersionF32 && hd.version != kVersionBf16) {
    return InvalidArgument(absl::StrCat("'", path, "' has llm.c version ", hd.version),
                           "version 3 (fp32) or 5 (bf16)",
                           "a newer llm.c may have changed the format");
  }
  if (hd.max_t < 1 || hd.vocab < 1 || hd.layers < 1 || hd.heads < 1 || hd.channels < 1 ||
      hd.channels % hd.heads != 0 || hd.padded_vocab < hd.vocab) {
    return InvalidArgument(
        absl::StrCat("'", path, "' header has maxT=", hd.max_t, " V=", hd.vocab, " L=", hd.layers,
                     " NH=", hd.heads, " C=", hd.channels, " Vp=", hd.padded_vocab),
        "positive sizes, NH dividing C and Vp >= V", "the file is corrupt");
  }
  return hd;
}

absl::Status CheckFileSize(std::FILE* f, const LlmcHeader& hd, const std::string& path) {
  // Counted from the header in 128 bits, so a corrupt header with huge sizes
  // is a clear error rather than an overflow: per layer 12 C^2 + 13 C.
  using Wide = __int128;
  const Wide c = hd.channels;
  const Wide elements = Wide{hd.padded_vocab} * c + Wide{hd.max_t} * c +
                        Wide{hd.layers} * (12 * c * c + 13 * c) + 2 * c;
  const Wide expected = kHeaderBytes + elements * hd.ElementBytes();
  const long here = std::ftell(f);
  std::fseek(f, 0, SEEK_END);
  const int64_t actual = std::ftell(f);
  std::fseek(f, here, SEEK_SET);
  if (actual != expected) {
    return InvalidArgument(
        absl::StrCat("'", path, "' has ", actual, " bytes"),
        expected > std::numeric_limits<int64_t>::max()
            ? std::string("a size beyond 2^63 bytes, which the header's sizes imply")
            : absl::StrCat(static_cast<int64_t>(expected), " (header + ",
                           static_cast<int64_t>(elements), " parameters as ",
                           hd.version == kVersionF32 ? "fp32" : "bf16", ")"),
        actual < expected ? "the file is truncated" : "the file has trailing data or is corrupt");
  }
  return absl::OkStatus();
}

absl::Status CheckMatchesConfig(const LlmcHeader& hd, const GptConfig& c, const std::string& path) {
  std::vector<std::string> diffs, flags;
  auto expect_equal = [&](const char* field, int64_t file, int64_t model) {
    if (file == model) return;
    diffs.push_back(absl::StrCat(field, " ", file, " in the file vs ", model, " in the model"));
    flags.push_back(absl::StrCat("--model.", field, "=", file));
  };
  expect_equal("n_layer", hd.layers, c.n_layer());
  expect_equal("n_head", hd.heads, c.n_head());
  expect_equal("d_model", hd.channels, c.d_model());
  if (hd.vocab < c.vocab_size()) {
    // The model's vocabulary comes from the data's tokenizer (or the flag):
    // a smaller file cannot embed the data's tokens, whatever the flags.
    diffs.push_back(absl::StrCat("vocab_size ", hd.vocab, " in the file vs ", c.vocab_size(),
                                 " in the model: the file knows fewer tokens than the data's "
                                 "tokenizer uses, so it was trained on other tokens (use data "
                                 "tokenized with the file's tokenizer)"));
  } else {
    expect_equal("vocab_size", hd.vocab, c.vocab_size());
  }
  if (hd.max_t < c.max_seq_len()) {
    diffs.push_back(absl::StrCat("max_seq_len: the file has ", hd.max_t,
                                 " positions, the model needs ", c.max_seq_len()));
    flags.push_back(absl::StrCat("--model.max_seq_len=", hd.max_t));
  }
  expect_equal("mlp_ratio", 4, c.mlp_ratio());
  if (!c.tie_weights()) {
    diffs.push_back("tie_weights: llm.c ties the LM head to wte, the model does not");
    flags.push_back("--model.tie_weights=true");
  }
  if (PaddedVocab(c) < hd.vocab) {
    diffs.push_back(absl::StrCat("the model's padded vocabulary ", PaddedVocab(c),
                                 " is smaller than the file's V=", hd.vocab));
  }
  if (diffs.empty()) return absl::OkStatus();
  return InvalidArgument(
      absl::StrCat("llm.c file '", path, "' does not fit the model: ", absl::StrJoin(diffs, "; ")),
      "the file's shapes (see LlmcConfig)",
      flags.empty() ? "" : absl::StrCat("pass ", absl::StrJoin(flags, " ")));
}

absl::StatusOr<std::vector<float>> ReadFloats(std::FILE* f, int64_t count, const LlmcHeader& hd,
                                              const LlmcTensor& t, const std::string& path) {
  std::vector<float> out(count);
  size_t got;
  if (hd.version == kVersionF32) {
    got = std::fread(out.data(), 4, count, f);
  } else {
    std::vector<uint16_t> bits(count);
    got = std::fread(bits.data(), 2, count, f);
    for (int64_t i = 0; i < count; ++i) out[i] = Bf16BitsToFloat(bits[i]);
  }
  if (got != static_cast<size_t>(count)) {
    return InvalidArgument(absl::StrCat("'", path, "' ends inside tensor ", t.llmc_name),
                           absl::StrCat(count, " elements"), "the file is truncated");
  }
  return out;
}

// wte and wpe: the first weft rows of the file's rows; missing rows are zero.
ckpt::HostTensor CopyRows(const std::vector<float>& file_values, int64_t file_rows,
                          const std::vector<int64_t>& weft_shape) {
  ckpt::HostTensor t{weft_shape, std::vector<float>(NumElements(weft_shape), 0.0f)};
  const int64_t rows = std::min(file_rows, weft_shape[0]);
  std::copy_n(file_values.begin(), rows * weft_shape[1], t.values.begin());
  return t;
}

absl::Status CheckWeights(const GptWeights& weights, const std::vector<LlmcTensor>& layout) {
  size_t expected = 0;
  for (const LlmcTensor& t : layout) {
    for (const std::string& name : t.weft_names) {
      ++expected;
      auto it = weights.find(name);
      if (it == weights.end()) {
        return InvalidArgument(
            absl::StrCat("no weights for '", name, "' (llm.c ", t.llmc_name, ")"),
            "every parameter of the tied GPT", "export with ExportWeights");
      }
      const ckpt::HostTensor& v = it->second;
      if (v.shape != t.piece_shape ||
          v.values.size() != static_cast<size_t>(NumElements(t.piece_shape))) {
        return InvalidArgument(
            absl::StrCat("weights for '", name, "' have shape ", ShapeString(v.shape), " and ",
                         v.values.size(), " values"),
            absl::StrCat("shape ", ShapeString(t.piece_shape)),
            "export with ExportWeights from a model built with this config");
      }
    }
  }
  if (weights.size() != expected) {
    std::vector<std::string> extra;
    for (const auto& [name, v] : weights) {
      bool known = false;
      for (const LlmcTensor& t : layout) {
        for (const std::string& n : t.weft_names) known = known || n == name;
      }
      if (!known) extra.push_back(name);
    }
    return InvalidArgument(
        absl::StrCat("weights llm.c has no slot for: ", absl::StrJoin(extra, ", ")),
        "only the tied GPT's parameters");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GptConfig> LlmcConfig(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(File f, OpenForRead(path));
  WEFT_ASSIGN_OR_RETURN(LlmcHeader hd, ReadHeader(f.get(), path));
  GptConfig c;
  c.set_n_layer(hd.layers);
  c.set_n_head(hd.heads);
  c.set_d_model(hd.channels);
  c.set_vocab_size(hd.vocab);
  c.set_max_seq_len(hd.max_t);
  c.set_tie_weights(true);
  c.set_mlp_ratio(4);
  int32_t multiple = hd.padded_vocab;
  for (int32_t m = 128; m >= 1; m /= 2) {
    if ((hd.vocab + m - 1) / m * m == hd.padded_vocab) {
      multiple = m;
      break;
    }
  }
  c.set_vocab_pad_multiple(multiple);
  return c;
}

// llm.c's files hold dense GPT-2 blocks: no mixture-of-experts layers.
absl::Status CheckDense(const GptConfig& config) {
  if (config.moe_every() <= 0) return absl::OkStatus();
  return InvalidArgument(
      absl::StrCat("a mixture-of-experts GPT (", config.num_experts(), " experts every ",
                   config.moe_every(), " blocks)"),
      "a dense GPT-2: llm.c's format has no experts or router",
      "use safetensors for MoE weights (ckpt export --format=safetensors)");
}

absl::StatusOr<GptWeights> ReadLlmcCheckpoint(const std::string& path, const GptConfig& config) {
  WEFT_RETURN_IF_ERROR(CheckDense(config));
  WEFT_RETURN_IF_ERROR(CheckSizes(config));
  WEFT_ASSIGN_OR_RETURN(File f, OpenForRead(path));
  WEFT_ASSIGN_OR_RETURN(LlmcHeader hd, ReadHeader(f.get(), path));
  WEFT_RETURN_IF_ERROR(CheckMatchesConfig(hd, config, path));
  WEFT_RETURN_IF_ERROR(CheckFileSize(f.get(), hd, path));
  GptWeights out;
  for (const LlmcTensor& t : Layout(hd, PaddedVocab(config), config.max_seq_len())) {
    WEFT_ASSIGN_OR_RETURN(std::vector<float> values,
                          ReadFloats(f.get(), FileElements(t), hd, t, path));
    if (t.file_rows > 0) {
      // wte keeps only the V real rows: llm.c's padding rows are not weft's.
      const int64_t rows = t.llmc_name == "wte" ? hd.vocab : t.file_rows;
      out[t.weft_names[0]] = CopyRows(values, rows, t.piece_shape);
      continue;
    }
    const int64_t n = NumElements(t.piece_shape);
    for (size_t l = 0; l < t.weft_names.size(); ++l) {
      out[t.weft_names[l]] = {
          t.piece_shape, std::vector<float>(values.begin() + l * n, values.begin() + (l + 1) * n)};
    }
  }
  return out;
}

absl::Status WriteLlmcCheckpoint(const std::string& path, const GptConfig& config,
                                 const GptWeights& weights, bool bf16) {
  WEFT_RETURN_IF_ERROR(CheckDense(config));
  WEFT_RETURN_IF_ERROR(CheckSizes(config));
  if (!config.tie_weights()) {
    return InvalidArgument("an untied GPT (its own lm_head.weight)",
                           "a model with tie_weights=true",
                           "llm.c always ties the head to wte; export to safetensors instead");
  }
  if (config.mlp_ratio() != 4) {
    return InvalidArgument(absl::StrCat("mlp_ratio=", config.mlp_ratio()), "4 (llm.c's MLP)");
  }
  const LlmcHeader hd{bf16 ? kVersionBf16 : kVersionF32,
                      config.max_seq_len(),
                      config.vocab_size(),
                      config.n_layer(),
                      config.n_head(),
                      config.d_model(),
                      static_cast<int32_t>(PaddedVocab(config))};
  const std::vector<LlmcTensor> layout = Layout(hd, hd.padded_vocab, hd.max_t);
  WEFT_RETURN_IF_ERROR(CheckWeights(weights, layout));

  int32_t header[kHeaderInts] = {};
  const int32_t fields[] = {kMagic,    hd.version, hd.max_t,    hd.vocab,
                            hd.layers, hd.heads,   hd.channels, hd.padded_vocab};
  std::memcpy(header, fields, sizeof(fields));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Open(path));
  WEFT_RETURN_IF_ERROR(
      file->Write(absl::string_view(reinterpret_cast<const char*>(header), kHeaderBytes)));
  std::vector<uint16_t> halves;  // bf16 bits of the tensor being written
  for (const LlmcTensor& t : layout) {
    for (const std::string& name : t.weft_names) {
      const std::vector<float>& v = weights.at(name).values;
      const char* bytes = reinterpret_cast<const char*>(v.data());
      size_t element = sizeof(float);
      if (bf16) {
        halves.resize(v.size());
        for (size_t i = 0; i < v.size(); ++i) halves[i] = FloatToBf16Bits(v[i]);
        bytes = reinterpret_cast<const char*>(halves.data());
        element = sizeof(uint16_t);
      }
      const size_t size = v.size() * element;
      if (t.llmc_name != "wte") {
        WEFT_RETURN_IF_ERROR(file->Write(absl::string_view(bytes, size)));
        continue;
      }
      // llm.c keeps wte's padding rows at zero; weft's hold unused init noise.
      const size_t real = static_cast<size_t>(hd.vocab) * hd.channels * element;
      WEFT_RETURN_IF_ERROR(file->Write(absl::string_view(bytes, real)));
      WEFT_RETURN_IF_ERROR(file->Write(std::string(size - real, '\0')));
    }
  }
  return file->Commit();
}

}  // namespace weft
