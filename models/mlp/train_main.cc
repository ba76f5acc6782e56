// bazel run //models/mlp:train -- [--config=models/mlp/configs/fashion_mnist.textproto]
//     [--device=cpu|cuda] [--steps=N] [--metrics_out=PATH] ...
//
// Trains an MLP classifier on Fashion-MNIST from Debian's
// dataset-fashion-mnist package and reports test accuracy. This main only
// declares the job and its defaults; running it is
// tools/train_main/mlp_train.h.
#include "models/mlp/mlp_config.pb.h"
#include "tools/train_main/mlp_train.h"
#include "tools/train_main/train_main.h"

int main(int argc, char** argv) {
  weft::MlpJob job;
  // Defaults that suit Fashion-MNIST without a config file.
  weft::TrainConfig* t = job.mutable_train();
  t->set_steps(600);
  t->set_global_batch(64);
  t->set_micro_batch(64);
  t->set_log_every(50);
  t->set_eval_batches(20);
  t->mutable_optim()->set_lr(2e-3f);
  t->mutable_optim()->set_weight_decay(0.0f);
  return weft::TrainMain(argc, argv,
                         "Train an MLP classifier on Fashion-MNIST and report test accuracy.\n"
                         "usage: train [--config=models/mlp/configs/fashion_mnist.textproto] "
                         "[--flag=value ...]",
                         &job, [&] { return weft::RunMlpTraining(job); });
}
