// prepare_data: tokenize text files into llm.c-format token shards.
//
//   bazel run //tools:prepare_data -- --input=data/shakespeare.txt
//       --tokenizer=char --out=/tmp/shakespeare_char --val_fraction=0.1
//   (one command line)
//
// --input takes comma-separated files or directories. --tokenizer is char,
// bpe, bpe:<vocab size>, or an existing tokenizer file (to encode new text
// with the same ids). See prepare_data.h for the output layout.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tools/prepare_data/prepare_data.h"

ABSL_FLAG(std::string, input, "", "Comma-separated text files or directories.");
ABSL_FLAG(std::string, tokenizer, "char",
          "char | bpe | bpe:<vocab size> | path of a tokenizer.txt to reuse.");
ABSL_FLAG(std::string, out, "", "Output directory for tokenizer.txt and the shards.");
ABSL_FLAG(double, val_fraction, 0.1, "Fraction of each file (its tail) used for validation.");
ABSL_FLAG(int64_t, shard_tokens, 100'000'000, "Maximum tokens per shard file.");
ABSL_FLAG(bool, progress, true, "Show progress bars on long inputs.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Tokenizes text into train/val token shards.\n"
      "  prepare_data --input=a.txt,b.txt --tokenizer=bpe:4096 --out=DIR");
  absl::ParseCommandLine(argc, argv);
  weft::tools::PrepareOptions options;
  options.inputs = absl::StrSplit(absl::GetFlag(FLAGS_input), ',', absl::SkipEmpty());
  options.tokenizer = absl::GetFlag(FLAGS_tokenizer);
  options.out_dir = absl::GetFlag(FLAGS_out);
  options.val_fraction = absl::GetFlag(FLAGS_val_fraction);
  options.shard_tokens = absl::GetFlag(FLAGS_shard_tokens);
  options.progress = absl::GetFlag(FLAGS_progress);

  const absl::Time start = absl::Now();
  auto summary = weft::tools::PrepareData(options);
  if (!summary.ok()) {
    std::fprintf(stderr, "prepare_data: %s\n", summary.status().ToString().c_str());
    return 1;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("read %.2f MB, vocab %lld (%s), %lld train + %lld val tokens "
              "(%.2f bytes/token) in %.2fs\n",
              summary->input_bytes / 1e6, static_cast<long long>(summary->vocab_size),
              options.tokenizer.c_str(), static_cast<long long>(summary->train_tokens),
              static_cast<long long>(summary->val_tokens),
              static_cast<double>(summary->input_bytes) /
                  std::max<int64_t>(1, summary->train_tokens + summary->val_tokens),
              seconds);
  for (const std::string& f : summary->files) std::printf("  wrote %s\n", f.c_str());
  return 0;
}
