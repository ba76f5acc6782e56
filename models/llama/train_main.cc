// bazel run //models/llama:train -- --config=models/llama/configs/llama_debug.textproto
//     [--device=cpu|cuda] [--steps=N] [--strategy=fsdp] [--data=PATH] ...
//
// Trains a Llama-family language model (RMSNorm, RoPE, SwiGLU, grouped-
// query attention) on a text file, a token shard, or a directory of shards.
// Without --data it trains on Debian's fortunes corpus. This main only
// declares the model's job; the policy is tools/train_main/llama_train.h.
#include "models/llama/llama_config.pb.h"
#include "tools/train_main/llama_train.h"
#include "tools/train_main/train_main.h"

int main(int argc, char** argv) {
  weft::LlamaJob job;
  return weft::TrainMain(
      argc, argv,
      "Train a Llama-family language model.\n"
      "usage: train --config=models/llama/configs/llama_debug.textproto [--flag=value ...]",
      &job, [&] { return weft::RunLlamaTraining(job); });
}
