// PrepareData: text files -> tokenizer + train/val token shards, the work
// behind `bazel run //tools:prepare_data`. Kept apart from main() so tests
// can run it.
//
// Output directory layout (what OpenTextData in data/data.h reads):
//   tokenizer.txt       the tokenizer (char or bpe; data/tokenizer.h)
//   train_000000.bin    training tokens, llm.c shard format (data/token_shard.h)
//   val_000000.bin      validation tokens
// More shards follow (_000001, ...) when a split exceeds shard_tokens.
#ifndef WEFT_TOOLS_PREPARE_DATA_PREPARE_DATA_H_
#define WEFT_TOOLS_PREPARE_DATA_PREPARE_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::tools {

struct PrepareOptions {
  // Text files; a directory stands for its regular files (symlinks and
  // strfile *.dat indexes skipped, so /usr/share/games/fortunes works).
  std::vector<std::string> inputs;
  std::string tokenizer = "char";  // "char", "bpe", "bpe:<vocab>" or a tokenizer file
  std::string out_dir;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;  // llm.c's shard size
  bool progress = true;
};

struct PrepareSummary {
  int64_t input_bytes = 0;
  int64_t vocab_size = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  std::vector<std::string> files;  // everything written
};

absl::StatusOr<PrepareSummary> PrepareData(const PrepareOptions& options);

}  // namespace weft::tools

#endif  // WEFT_TOOLS_PREPARE_DATA_PREPARE_DATA_H_
