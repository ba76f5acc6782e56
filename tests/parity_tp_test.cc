// Tensor (tp) and sequence (sp) parallelism on gloo ranks (processes) vs one
// process: the same loss at every step and the same parameters and
// optimizer state after 20 steps, alone and composed with fsdp and ddp on
// the mesh, with dropout, plus the tp group's traffic per step against the
// Megatron formulas.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// As for ddp: only the f32 summation order differs (split GEMMs, all-reduces).
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;

// Prints how close a run came (for the notes), then checks it.
void Check(const testing::ParityRun& single, const testing::ParityRun& run,
           const std::string& label) {
  std::printf("%s: %zu steps, loss %.4f -> %.4f, max loss rel diff %.2e, max param diff %.2e\n",
              label.c_str(), run.losses.size(), run.losses.front(), run.losses.back(),
              testing::MaxLossRelDiff(run, single),
              testing::MaxRelativeDifference(run.params, single.params));
  testing::ExpectParity(single, run, kLossRtol, kParamTol, label);
  // The clipping norm spans every axis: sharded pieces summed over tp,
  // replicated ones once, data-parallel shards summed by fsdp.
  testing::ExpectGradNormsMatch(single, run, kLossRtol, label);
}

GptJob Job() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_model()->set_n_head(4);  // whole heads on each of up to 4 ranks
  return job;
}

GptJob WithStrategy(GptJob job, const std::string& strategy, int tp) {
  job.mutable_train()->mutable_parallel()->set_strategy(strategy);
  job.mutable_train()->mutable_parallel()->set_tp(tp);
  return job;
}

// The tp group's traffic per step: per micro-batch of B x T tokens of
// width C, every layer leaves two row-parallel regions in forward (attn
// and mlp projections) and enters two column regions in backward (qkv and
// fc inputs); the embedding leaves one in forward, the head enters one in
// backward: (4L + 2) tensors of S = B T C floats. Without sp each is an
// all-reduce; with sp an all-gather plus a reduce-scatter. The
// cross-entropy adds an all-reduce of the row max (B T) and of the summed
// exponentials with the target logits (2 B T); sp adds the layer norms'
// weight and bias gradients (2 C per norm, 2L + 1 norms). Recomputing the
// blocks replays their forwards: 2 more row regions per layer.
struct TpTraffic {
  double region_tensors, s_bytes, ce_bytes, ln_bytes;
};

TpTraffic Traffic(const GptJob& job, int micro_batches, bool recompute) {
  const double b = job.train().micro_batch(), t = job.train().seq_len();
  const double c = job.model().d_model(), l = job.model().n_layer();
  return {micro_batches * (4 * l + 2 + (recompute ? 2 * l : 0)), 4 * b * t * c,
          micro_batches * 4 * 3 * b * t, micro_batches * (2 * l + 1) * 2 * c * 4};
}

void ExpectTpTraffic(const testing::ParityRun& run, const GptJob& job, int tp, bool sp,
                     int micro_batches, bool recompute = false) {
  const TpTraffic f = Traffic(job, micro_batches, recompute);
  const double ar = 2.0 * (tp - 1) / tp, half = (tp - 1.0) / tp;
  const double regions = f.region_tensors * f.s_bytes;
  auto get = [&run](const std::string& k) {
    auto it = run.comm.find(k);
    return it == run.comm.end() ? 0.0 : it->second;
  };
  if (!sp) {
    EXPECT_DOUBLE_EQ(get("tp_all_reduce_payload"), regions + f.ce_bytes);
    EXPECT_DOUBLE_EQ(get("tp_all_reduce"), ar * (regions + f.ce_bytes));
    EXPECT_EQ(get("tp_all_gather"), 0);
    EXPECT_EQ(get("tp_reduce_scatter"), 0);
  } else {
    EXPECT_DOUBLE_EQ(get("tp_all_gather_payload"), regions);
    EXPECT_DOUBLE_EQ(get("tp_reduce_scatter_payload"), regions);
    // sp's all-gather + reduce-scatter move what tp's all-reduce would.
    EXPECT_DOUBLE_EQ(get("tp_all_gather") + get("tp_reduce_scatter"), ar * regions);
    EXPECT_DOUBLE_EQ(get("tp_all_gather"), half * regions);
    EXPECT_DOUBLE_EQ(get("tp_all_reduce_payload"), f.ce_bytes + f.ln_bytes);
    // One all-reduce per layer norm (weight and bias in one buffer) and
    // two for the vocab-parallel cross-entropy (max; sum-exp with the
    // target logit), per micro-batch.
    const double layer_norms = 2 * job.model().n_layer() + 1;
    EXPECT_DOUBLE_EQ(get("tp_all_reduce_calls"), micro_batches * (layer_norms + 2));
  }
}

TEST(TpParityTest, Tp2AndTp4MatchOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  for (int tp : {2, 4}) {
    GptJob j = WithStrategy(job, "tp", tp);
    auto multi = testing::RunMultiProcess(j, tp);
    ASSERT_TRUE(multi.ok()) << multi.status();
    Check(*single, *multi, "tp " + std::to_string(tp));
    ExpectTpTraffic(*multi, j, tp, /*sp=*/false, /*micro_batches=*/1);
    std::printf("tp=%d: tp all_reduce %.0f bus bytes/step (%.0f calls)\n", tp,
                multi->comm["tp_all_reduce"], multi->comm["tp_all_reduce_calls"]);
  }
}

TEST(TpParityTest, SequenceParallelMatchesOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  GptJob j = WithStrategy(job, "sp", 2);
  auto multi = testing::RunMultiProcess(j, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  Check(*single, *multi, "tp 2 + sp");
  ExpectTpTraffic(*multi, j, 2, /*sp=*/true, /*micro_batches=*/1);
}

TEST(TpParityTest, Tp2TimesFsdp2MatchesOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  GptJob j = WithStrategy(job, "tp,fsdp", 2);
  j.mutable_train()->set_micro_batch(4);  // 2 data-parallel ranks x 4
  auto multi = testing::RunMultiProcess(j, 4);
  ASSERT_TRUE(multi.ok()) << multi.status();
  Check(*single, *multi, "tp 2 x fsdp 2");
  ExpectTpTraffic(*multi, j, 2, /*sp=*/false, /*micro_batches=*/1);
  // The same strategies on 2 ranks: fsdp over a dp_shard of one keeps
  // everything whole and says so.
  j.mutable_train()->set_micro_batch(8);
  multi = testing::RunMultiProcess(j, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  Check(*single, *multi, "tp 2 x fsdp 1");
  EXPECT_NE(absl::StrJoin(multi->notes, "\n").find("fsdp over a dp_shard group of one rank"),
            std::string::npos)
      << absl::StrJoin(multi->notes, "\n");
}

TEST(TpParityTest, SpTimesDdp2MatchesOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  GptJob j = WithStrategy(job, "sp,ddp", 2);
  j.mutable_train()->set_micro_batch(2);  // 2 data-parallel ranks x 2 micro-batches of 2
  auto multi = testing::RunMultiProcess(j, 4);
  ASSERT_TRUE(multi.ok()) << multi.status();
  Check(*single, *multi, "tp 2 + sp x ddp 2");
  ExpectTpTraffic(*multi, j, 2, /*sp=*/true, /*micro_batches=*/2);
}

// tp+sp under fsdp on the mesh: fsdp flattens the tp-local pieces, and the
// layer norms' gradients (summed over tp by sp) are then sharded by fsdp.
TEST(TpParityTest, SpTimesFsdp2MatchesOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  GptJob j = WithStrategy(job, "sp,fsdp", 2);
  j.mutable_train()->set_micro_batch(4);  // 2 data-parallel ranks x 4
  auto multi = testing::RunMultiProcess(j, 4);
  ASSERT_TRUE(multi.ok()) << multi.status();
  Check(*single, *multi, "tp 2 + sp x fsdp 2");
  ExpectTpTraffic(*multi, j, 2, /*sp=*/true, /*micro_batches=*/1);
}

// Recompute wraps the tensor-parallel blocks: the replayed forward repeats
// their collectives and dropout masks, so the numbers stay one process's
// while the tp group sees each block's forward traffic twice.
TEST(TpParityTest, Tp2WithRecomputeMatchesOneProcess) {
  GptJob job = Job();
  job.mutable_model()->set_dropout(0.1f);  // the replay must draw the same masks
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  for (const char* strategy : {"tp,recompute", "sp,recompute"}) {
    GptJob j = WithStrategy(job, strategy, 2);
    auto multi = testing::RunMultiProcess(j, 2);
    ASSERT_TRUE(multi.ok()) << multi.status();
    Check(*single, *multi, std::string(strategy) + " (tp 2, dropout 0.1)");
    ExpectTpTraffic(*multi, j, 2, /*sp=*/strategy[0] == 's', /*micro_batches=*/1,
                    /*recompute=*/true);
  }
}

// A vocabulary tp does not divide is padded, with a startup note: tp=3 over
// 61 tokens that the model pads to 64 rows (22 rows per rank, 2 of them
// tp's padding; untied, so the head's own table is padded too), and tp=2 over the corpus's 41 tokens left unpadded
// (vocab_pad_multiple 1: 21 rows per rank), alone and under fsdp (which
// flattens the padded local tables and exports only their real rows). Each
// matches one process of the same model; the reassembled tables have the
// model's rows.
TEST(TpParityTest, VocabNotDivisibleByTpIsPaddedAndMatchesOneProcess) {
  struct Case {
    int tp;
    int vocab;  // 0: the corpus's
    int pad_multiple;
    const char* strategy;
    int world;
    const char* note;
  };
  for (const Case& k :
       {Case{3, 61, 8, "tp", 3, "64 rows (61 tokens + 3 padding), not divisible by tp=3; the vocab-parallel "
                       "embedding and head pad it to 66 rows (22 per rank; 2 zero row(s) on the "
                       "last rank"},
        Case{2, 0, 1, "tp", 2, "41 rows (41 tokens), not divisible by tp=2; the vocab-parallel "
                               "embedding and head pad it to 42 rows (21 per rank; 1 zero row(s) "
                               "on the last rank"},
        Case{2, 0, 1, "tp,fsdp", 4, "pad it to 42 rows"}}) {
    GptJob job = Job();
    job.mutable_model()->set_n_head(k.tp == 3 ? 3 : 4);
    job.mutable_model()->set_d_model(k.tp == 3 ? 24 : 32);
    job.mutable_model()->set_vocab_size(k.vocab);
    job.mutable_model()->set_vocab_pad_multiple(k.pad_multiple);
    job.mutable_model()->set_tie_weights(k.tp != 3);  // tp=3: a head of its own, padded too
    auto single = testing::RunSingleProcess(job);
    ASSERT_TRUE(single.ok()) << single.status();
    EXPECT_TRUE(single->notes.empty());
    GptJob j = WithStrategy(job, k.strategy, k.tp);
    j.mutable_train()->set_micro_batch(8 * k.tp / k.world);
    auto multi = testing::RunMultiProcess(j, k.world);
    ASSERT_TRUE(multi.ok()) << multi.status();
    const std::string label = absl::StrCat(k.strategy, " (tp ", k.tp, ", ", k.world,
                                           " ranks), vocab padded");
    Check(*single, *multi, label);
    ExpectTpTraffic(*multi, j, k.tp, /*sp=*/false, /*micro_batches=*/1);
    ASSERT_EQ(multi->notes.size(), 1u) << label;
    std::printf("%s: note: %s\n", label.c_str(), multi->notes[0].c_str());
    EXPECT_NE(multi->notes[0].find(k.note), std::string::npos) << multi->notes[0];
    EXPECT_NE(multi->notes[0].find(absl::StrCat("not divisible by tp=", k.tp)),
              std::string::npos)
        << multi->notes[0];
    EXPECT_EQ(multi->params.at("embed.wte").size(), single->params.at("embed.wte").size());
  }
}

TEST(TpParityTest, DropoutMasksAreSlicesOfOneProcess) {
  GptJob job = Job();
  job.mutable_model()->set_dropout(0.1f);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  for (const char* strategy : {"tp", "sp"}) {
    auto multi = testing::RunMultiProcess(WithStrategy(job, strategy, 2), 2);
    ASSERT_TRUE(multi.ok()) << multi.status();
    Check(*single, *multi, std::string(strategy) + " 2 with dropout 0.1");
  }
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// Bytes of f32 parameters per rank: tp splits the embedding table, q/k/v,
// both projections' weights and fc; the rest (positions, norms, the row
// layers' biases) is replicated.
bool SplitByTp(const std::string& name) {
  auto ends_with = [&name](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return name == "embed.wte" || name.find(".attn.qkv.") != std::string::npos ||
         name.find(".mlp.fc.") != std::string::npos || ends_with(".attn.proj.weight") ||
         ends_with(".mlp.proj.weight") || name == "lm_head.weight";
}

// Activation bytes one micro-batch holds after its forward (f32; tokens
// i32), from what each layer saves for backward:
//   per block   tp:  ln inputs 2BTC + ln stats 4BT + column inputs 2BTC
//                    + [qkv 3BTC + attention out BTC + fc pre-activation
//                    4BTC + gelu out 4BTC + logsumexp BHT] / tp
//               sp:  the ln inputs and stats shrink by tp; the column
//                    inputs are gathered whole (saved for the weight
//                    gradient, so backward needs no second all-gather)
//   embedding tokens BT; ln_f input BTC + stats 2BT (/tp under sp); head
//   input BTC; logits (their gradient) BT x Vp / tp.
double ActivationBytes(const GptJob& job, int64_t padded_vocab, int tp, bool sp) {
  const double b = job.train().micro_batch(), t = job.train().seq_len();
  const double c = job.model().d_model(), h = job.model().n_head(), l = job.model().n_layer();
  const double n = tp, shard = sp ? n : 1;
  const double block = (2 * b * t * c + 4 * b * t) / shard + 2 * b * t * c +
                       (12 * b * t * c + b * h * t) / n;
  const double rest = b * t + (b * t * c + 2 * b * t) / shard + b * t * c + b * t * padded_vocab / n;
  return 4 * (l * block + rest);
}

TEST(TpMemoryTest, ParametersAndActivationsPerRankMatchFormulas) {
  GptJob job = Job();
  job.mutable_train()->set_steps(2);
  job.mutable_model()->set_n_layer(4);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  double split = 0, replicated = 0;
  for (const auto& [name, v] : single->params) (SplitByTp(name) ? split : replicated) += v.size();
  const int64_t padded_vocab = static_cast<int64_t>(single->params.at("embed.wte").size()) /
                               job.model().d_model();
  std::printf("Per-rank memory, GPT %d layers d=%d heads=%d, B=%d T=%d, Vp=%lld (f32 bytes)\n",
              job.model().n_layer(), job.model().d_model(), job.model().n_head(),
              static_cast<int>(job.train().micro_batch()), static_cast<int>(job.train().seq_len()),
              static_cast<long long>(padded_vocab));
  std::printf("%-8s %12s %12s %14s %14s\n", "run", "params", "formula", "activations",
              "formula");
  struct Case {
    const char* name;
    const char* strategy;
    int tp;
    bool sp;
  };
  for (const Case& k : {Case{"tp=1", "", 1, false}, Case{"tp=2", "tp", 2, false},
                        Case{"tp=4", "tp", 4, false}, Case{"tp=2+sp", "sp", 2, true},
                        Case{"tp=4+sp", "sp", 4, true}}) {
    absl::StatusOr<testing::ParityRun> run =
        k.tp == 1 ? single : testing::RunMultiProcess(WithStrategy(job, k.strategy, k.tp), k.tp);
    ASSERT_TRUE(run.ok()) << run.status();
    const double params = 4 * (replicated + split / k.tp);
    const double acts = ActivationBytes(job, padded_vocab, k.tp, k.sp);
    std::printf("%-8s %12.0f %12.0f %14.0f %14.0f\n", k.name, run->memory.at("params"), params,
                run->memory.at("activations_after_forward"), acts);
    EXPECT_EQ(run->memory.at("params"), params) << k.name;
    EXPECT_EQ(run->memory.at("grads"), params) << k.name;
    EXPECT_EQ(run->memory.at("activations_after_forward"), acts) << k.name;
  }
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

absl::Status RunExpectingError(GptJob job, int world) {
  job.mutable_train()->set_steps(2);
  auto r = testing::RunMultiProcess(job, world);
  return r.ok() ? absl::OkStatus() : r.status();
}

TEST(TpErrorsTest, BadInputGetsClearErrors) {
  GptJob job = Job();
  // Heads split whole over the tp ranks.
  GptJob heads = WithStrategy(job, "tp", 4);
  heads.mutable_model()->set_n_head(2);
  absl::Status s = RunExpectingError(heads, 4);
  EXPECT_NE(s.message().find("has 2 heads, not divisible by tp=4"), std::string::npos) << s;
  EXPECT_NE(s.message().find("use a --tp that divides n_head=2"), std::string::npos) << s;
  // A vocabulary tp pads is no error (VocabNotDivisibleByTp...), but one
  // too small to give every rank a row is: 5 rows in blocks of 2 over 4.
  GptJob vocab = WithStrategy(job, "tp", 4);
  vocab.mutable_model()->set_vocab_size(5);
  vocab.mutable_model()->set_vocab_pad_multiple(1);
  s = RunExpectingError(vocab, 4);
  EXPECT_NE(s.message().find("a vocabulary of 5 rows split over tp=4 in blocks of 2 rows leaves "
                             "tp rank 3 only padding"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("lower --tp"), std::string::npos) << s;
  // Sequence parallelism without tensor parallelism.
  GptJob sp_alone = WithStrategy(job, "sp,ddp", 1);
  sp_alone.mutable_train()->set_micro_batch(4);
  s = RunExpectingError(sp_alone, 2);
  EXPECT_NE(s.message().find("sequence parallelism (sp) with tp=1"), std::string::npos) << s;
  // Sequence shards need seq_len divisible by tp.
  GptJob odd_seq = WithStrategy(job, "sp", 2);
  odd_seq.mutable_train()->set_seq_len(15);
  s = RunExpectingError(odd_seq, 2);
  EXPECT_NE(s.message().find("seq_len must be a multiple of tp"), std::string::npos) << s;
  EXPECT_NE(s.message().find("use --seq_len=14 or 16"), std::string::npos) << s;
  // At startup, when sp is applied, not at the first forward.
  EXPECT_NE(s.message().find("applying strategy 'sp'"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
