// tp on CUDA: tp=1 on one NCCL rank, bf16 compute with fp32 master weights,
// trains like no tp (see tp_single_rank.h): the vocabulary-parallel
// embedding and cross-entropy kernels, the parallel linears and the region
// collectives on a real stream. With one shard the vocabulary-parallel loss
// is bitwise the fused one; what remains is the gradient norm, whose
// squares tp sums in another order (sharded tensors after the replicated).
// Needs a GPU: tagged gpu.
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"
#include "tests/tp_single_rank.h"

namespace weft {
namespace {

TEST(TpGpuTest, Tp1OnNcclMatchesPlainBf16) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_device("cuda");
  job.mutable_train()->set_dtype("bf16");
  job.mutable_model()->set_vocab_pad_multiple(64);  // padded columns, 16-byte rows
  testing::ExpectTp1MatchesPlain(job, "nccl", 8, 1e-3, 1e-2);
}

TEST(TpGpuTest, Tp1OnNcclMatchesPlainF32) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_device("cuda");
  job.mutable_train()->set_dtype("f32");
  testing::ExpectTp1MatchesPlain(job, "nccl", 8, 1e-5, 1e-4);
}

}  // namespace
}  // namespace weft
