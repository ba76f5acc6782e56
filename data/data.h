// weft data in one include: loaders for language-model text and for
// Fashion-MNIST, ready for a training loop.
//
// Text (char-level or BPE), from raw text files or token shards:
//
//   weft::data::TextDataOptions opt;
//   opt.path = "/work/shared/data/tinyshakespeare/input.txt";  // or a shard dir
//   opt.tokenizer = "char";                 // or "bpe:4096", or a tokenizer.txt
//   opt.seq_len = 256;
//   opt.loader.batch_size = 8;              // per rank, per forward
//   opt.loader.rank = rank; opt.loader.world_size = world; opt.loader.seed = seed;
//   opt.loader.device = weft::Device::Cuda(0);
//   WEFT_ASSIGN_OR_RETURN(weft::data::TextData data, weft::data::OpenTextData(opt));
//   model_config.vocab_size = data.vocab_size;
//   WEFT_ASSIGN_OR_RETURN(weft::data::Batch b, data.train->Next());
//   WEFT_RETURN_IF_ERROR(b.WaitOn(compute_stream));
//   const weft::Tensor& x = b.Get("inputs");   // int32 [B, T]
//   const weft::Tensor& y = b.Get("targets");  // int32 [B, T], x shifted by one
//
// Fashion-MNIST (Debian's dataset-fashion-mnist):
//
//   weft::data::ImageDataOptions opt;
//   opt.loader.batch_size = 64;
//   WEFT_ASSIGN_OR_RETURN(weft::data::ImageData data, weft::data::OpenFashionMnistData(opt));
//   Batch b = data.train->Next().value();
//   b.Get("image");  // float32 [B, 784] in [0, 1] (or standardized, see ImageDatasetOptions)
//   b.Get("label");  // int32 [B]
//
// Checkpoints store loader->State().Serialize(); resuming calls
// loader->Restore(LoaderState::Parse(text).value()) to continue with the
// identical batches. See data_loader.h for threads, lifetimes and streams.
#ifndef WEFT_DATA_DATA_H_
#define WEFT_DATA_DATA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "data/data_loader.h"
#include "data/image_dataset.h"
#include "data/loader_state.h"
#include "data/tokenizer.h"

namespace weft::data {

// Text files read, split and tokenized once for many OpenTextData calls of
// one process that name the same files (the memory planner's dry runs open
// the job's data once per layout and pipeline stage: about a second each
// for a 20 MB corpus). Only text files are kept: shards are mapped.
class TextSourceCache;
std::shared_ptr<TextSourceCache> MakeTextSourceCache();

struct TextDataOptions {
  // One of:
  //  - text files, comma-separated: tokenized in memory at start-up; each
  //    file's last val_fraction of bytes is the validation split;
  //  - a token shard (.bin): training data only;
  //  - a directory of shards from //tools:prepare_data or llm.c: files
  //    named *train*.bin and *val*.bin, plus tokenizer.txt when present.
  std::string path;
  // For text: "char", "bpe", "bpe:<vocab>" (trained on the training split),
  // or a tokenizer file. For shards: a tokenizer file, else the directory's
  // tokenizer.txt is used when present (only for decoding and vocab size);
  // "bpe" specs are refused there (the shards are tokenized already).
  std::string tokenizer = "char";
  double val_fraction = 0.1;
  int64_t seq_len = 256;
  // Checked against every token read. 0: the tokenizer's size, else the
  // shards' recorded size (llm.c shards record none: set it, e.g. 50257).
  int64_t vocab_size = 0;
  // The training loader. Validation uses the same options without shuffling
  // and without drop_last, so it covers every window (its last batch may be
  // short).
  DataLoader::Options loader;
  // Null: read and tokenize the text (the default).
  std::shared_ptr<TextSourceCache> cache;
};

struct TextData {
  std::shared_ptr<const Tokenizer> tokenizer;  // null for shards without a tokenizer file
  int64_t vocab_size = 0;
  std::unique_ptr<DataLoader> train;
  std::unique_ptr<DataLoader> val;  // null without a validation split
};

absl::StatusOr<TextData> OpenTextData(const TextDataOptions& options);

struct ImageDataOptions {
  std::string dir = kFashionMnistDir;
  ImageDatasetOptions dataset;  // pixel scaling
  // The training loader; the test loader uses the same options without
  // shuffling and without dropping the last short batch.
  DataLoader::Options loader;
};

struct ImageData {
  int64_t num_features = 0;  // 784 for 28x28
  int num_classes = 0;
  std::unique_ptr<DataLoader> train;
  std::unique_ptr<DataLoader> test;
};

absl::StatusOr<ImageData> OpenFashionMnistData(const ImageDataOptions& options);

}  // namespace weft::data

#endif  // WEFT_DATA_DATA_H_
