#include "data/data_loader.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "data/test_util.h"
#include "data/token_buffer.h"
#include "data/token_window_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::SyntheticDataset;

DataLoader::Options Opts(int64_t batch, int workers, int prefetch = 2) {
  DataLoader::Options o;
  o.batch_size = batch;
  o.num_workers = workers;
  o.prefetch_depth = prefetch;
  o.seed = 11;
  return o;
}

std::unique_ptr<DataLoader> Make(std::shared_ptr<const Dataset> ds, const DataLoader::Options& o) {
  auto loader = DataLoader::Create(std::move(ds), o);
  EXPECT_TRUE(loader.ok()) << loader.status();
  return *std::move(loader);
}

// The sample indices of the next `n` batches, checking every payload.
std::vector<std::vector<int32_t>> Take(DataLoader& loader, int n) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    auto batch = loader.Next();
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) break;
    const Tensor& index = batch->Get("index");
    const Tensor& payload = batch->Get("payload");
    std::vector<int32_t> ids(index.data<int32_t>(), index.data<int32_t>() + index.numel());
    for (size_t r = 0; r < ids.size(); ++r) {
      EXPECT_EQ(payload.data<float>()[3 * r + 1], ids[r] + 0.5f);
    }
    out.push_back(std::move(ids));
  }
  return out;
}

TEST(DataLoaderTest, BatchesFollowTheSamplerAcrossEpochs) {
  auto ds = std::make_shared<SyntheticDataset>(10);
  auto loader = Make(ds, Opts(3, 2));
  EXPECT_EQ(loader->batches_per_epoch(), 3);  // drop_last: 10 / 3
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    SamplerOptions so{.num_samples = 10, .shuffle = true, .seed = 11};
    DistributedSampler sampler = *DistributedSampler::Create(so);
    sampler.SetEpoch(epoch);
    const std::vector<int64_t> order = sampler.Indices();
    for (int64_t j = 0; j < 3; ++j) {
      auto batch = loader->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      EXPECT_EQ(batch->epoch(), epoch);
      EXPECT_EQ(batch->index(), j);
      EXPECT_EQ(batch->rows(), 3);
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(batch->Get("index").data<int32_t>()[r], order[j * 3 + r]);
      }
      EXPECT_TRUE(batch->WaitOn(Stream::Default(Device::Cpu())).ok());
    }
  }
}

TEST(DataLoaderTest, WorkerCountAndPrefetchDoNotChangeBatches) {
  auto ds = std::make_shared<SyntheticDataset>(37);
  auto reference_loader = Make(ds, Opts(4, 0));
  const auto reference = Take(*reference_loader, 25);  // almost 3 epochs of 9
  for (int workers : {1, 2, 4}) {
    for (int prefetch : {1, 3}) {
      auto loader = Make(ds, Opts(4, workers, prefetch));
      EXPECT_EQ(Take(*loader, 25), reference) << workers << " workers, prefetch " << prefetch;
    }
  }
}

TEST(DataLoaderTest, ReportsWhichWorkerAssembledEachBatchAndWhen) {
  auto ds = std::make_shared<SyntheticDataset>(40);
  for (int workers : {0, 2}) {
    std::mutex mu;
    std::map<int64_t, std::pair<int, int64_t>> seen;  // seq -> worker, duration
    DataLoader::Options o = Opts(4, workers);
    o.on_assembled = [&](int worker, int64_t seq, int64_t begin_us, int64_t end_us) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_LE(begin_us, end_us);
      seen[seq] = {worker, end_us - begin_us};
    };
    auto loader = Make(ds, o);
    Take(*loader, 6);
    loader.reset();  // joins the workers
    for (int64_t seq = 0; seq < 6; ++seq) {
      ASSERT_TRUE(seen.contains(seq)) << "batch " << seq << " with " << workers << " workers";
      if (workers == 0) {
        EXPECT_EQ(seen[seq].first, -1);
      } else {
        EXPECT_GE(seen[seq].first, 0);
        EXPECT_LT(seen[seq].first, workers);
      }
    }
  }
}

TEST(DataLoaderTest, WorkerCountDoesNotChangeTokenWindows) {
  std::vector<int32_t> tokens(5000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919) % 1000);
  auto buffer = TokenBuffer::FromTokens("mem", tokens, 1000);
  auto ds = *TokenWindowDataset::Create({*buffer}, {.seq_len = 16});
  std::vector<std::vector<int32_t>> reference;
  for (int workers : {0, 1, 2, 4}) {
    auto loader = Make(ds, Opts(8, workers));
    std::vector<std::vector<int32_t>> got;
    for (int i = 0; i < 60; ++i) {
      Batch b = *loader->Next();
      const Tensor& x = b.Get("inputs");
      const Tensor& y = b.Get("targets");
      ASSERT_EQ(x.shape(), (Shape{8, 16}));
      got.emplace_back(x.data<int32_t>(), x.data<int32_t>() + x.numel());
      for (int r = 0; r < 8; ++r) {
        for (int t = 0; t + 1 < 16; ++t) {
          ASSERT_EQ(y.data<int32_t>()[r * 16 + t], x.data<int32_t>()[r * 16 + t + 1])
              << "targets are inputs shifted by one";
        }
      }
    }
    if (reference.empty()) {
      reference = got;
    } else {
      EXPECT_EQ(got, reference) << workers << " workers";
    }
  }
}

TEST(DataLoaderTest, StateDescribesTheNextBatchNotThePrefetchedOnes) {
  auto loader = Make(std::make_shared<SyntheticDataset>(40), Opts(5, 4, 4));
  Take(*loader, 3);
  const LoaderState s = loader->State();
  EXPECT_EQ(s.epoch, 0);
  EXPECT_EQ(s.batch, 3);
  Take(*loader, 6);
  EXPECT_EQ(loader->State().epoch, 1);
  EXPECT_EQ(loader->State().batch, 1);
}

TEST(DataLoaderTest, ResumeGivesTheIdenticalBatchSequence) {
  auto ds = std::make_shared<SyntheticDataset>(29);
  auto original = Make(ds, Opts(4, 2, 3));  // 7 batches per epoch
  Take(*original, 10);                       // into epoch 1
  const std::string saved = original->State().Serialize();
  const auto expected = Take(*original, 12);

  // A fresh loader with another worker count, restored from text.
  auto resumed = Make(ds, Opts(4, 3, 1));
  Take(*resumed, 2);  // whatever it did before must not matter
  auto state = LoaderState::Parse(saved);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_TRUE(resumed->Restore(*state).ok());
  EXPECT_EQ(resumed->State(), *state);
  EXPECT_EQ(Take(*resumed, 12), expected);

  // Rewinding the original loader replays the same batches too.
  ASSERT_TRUE(original->Restore(*state).ok());
  EXPECT_EQ(Take(*original, 12), expected);
}

// Restoring a loader to where it stands keeps the batches its workers
// already assembled: each is assembled once (an evaluation restores its
// validation loader to the start before every pass; the first finds it
// unmoved).
TEST(DataLoaderTest, RestoreToWhereItStandsKeepsThePrefetchedBatches) {
  auto ds = std::make_shared<SyntheticDataset>(40);
  std::mutex mu;
  std::map<int64_t, int> assembled;  // seq -> times
  DataLoader::Options o = Opts(4, 1);
  o.on_assembled = [&](int, int64_t seq, int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    ++assembled[seq];
  };
  auto loader = Make(ds, o);
  const auto expected = [&] {
    auto reference = Make(ds, Opts(4, 1));
    return Take(*reference, 5);
  }();
  auto got = Take(*loader, 1);
  // Wait (bounded) until the worker has prefetched batch 1.
  for (int i = 0; i < 5000; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (assembled.contains(1)) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(loader->Restore(loader->State()).ok());
  const auto rest = Take(*loader, 4);
  loader.reset();  // joins the worker
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, expected);
  for (int64_t seq = 0; seq < 5; ++seq) EXPECT_EQ(assembled[seq], 1) << "batch " << seq;
}

TEST(DataLoaderTest, RestoreTakesTheSeedFromTheState) {
  auto ds = std::make_shared<SyntheticDataset>(50);
  DataLoader::Options other_seed = Opts(5, 1);
  other_seed.seed = 999;
  auto a = Make(ds, Opts(5, 1));
  const LoaderState start = a->State();
  const auto expected = Take(*a, 4);
  auto b = Make(ds, other_seed);
  ASSERT_TRUE(b->Restore(start).ok());
  EXPECT_EQ(Take(*b, 4), expected);
}

TEST(DataLoaderTest, RestoreRejectsAStateFromAnotherConfiguration) {
  auto loader = Make(std::make_shared<SyntheticDataset>(50), Opts(5, 1));
  LoaderState s = loader->State();
  s.batch_size = 6;
  absl::Status status = loader->Restore(s);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("batch size 6"));
  EXPECT_THAT(status.message(), Not(HasSubstr("sample count differs")));
  // Another sample count names what sets it (text windows: --seq_len).
  s = loader->State();
  s.num_samples = 100;
  status = loader->Restore(s);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("The sample count differs"));
  EXPECT_THAT(status.message(), HasSubstr("--seq_len"));
  s = loader->State();
  s.shuffle = false;
  EXPECT_FALSE(loader->Restore(s).ok());
  s = loader->State();
  s.batch = 10;  // past the end of an epoch
  EXPECT_FALSE(loader->Restore(s).ok());
  // The global batch sets the epochs' length; 0 (a state written before it
  // was recorded) is not checked.
  s = loader->State();
  s.global_batch = 10;
  status = loader->Restore(s);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("global batch 10"));
  s.global_batch = 0;
  EXPECT_TRUE(loader->Restore(s).ok());
  auto old = LoaderState::Parse(
      "weft-loader-state v1 epoch=1 batch=2 seed=0 samples=50 batch_size=5 world=1 shuffle=1 "
      "drop_last=1");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->global_batch, 0);
  EXPECT_FALSE(LoaderState::Parse("weft-loader-state v1 epoch=1").ok());
  // batch= twice and no seed=: eight keys, one of them missing.
  absl::StatusOr<LoaderState> twice = LoaderState::Parse(
      "weft-loader-state v1 epoch=1 batch=2 batch=3 samples=50 batch_size=5 world=1 shuffle=1 "
      "drop_last=1");
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("repeated key 'batch'"));
  EXPECT_TRUE(Take(*loader, 2).size() == 2) << "a rejected Restore leaves the loader running";
}

TEST(DataLoaderTest, RanksTogetherCoverEachGlobalBatch) {
  // W ranks with B/W samples each per step see exactly the W=1 loader's batch.
  auto ds = std::make_shared<SyntheticDataset>(101);
  auto single = Make(ds, Opts(12, 1));
  const auto global = Take(*single, 8);
  for (int world : {2, 3, 4}) {
    std::vector<std::vector<std::vector<int32_t>>> per_rank;
    for (int r = 0; r < world; ++r) {
      DataLoader::Options o = Opts(12 / world, 2);
      o.rank = r;
      o.world_size = world;
      per_rank.push_back(Take(*Make(ds, o), 8));
    }
    for (int step = 0; step < 8; ++step) {
      std::vector<int32_t> got;
      for (int r = 0; r < world; ++r) {
        got.insert(got.end(), per_rank[r][step].begin(), per_rank[r][step].end());
      }
      std::vector<int32_t> want = global[step];
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want) << "world " << world << " step " << step;
    }
  }
}

TEST(DataLoaderTest, ARescaledStateContinuesWithTheSameSamplesOnAnotherWorld) {
  // One rank saves after 3 global batches of 12; two ranks with 6 each, or
  // four with 3, resume and together see the single rank's next batches.
  auto ds = std::make_shared<SyntheticDataset>(101);
  auto single = Make(ds, Opts(12, 1));
  Take(*single, 3);
  const LoaderState saved = single->State();
  const auto next = Take(*single, 4);
  for (int world : {2, 4}) {
    auto rescaled = saved.Rescaled(12 / world, world);
    ASSERT_TRUE(rescaled.ok()) << rescaled.status();
    EXPECT_EQ(rescaled->batch, 3);
    std::vector<std::vector<std::vector<int32_t>>> per_rank;
    for (int r = 0; r < world; ++r) {
      DataLoader::Options o = Opts(12 / world, 1);
      o.rank = r;
      o.world_size = world;
      auto loader = Make(ds, o);
      ASSERT_TRUE(loader->Restore(*rescaled).ok());
      per_rank.push_back(Take(*loader, 4));
    }
    for (int step = 0; step < 4; ++step) {
      std::vector<int32_t> got;
      for (int r = 0; r < world; ++r) got.insert(got.end(), per_rank[r][step].begin(), per_rank[r][step].end());
      std::vector<int32_t> want = next[step];
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want) << "world " << world << " step " << step;
    }
  }
  // 3 batches x 12 samples is not a whole number of global batches of 5 x 2.
  absl::StatusOr<LoaderState> odd = saved.Rescaled(5, 2);
  EXPECT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().message(), HasSubstr("36 samples"));
}

TEST(DataLoaderTest, WithoutDropLastTheLastBatchIsShort) {
  DataLoader::Options o = Opts(4, 2);
  o.drop_last = false;
  o.shuffle = false;
  auto loader = Make(std::make_shared<SyntheticDataset>(10), o);
  EXPECT_EQ(loader->batches_per_epoch(), 3);
  const auto batches = Take(*loader, 4);
  EXPECT_EQ(batches[2], (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(batches[3], (std::vector<int32_t>{0, 1, 2, 3}));  // next epoch
}

TEST(DataLoaderTest, WorkerErrorsReachTheCallerWithTheFileName) {
  for (int workers : {0, 2}) {
    DataLoader::Options o = Opts(4, workers);
    o.shuffle = false;
    auto loader = Make(std::make_shared<SyntheticDataset>(20, /*fail_at=*/9), o);
    EXPECT_TRUE(loader->Next().ok());
    EXPECT_TRUE(loader->Next().ok());
    auto bad = loader->Next();  // batch 2 holds samples 8..11
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr("synthetic.bin"));
    EXPECT_THAT(bad.status().message(), HasSubstr("sample 9 of batch 2 (epoch 0"));
    auto again = loader->Next();
    ASSERT_FALSE(again.ok()) << "the loader stays failed";
    EXPECT_EQ(again.status(), bad.status());
  }
}

TEST(DataLoaderTest, HoldingEverySlotIsAnErrorNotAHang) {
  for (int workers : {0, 2}) {
    auto loader = Make(std::make_shared<SyntheticDataset>(100), Opts(2, workers, 1));
    std::vector<Batch> held;
    absl::Status status;
    for (int i = 0; i < 10 && status.ok(); ++i) {
      auto b = loader->Next();
      if (b.ok()) {
        held.push_back(*std::move(b));
      } else {
        status = b.status();
      }
    }
    EXPECT_EQ(held.size(), 3u) << "prefetch_depth 1 gives 3 slots";
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(status.message(), HasSubstr("held by live batches"));
  }
}

TEST(DataLoaderTest, ReleasedBatchesLetTheLoaderRunIndefinitely) {
  auto ds = std::make_shared<SyntheticDataset>(64);
  auto loader = Make(ds, Opts(8, 2, 2));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(loader->Next().ok());
  // Workers never run more than prefetch_depth batches ahead.
  EXPECT_LE(ds->fills(), (200 + 2 + 2) * 8);
}

TEST(DataLoaderTest, ShutdownIsCleanWhenTheConsumerStopsEarly) {
  auto ds = std::make_shared<SyntheticDataset>(1000);
  { auto unused = Make(ds, Opts(4, 4, 8)); }
  Batch survivor;
  {
    auto loader = Make(ds, Opts(4, 4, 8));
    survivor = *loader->Next();
  }
  // The batch outlives its loader and still reads valid memory.
  EXPECT_EQ(survivor.Get("payload").data<float>()[1],
            survivor.Get("index").data<int32_t>()[0] + 0.5f);
}

TEST(DataLoaderTest, InvalidOptionsAreErrors) {
  auto ds = std::make_shared<SyntheticDataset>(10);
  EXPECT_FALSE(DataLoader::Create(ds, Opts(0, 1)).ok());
  EXPECT_FALSE(DataLoader::Create(ds, Opts(2, -1)).ok());
  EXPECT_FALSE(DataLoader::Create(ds, Opts(2, 1, 0)).ok());
  auto too_big = DataLoader::Create(ds, Opts(11, 1));
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(too_big.status().message(), HasSubstr("fewer than one batch of 11"));
  DataLoader::Options bad_rank = Opts(2, 1);
  bad_rank.rank = 3;
  bad_rank.world_size = 2;
  EXPECT_FALSE(DataLoader::Create(ds, bad_rank).ok());
  DataLoader::Options gpu = Opts(2, 1);
  gpu.device = Device::Cuda(0);
  auto no_backend = DataLoader::Create(ds, gpu);
  ASSERT_FALSE(no_backend.ok());
  EXPECT_THAT(no_backend.status().message(), HasSubstr("CUDA"));
}

}  // namespace
}  // namespace weft::data
