// Data loader benchmark: `bazel run -c opt //tools/bench:dataloader`.
//
// Measures what the training loop sees from DataLoader::Next: samples/s and
// GB/s of batch data delivered, for 0, 1, 2 and 4 workers, on
//   - a GPT-2-like token workload (uint16 shard, T=1024, B=8 and 32, shuffled),
//   - Fashion-MNIST (784 floats + a label per sample),
// then the fraction of a simulated training step spent waiting for data,
// and BPE/char tokenizer throughput. --device=cuda adds the async H2D copy
// (the binary links the CUDA backend when the toolkit exists).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/tensor/device.h"
#include "core/tensor/stream.h"
#include "data/bpe_trainer.h"
#include "data/char_tokenizer.h"
#include "data/tokenizer_factory.h"
#include "data/data_loader.h"
#include "data/file_util.h"
#include "data/image_dataset.h"
#include "data/token_shard.h"
#include "data/token_window_dataset.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(std::string, device, "cpu", "cpu or cuda[:N]: where batches are delivered.");
ABSL_FLAG(double, seconds, 1.5, "Measuring time per configuration.");
ABSL_FLAG(int64_t, tokens, 64'000'000, "Tokens in the generated GPT-2-like shard.");
ABSL_FLAG(std::string, shard_dir, "/tmp", "Where the generated shard is written.");
ABSL_FLAG(std::string, fmnist_dir, weft::data::kFashionMnistDir, "Fashion-MNIST IDX directory.");
ABSL_FLAG(std::string, text,
          "/work/shared/data/tinyshakespeare/input.txt,/usr/share/games/fortunes/computers",
          "Comma-separated candidates for the tokenizer corpus (first that exists).");
ABSL_FLAG(std::string, tokenizer_files, "",
          "Comma-separated tokenizer files (e.g. a Hugging Face tokenizer.json) to time on "
          "--encode_texts, each text's ids hashed (FNV-1a over little-endian int32) to compare "
          "with another implementation's.");
ABSL_FLAG(std::string, encode_texts, "", "Comma-separated text files for --tokenizer_files.");
ABSL_FLAG(bool, only_tokenizers, false, "Run the tokenizer benchmarks only.");
ABSL_FLAG(double, step_ms, 20.0,
          "Simulated compute per step for the data-wait measurement (about a GPT-2 124M "
          "step at B=8, T=1024 on one H100).");
ABSL_FLAG(double, heavy_us, 50.0, "Per-sample CPU work of the decode-like workload.");
ABSL_FLAG(double, wait_us, 200.0, "Per-sample wait of the slow-storage-like workload.");

namespace weft::data {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

template <typename T>
T CheckOk(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "error: %s\n", v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}

void CheckOk(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

struct Result {
  double samples_per_s;
  double gb_per_s;
};

// Pulls batches as fast as possible for `seconds`.
Result Measure(std::shared_ptr<const Dataset> ds, DataLoader::Options o, double seconds) {
  auto loader = CheckOk(DataLoader::Create(ds, o));
  const Stream compute = o.device.is_cuda() ? CheckOk(Stream::Create(o.device))
                                            : Stream::Default(o.device);
  size_t sample_bytes = 0;
  for (const FieldSpec& f : ds->fields()) sample_bytes += f.SampleBytes();
  for (int i = 0; i < 3; ++i) CheckOk(CheckOk(loader->Next()).WaitOn(compute));  // warm up
  int64_t samples = 0;
  const Clock::time_point start = Clock::now();
  Clock::time_point now = start;
  while (Seconds(start, now) < seconds) {
    Batch b = CheckOk(loader->Next());
    CheckOk(b.WaitOn(compute));
    samples += b.rows();
    now = Clock::now();
  }
  CheckOk(compute.Synchronize());
  const double t = Seconds(start, Clock::now());
  return {samples / t, samples * static_cast<double>(sample_bytes) / t / 1e9};
}

// Fraction of wall time a loop of (Next, simulated step) spends inside Next.
double WaitFraction(std::shared_ptr<const Dataset> ds, DataLoader::Options o, double step_ms,
                    int steps) {
  auto loader = CheckOk(DataLoader::Create(ds, o));
  for (int i = 0; i < 3; ++i) CheckOk(loader->Next());
  double waited = 0;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < steps; ++i) {
    const Clock::time_point t0 = Clock::now();
    Batch b = CheckOk(loader->Next());
    waited += Seconds(t0, Clock::now());
    // A GPU step keeps the host mostly idle: sleep, don't spin.
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(step_ms * 1000)));
  }
  return waited / Seconds(start, Clock::now());
}

// Wraps a dataset and adds `us` per sample, either of CPU work (standing in
// for decoding or augmentation) or of waiting (reads from a slow or remote
// file system): the cases where workers pay off.
class HeavyDataset : public Dataset {
 public:
  HeavyDataset(std::shared_ptr<const Dataset> inner, double us, bool spin)
      : inner_(std::move(inner)), us_(us), spin_(spin) {}
  int64_t num_samples() const override { return inner_->num_samples(); }
  std::vector<FieldSpec> fields() const override { return inner_->fields(); }
  absl::Status Fill(int64_t index, absl::Span<void* const> dst) const override {
    const auto wait = std::chrono::nanoseconds(static_cast<int64_t>(us_ * 1000));
    if (spin_) {
      const Clock::time_point end = Clock::now() + wait;
      while (Clock::now() < end) {
      }
    } else {
      std::this_thread::sleep_for(wait);
    }
    return inner_->Fill(index, dst);
  }
  std::string Describe() const override { return "heavy " + inner_->Describe(); }

 private:
  std::shared_ptr<const Dataset> inner_;
  double us_;
  bool spin_;
};

std::string MakeGpt2Shard(int64_t tokens) {
  const std::string path = JoinPath(absl::GetFlag(FLAGS_shard_dir), "weft_bench_gpt2.bin");
  std::vector<int32_t> ids(tokens);
  std::mt19937 rng(1);
  for (int32_t& t : ids) t = static_cast<int32_t>(rng() % 50257);
  CheckOk(WriteTokenShard(path, ids, {.vocab_size = 50257}));
  return path;
}

void TokenBenchmarks(const Device& device, double seconds) {
  const std::string shard = MakeGpt2Shard(absl::GetFlag(FLAGS_tokens));
  auto ds = CheckOk(TokenWindowDataset::OpenShards({shard}, {.seq_len = 1024, .vocab_size = 50257}));
  std::printf("\n## GPT-2-like tokens: %lld-token uint16 shard, T=1024, shuffled, device %s\n\n",
              static_cast<long long>(absl::GetFlag(FLAGS_tokens)), device.ToString().c_str());
  std::printf("| B | workers | samples/s | tokens/s | GB/s (int32 inputs+targets) |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (int64_t b : {8, 32}) {
    for (int workers : {0, 1, 2, 4}) {
      DataLoader::Options o;
      o.batch_size = b;
      o.num_workers = workers;
      o.prefetch_depth = 4;
      o.device = device;
      const Result r = Measure(ds, o, seconds);
      std::printf("| %lld | %d | %.0f | %.2fM | %.2f |\n", static_cast<long long>(b), workers,
                  r.samples_per_s, r.samples_per_s * 1024 / 1e6, r.gb_per_s);
      std::fflush(stdout);
    }
  }
  const double step_ms = absl::GetFlag(FLAGS_step_ms);
  std::printf("\nData wait with a simulated %.0f ms step (B=8, T=1024):\n\n", step_ms);
  std::printf("| workers | time in Next() |\n|---:|---:|\n");
  for (int workers : {0, 1, 2, 4}) {
    DataLoader::Options o;
    o.batch_size = 8;
    o.num_workers = workers;
    o.device = device;
    std::printf("| %d | %.3f%% |\n", workers, 100 * WaitFraction(ds, o, step_ms, 100));
  }
  std::remove(shard.c_str());
}

void ImageBenchmarks(const Device& device, double seconds) {
  auto ds = OpenFashionMnist(absl::GetFlag(FLAGS_fmnist_dir), /*train=*/true);
  if (!ds.ok()) {
    std::printf("\n(Fashion-MNIST skipped: %s)\n", ds.status().ToString().c_str());
    return;
  }
  std::printf("\n## Fashion-MNIST train (60000 x 784 float32 + int32 label), shuffled, device %s\n\n",
              device.ToString().c_str());
  std::printf("| B | workers | samples/s | GB/s |\n|---:|---:|---:|---:|\n");
  for (int64_t b : {64, 256}) {
    for (int workers : {0, 1, 2, 4}) {
      DataLoader::Options o;
      o.batch_size = b;
      o.num_workers = workers;
      o.device = device;
      const Result r = Measure(*ds, o, seconds);
      std::printf("| %lld | %d | %.0f | %.2f |\n", static_cast<long long>(b), workers,
                  r.samples_per_s, r.gb_per_s);
      std::fflush(stdout);
    }
  }
  for (bool spin : {true, false}) {
    const double us = spin ? absl::GetFlag(FLAGS_heavy_us) : absl::GetFlag(FLAGS_wait_us);
    auto heavy = std::make_shared<HeavyDataset>(*ds, us, spin);
    std::printf("\n## Fashion-MNIST plus %.0f us per sample of %s, B=64\n\n", us,
                spin ? "CPU work (decode-like)" : "waiting (slow-storage-like)");
    std::printf("| workers | samples/s | vs 0 workers |\n|---:|---:|---:|\n");
    double base = 0;
    for (int workers : {0, 1, 2, 4}) {
      DataLoader::Options o;
      o.batch_size = 64;
      o.num_workers = workers;
      o.device = device;
      const Result r = Measure(heavy, o, seconds);
      if (workers == 0) base = r.samples_per_s;
      std::printf("| %d | %.0f | %.2fx |\n", workers, r.samples_per_s, r.samples_per_s / base);
      std::fflush(stdout);
    }
  }
}

uint64_t Fnv1a(const std::vector<int32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t id : ids) {
    const uint32_t u = static_cast<uint32_t>(id);
    for (int b = 0; b < 4; ++b) {
      h ^= (u >> (8 * b)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

// Loaded tokenizer files on given texts: encode speed and the ids' hash.
void TokenizerFileBenchmarks() {
  const std::string files = absl::GetFlag(FLAGS_tokenizer_files);
  if (files.empty()) return;
  std::printf("\n## Tokenizer files, one thread\n\n");
  std::printf("| tokenizer | text | MB | ids | FNV-1a of the ids | encode MB/s | decode MB/s |\n");
  std::printf("|---|---|---:|---:|---|---:|---:|\n");
  for (absl::string_view f : absl::StrSplit(files, ',', absl::SkipEmpty())) {
    auto tok = CheckOk(LoadTokenizer(std::string(f)));
    for (absl::string_view p : absl::StrSplit(absl::GetFlag(FLAGS_encode_texts), ',',
                                              absl::SkipEmpty())) {
      const std::string text = CheckOk(ReadFileToString(std::string(p)));
      const double mb = text.size() / 1e6;
      Clock::time_point t0 = Clock::now();
      std::vector<int32_t> ids;
      int reps = 0;
      do {
        ids = CheckOk(tok->Encode(text));
        ++reps;
      } while (Seconds(t0, Clock::now()) < 1.0);
      const double encode_s = Seconds(t0, Clock::now()) / reps;
      t0 = Clock::now();
      const std::string back = CheckOk(tok->Decode(ids));
      const double decode_s = Seconds(t0, Clock::now());
      if (back != text) std::printf("ROUND TRIP FAILED\n");
      std::printf("| %s | %s | %.2f | %zu | %016llx | %.1f | %.0f |\n", std::string(f).c_str(),
                  std::string(p).c_str(), mb, ids.size(),
                  static_cast<unsigned long long>(Fnv1a(ids)), mb / encode_s, mb / decode_s);
      std::fflush(stdout);
    }
  }
}

void TokenizerBenchmarks() {
  std::string path;
  for (absl::string_view p : absl::StrSplit(absl::GetFlag(FLAGS_text), ',', absl::SkipEmpty())) {
    if (FileExists(std::string(p))) {
      path = std::string(p);
      break;
    }
  }
  if (path.empty()) {
    std::printf("\n(tokenizer benchmark skipped: no corpus found)\n");
    return;
  }
  const std::string text = CheckOk(ReadFileToString(path));
  const double mb = text.size() / 1e6;
  std::printf("\n## Tokenizers on %s (%.2f MB), one thread\n\n", path.c_str(), mb);
  std::printf("| tokenizer | train MB/s | encode MB/s | decode MB/s | bytes/token |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (int64_t vocab : {1024, 4096, 16384}) {
    Clock::time_point t0 = Clock::now();
    auto tok = TrainBpe(text, {.vocab_size = vocab});
    if (!tok.ok()) {
      std::printf("| bpe:%lld | (%s) | | | |\n", static_cast<long long>(vocab),
                  std::string(tok.status().message()).c_str());
      continue;
    }
    const double train_s = Seconds(t0, Clock::now());
    t0 = Clock::now();
    std::vector<int32_t> ids;
    int reps = 0;
    do {
      ids = CheckOk((*tok)->Encode(text));
      ++reps;
    } while (Seconds(t0, Clock::now()) < 1.0);
    const double encode_s = Seconds(t0, Clock::now()) / reps;
    t0 = Clock::now();
    const std::string back = CheckOk((*tok)->Decode(ids));
    const double decode_s = Seconds(t0, Clock::now());
    if (back != text) std::printf("ROUND TRIP FAILED\n");
    std::printf("| bpe:%lld | %.1f | %.1f | %.0f | %.2f |\n", static_cast<long long>(vocab),
                mb / train_s, mb / encode_s, mb / decode_s,
                static_cast<double>(text.size()) / ids.size());
  }
  Clock::time_point t0 = Clock::now();
  auto chars = CheckOk(CharTokenizer::Build(text));
  const double build_s = Seconds(t0, Clock::now());
  t0 = Clock::now();
  std::vector<int32_t> ids = CheckOk(chars->Encode(text));
  const double encode_s = Seconds(t0, Clock::now());
  t0 = Clock::now();
  const std::string back = CheckOk(chars->Decode(ids));
  const double decode_s = Seconds(t0, Clock::now());
  std::printf("| char (%lld) | %.0f | %.0f | %.0f | 1.00 |\n",
              static_cast<long long>(chars->vocab_size()), mb / build_s, mb / encode_s,
              mb / decode_s);
}

}  // namespace
}  // namespace weft::data

int main(int argc, char** argv) {
  weft::bench::ParseBenchmarkFlags(
      argc, argv,
      "Data loader throughput: token windows, Fashion-MNIST images and tokenizers, delivered\n"
      "to the CPU or a GPU.\nusage: dataloader [--device=cpu|cuda] [--seconds=S]");
  weft::bench::RequireFlag(absl::GetFlag(FLAGS_seconds) > 0,
                           absl::StrCat("seconds=", absl::GetFlag(FLAGS_seconds)),
                           "a positive measuring time");
  weft::bench::RequireFlag(absl::GetFlag(FLAGS_tokens) > 0,
                           absl::StrCat("tokens=", absl::GetFlag(FLAGS_tokens)), "at least 1");
  const weft::Device device = weft::data::CheckOk(weft::ParseDevice(absl::GetFlag(FLAGS_device)));
  const double seconds = absl::GetFlag(FLAGS_seconds);
  std::printf("# weft data loader benchmark (%u hardware threads)\n",
              std::thread::hardware_concurrency());
  if (!absl::GetFlag(FLAGS_only_tokenizers)) {
    weft::data::TokenBenchmarks(device, seconds);
    weft::data::ImageBenchmarks(device, seconds);
  }
  weft::data::TokenizerBenchmarks();
  weft::data::TokenizerFileBenchmarks();
  return 0;
}
