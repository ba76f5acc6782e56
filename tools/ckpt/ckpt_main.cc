// bazel run //tools:ckpt -- <command> CHECKPOINT [flags]
//
//   inspect      entries, shapes, placements (which rank holds which box and
//                range), checksums, and the run the checkpoint came from
//   verify       reads every byte and checks every CRC-32C
//   consolidate  --out=FILE: one safetensors file with the full state
//                (parameters and optimizer state, unsharded) and the run's
//                metadata
//   export       --format=safetensors|llmc|hf|tokenizer --out=FILE [--dtype=f32|bf16|f16]:
//                model weights only, for the safetensors Python package or
//                for llm.c (GPT checkpoints); a Hugging Face directory
//                (--format=hf --out=DIR: config.json, safetensors shards, a
//                GPT-2-scheme tokenizer.json) that transformers'
//                from_pretrained loads; or a text job's tokenizer file
//
// CHECKPOINT is a step directory, or a --checkpoint_dir (its newest one).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "checkpoint/safetensors.h"
#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/gpt2_tokenizer.h"
#include "data/tokenizer_factory.h"
#include "google/protobuf/text_format.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_weights.h"
#include "models/gpt/hf_gpt2.h"
#include "models/gpt/llmc_format.h"
#include "models/gpt/recorded_job.h"
#include "models/llama/hf_checkpoint.h"
#include "models/llama/llama_config.pb.h"
#include "models/lm/hf_files.h"
#include "tools/train_main/train_main.h"

namespace weft::ckpt {
namespace {

constexpr char kUsage[] =
    "usage: ckpt inspect|verify CHECKPOINT\n"
    "       ckpt consolidate CHECKPOINT --out=FILE.safetensors\n"
    "       ckpt export CHECKPOINT --format=safetensors|llmc|hf|tokenizer --out=FILE|DIR "
    "[--dtype=f32|bf16|f16]\n"
    "CHECKPOINT: a step_<N> directory, or a checkpoint directory (its newest step)";

constexpr char kCommands[] =
    "Inspects, verifies, consolidates and exports weft checkpoints.\n"
    "  inspect      entries, shapes, placements, checksums, and the run it came from\n"
    "  verify       reads every byte and checks every CRC-32C\n"
    "  consolidate  one safetensors file with the full, unsharded state\n"
    "  export       model weights (safetensors, llm.c for GPTs, a Hugging Face directory),\n"
    "               or the tokenizer\n";

struct Args {
  std::string command, path, out, format = "safetensors", dtype = "F32";
  std::vector<std::string> given;  // the flags on the command line, for the commands' checks
};

absl::StatusOr<Args> Parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (absl::StartsWith(s, "--out=")) a.out = s.substr(6);
    else if (absl::StartsWith(s, "--format=")) a.format = s.substr(9);
    else if (absl::StartsWith(s, "--dtype=")) a.dtype = s.substr(8);
    else if (absl::StartsWith(s, "--")) return InvalidArgument(absl::StrCat("unknown flag ", s), kUsage);
    else positional.push_back(s);
    if (absl::StartsWith(s, "--")) a.given.push_back(s.substr(0, s.find('=')));
  }
  if (positional.size() != 2) return InvalidArgument("a command and a checkpoint", kUsage);
  a.command = positional[0];
  a.path = weft::ResolveUserPath(positional[1]);
  a.out = weft::ResolveUserPath(a.out);
  // Checked before the checkpoint is opened, so a typo is named as one. Each
  // command's flags: one it does not read is refused, not ignored
  // (consolidate wrote f32 whatever --dtype said).
  const std::map<std::string, std::set<std::string>> reads = {
      {"inspect", {}}, {"verify", {}}, {"consolidate", {"--out"}},
      {"export", {"--out", "--format", "--dtype"}}};
  if (!reads.contains(a.command)) {
    return InvalidArgument(absl::StrCat("unknown command '", a.command, "'"),
                           "inspect, verify, consolidate or export", kUsage);
  }
  const bool writes = a.command == "consolidate" || a.command == "export";
  if (writes && a.out.empty()) {
    return InvalidArgument(absl::StrCat(a.command, " without --out"), "--out=FILE", kUsage);
  }
  if (a.format != "safetensors" && a.format != "llmc" && a.format != "hf" &&
      a.format != "tokenizer") {
    return InvalidArgument(absl::StrCat("--format=", a.format),
                           "safetensors, llmc, hf or tokenizer");
  }
  // Either case: the trainer's --dtype is lowercase, safetensors' uppercase.
  const std::string dtype = absl::AsciiStrToUpper(a.dtype);
  if (dtype != "F32" && dtype != "BF16" && dtype != "F16") {
    return InvalidArgument(absl::StrCat("--dtype=", a.dtype), "f32, bf16 or f16 (either case)");
  }
  a.dtype = dtype;
  for (const std::string& flag : a.given) {
    if (!reads.at(a.command).contains(flag)) {
      return InvalidArgument(absl::StrCat(flag, " with ", a.command),
                             absl::StrCat(a.command, "'s flags: ",
                                          reads.at(a.command).empty()
                                              ? "none"
                                              : absl::StrJoin(reads.at(a.command), ", ")),
                             kUsage);
    }
  }
  if (a.format == "tokenizer" &&
      std::find(a.given.begin(), a.given.end(), "--dtype") != a.given.end()) {
    return InvalidArgument("--dtype with --format=tokenizer", "no --dtype: a tokenizer is text");
  }
  if (a.format == "llmc" && a.dtype == "F16") {
    return InvalidArgument("--format=llmc --dtype=f16", "f32 or bf16: llm.c's files hold no f16",
                           "export f16 as --format=safetensors");
  }
  return a;
}

std::string Shape(const google::protobuf::RepeatedField<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

// A box and range as "rows 0:8, cols 4:8, elements [0, 32)".
std::string Placement(const Piece& p) {
  std::vector<std::string> dims;
  for (int d = 0; d < p.box_shape_size(); ++d) {
    dims.push_back(absl::StrCat(p.box_offsets(d), ":", p.box_offsets(d) + p.box_shape(d)));
  }
  return absl::StrCat("box [", absl::StrJoin(dims, ", "), "] elements [", p.begin(), ", ", p.end(),
                      ")");
}

absl::StatusOr<Checkpoint> Open(const std::string& path) {
  absl::StatusOr<Checkpoint> c = OpenCheckpoint(path);
  if (c.ok() || !absl::IsNotFound(c.status())) return c;
  // A checkpoint root: take its newest step. Not ResolveResume, whose
  // messages speak of the trainer's --resume.
  WEFT_ASSIGN_OR_RETURN(std::vector<CheckpointDir> steps, ListCheckpoints(path));
  if (steps.empty()) {
    return NotFound(absl::StrCat("no checkpoint at ", path),
                    "a step_<N> directory holding metadata.pb, or a directory of them",
                    "pass the --checkpoint_dir a training run saved to "
                    "(train with --checkpoint_every=K; a save also follows the last step)");
  }
  return OpenCheckpoint(steps.back().path);
}

void Inspect(const Checkpoint& c) {
  const Metadata& m = c.meta;
  std::vector<std::string> mesh;
  for (const MeshAxis& a : m.mesh()) mesh.push_back(absl::StrCat(a.name(), "=", a.size()));
  std::printf("checkpoint %s\n", c.dir.c_str());
  std::printf("  step %lld, %d rank%s%s%s, strategy %s, optimizer %s\n",
              static_cast<long long>(m.step()), m.world_size(), m.world_size() == 1 ? "" : "s",
              mesh.empty() ? "" : ", mesh ", absl::StrJoin(mesh, " x ").c_str(),
              m.strategies().empty() ? "none" : m.strategies().c_str(), m.optimizer().c_str());
  std::printf("  %.3f MB in %d data file%s, %d entries, chunk %lld bytes, written %s\n",
              m.total_bytes() / 1e6, m.world_size(), m.world_size() == 1 ? "" : "s",
              m.entries_size(), static_cast<long long>(m.chunk_bytes()),
              absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(m.created_unix_ms()),
                               absl::UTCTimeZone())
                  .c_str());
  std::printf("  model %s\n", m.model_summary().c_str());
  // A saved tokenizer's first line names its kind and size.
  const std::string tokenizer_head = m.tokenizer().substr(0, m.tokenizer().find('\n'));
  std::printf("  tokenizer %s\n", m.tokenizer().empty() ? "none saved" : tokenizer_head.c_str());
  if (m.ranks_size() > 0) {
    std::printf("  data position (rank 0): %s\n", m.ranks(0).train_loader().c_str());
  }
  for (const Entry& e : m.entries()) {
    std::printf("%s %s %s, %d piece%s\n", e.name().c_str(), Shape(e.global_shape()).c_str(),
                e.dtype().c_str(), e.pieces_size(), e.pieces_size() == 1 ? "" : "s");
    for (const Piece& p : e.pieces()) {
      std::vector<std::string> crcs;
      for (uint32_t crc : p.chunk_crc32c()) crcs.push_back(absl::StrFormat("%08x", crc));
      if (crcs.size() > 4) crcs.resize(4), crcs.push_back("...");
      std::printf("    rank %d %s%s @%lld +%lld %s crc32c %s\n", p.rank(), p.file().c_str(),
                  p.replica() == 0 ? "" : absl::StrCat(" (replica ", p.replica(), ")").c_str(),
                  static_cast<long long>(p.offset()), static_cast<long long>(p.length()),
                  Placement(p).c_str(), absl::StrJoin(crcs, ",").c_str());
    }
  }
  std::printf("job config:\n%s\n", m.job_config().c_str());
}

// `format` says what the file holds: "weft-consolidated" (parameters and
// optimizer state) or "weft-weights" (an export's weights only).
std::map<std::string, std::string> RunMetadata(const Checkpoint& c, const std::string& format) {
  std::map<std::string, std::string> md = {
      {"format", format},
      {"step", absl::StrCat(c.meta.step())},
      {"strategies", c.meta.strategies()},
      {"optimizer", c.meta.optimizer()},
      {"job_config", c.meta.job_config()},
      {"model", c.meta.model_summary()},
  };
  if (c.meta.ranks_size() > 0) md["train_loader"] = c.meta.ranks(0).train_loader();
  // So `sample --init_from=FILE.safetensors` needs no --tokenizer.
  if (!c.meta.tokenizer().empty()) md["tokenizer"] = c.meta.tokenizer();
  return md;
}

// --format=hf: the model's Hugging Face architecture, and its tokenizer
// when it has a Hugging Face form (GPT-2's scheme).
absl::Status ExportHf(const Args& a, const Checkpoint& c,
                      std::map<std::string, HostTensor> weights) {
  HfExport hf;
  if (absl::StartsWith(c.meta.model_summary(), "Llama")) {
    LlamaJob job;
    if (!google::protobuf::TextFormat::ParseFromString(c.meta.job_config(), &job)) {
      return FailedPrecondition(absl::StrCat(c.dir, " records no Llama job"),
                                "a checkpoint of //models/llama:train");
    }
    WEFT_ASSIGN_OR_RETURN(hf, ToHfLlama(job.model(), weights, a.dtype));
  } else {
    WEFT_ASSIGN_OR_RETURN(GptJob job, ParseRecordedGptJob(c.meta.job_config(), c.dir));
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> model,
                          Gpt::Create(job.model(), job.train().seq_len()));
    ToModelShapes(*model, &weights);
    WEFT_ASSIGN_OR_RETURN(hf, ToHfGpt2(job.model(), weights, a.dtype));
  }
  HfWriteOptions o{.dtype = a.dtype};
  std::string tokenizer_note = "no tokenizer in the checkpoint";
  if (!c.meta.tokenizer().empty()) {
    WEFT_ASSIGN_OR_RETURN(auto tok, data::ParseTokenizer(c.meta.tokenizer(), c.dir));
    if (const auto* gpt2 = dynamic_cast<const data::Gpt2Tokenizer*>(tok.get())) {
      o.files["tokenizer.json"] = gpt2->ToTokenizerJson();
      tokenizer_note = "tokenizer.json";
    } else {
      tokenizer_note = absl::StrCat(
          "no tokenizer.json: weft's ", tok->kind(),
          " tokenizer has no Hugging Face form (--format=tokenizer writes weft's file)");
    }
  }
  WEFT_RETURN_IF_ERROR(WriteHfDirectory(a.out, hf.config_json, hf.tensors, o));
  std::printf("wrote %s (Hugging Face): %zu tensors at step %lld; %s\n", a.out.c_str(),
              hf.tensors.size(), static_cast<long long>(c.meta.step()), tokenizer_note.c_str());
  return absl::OkStatus();
}

absl::Status Run(const Args& a) {
  WEFT_ASSIGN_OR_RETURN(Checkpoint c, Open(a.path));
  if (a.command == "inspect") {
    Inspect(c);
    return absl::OkStatus();
  }
  if (a.command == "verify") {
    int64_t bytes = 0;
    WEFT_RETURN_IF_ERROR(VerifyChecksums(c, &bytes));
    int64_t pieces = 0;
    for (const Entry& e : c.meta.entries()) pieces += e.pieces_size();
    std::printf("OK: %s: %lld pieces, %.3f MB, every CRC-32C matches\n", c.dir.c_str(),
                static_cast<long long>(pieces), bytes / 1e6);
    return absl::OkStatus();
  }
  if (a.command == "consolidate") {
    WEFT_ASSIGN_OR_RETURN(auto full, ReadFullTensors(c, nullptr));
    WEFT_RETURN_IF_ERROR(WriteSafetensors(
        a.out, full, {.dtype = "F32", .metadata = RunMetadata(c, "weft-consolidated")}));
    std::printf("wrote %s: %zu tensors (parameters and optimizer state) at step %lld\n",
                a.out.c_str(), full.size(), static_cast<long long>(c.meta.step()));
    return absl::OkStatus();
  }
  if (a.format == "tokenizer") {  // the text job's tokenizer file, for --tokenizer=FILE
    if (c.meta.tokenizer().empty()) {
      return FailedPrecondition(absl::StrCat(c.dir, " carries no tokenizer"),
                                "a checkpoint of a text job (they save their tokenizer)");
    }
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Open(a.out));
    WEFT_RETURN_IF_ERROR(file->Write(c.meta.tokenizer()));
    WEFT_RETURN_IF_ERROR(file->Commit());
    std::printf("wrote %s (tokenizer) from %s\n", a.out.c_str(), c.dir.c_str());
    return absl::OkStatus();
  }
  WEFT_ASSIGN_OR_RETURN(auto weights, ReadFullTensors(c, [](const std::string& name) {
                          return name.find(':') == std::string::npos;
                        }));
  if (a.format == "hf") return ExportHf(a, c, std::move(weights));
  // A GPT's weights leave in the model's own shapes, whatever the layout
  // they were saved under (tp saves a fused qkv as (3, C, C)).
  absl::StatusOr<GptJob> job = ParseRecordedGptJob(c.meta.job_config(), c.dir);
  const bool gpt = job.ok();
  if (gpt) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> model,
                          Gpt::Create(job->model(), job->train().seq_len()));
    ToModelShapes(*model, &weights);
  }
  if (a.format == "safetensors") {
    WEFT_RETURN_IF_ERROR(WriteSafetensors(
        a.out, weights, {.dtype = a.dtype, .metadata = RunMetadata(c, "weft-weights")}));
  } else {  // llmc
    if (!gpt) {
      return FailedPrecondition(absl::StrCat(c.dir, " does not record a GPT job config"),
                                "a checkpoint of //models/gpt:train",
                                "llm.c's format holds GPT-2 models only");
    }
    WEFT_RETURN_IF_ERROR(WriteLlmcCheckpoint(a.out, job->model(), weights, a.dtype == "BF16"));
  }
  std::printf("wrote %s (%s): %zu weight tensors at step %lld\n", a.out.c_str(), a.format.c_str(),
              weights.size(), static_cast<long long>(c.meta.step()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace weft::ckpt

// Exit status as the trainers': 2 for a command line that does not parse,
// 1 for a command that fails, 0 otherwise.
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s%s\n", weft::ckpt::kCommands, weft::ckpt::kUsage);
      return 0;
    }
  }
  absl::StatusOr<weft::ckpt::Args> args = weft::ckpt::Parse(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "ckpt: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  if (absl::Status s = weft::ckpt::Run(*args); !s.ok()) {
    std::fprintf(stderr, "ckpt: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
