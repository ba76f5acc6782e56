// bazel run //models/gpt:train -- --config=models/gpt/configs/tiny.textproto
//     [--device=cpu|cuda] [--steps=N] [--seed=S] [--metrics_out=PATH] [--data=PATH] ...
//
// Trains a character- or BPE-level GPT on a text file, a token shard, or a
// directory of shards. Without --data it trains on Debian's fortunes corpus.
// This main only declares the model's job; the policy around the trainer
// lives in tools/train_main/gpt_train.h.
#include "models/gpt/gpt_config.pb.h"
#include "tools/train_main/gpt_train.h"
#include "tools/train_main/train_main.h"

int main(int argc, char** argv) {
  weft::GptJob job;
  return weft::TrainMain(argc, argv,
                         "Train a GPT-2 family language model.\n"
                         "usage: train --config=models/gpt/configs/tiny.textproto [--flag=value ...]",
                         &job, [&] { return weft::RunGptTraining(job); });
}
