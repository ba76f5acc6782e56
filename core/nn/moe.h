// MoeLayer: a mixture-of-experts MLP (Switch / GShard style) that replaces a
// transformer block's MLP: (B, T, C) -> (B, T, C).
//
//   router     logits = x W_r^T (no bias), probs = softmax(logits), or
//              each logit's sigmoid (router_score; DeepSeek-V3's router)
//   top-k      each token picks k experts; gates are the scores
//              renormalised over the k (normalize_gates; Mixtral, Qwen3-MoE's
//              norm_topk_prob) or the raw scores (Switch's top-1)
//   capacity   moe_routing.h: the drop policy, or dropless; in training
//              only (validation and sampling keep every choice)
//   experts    E MLPs over tokens grouped by expert (ExpertMlps): GPT-2's
//              or SwiGLU (expert_activation)
//   shared     optionally a shared SwiGLU expert every token passes through
//              (DeepSeek's shared experts): y[t] += shared(x[t]); it is a
//              dense module (replicated under ep and tp, like the router)
//   output     y[t] = sum over kept choices of gate * expert(x[t]); the
//              block's residual carries dropped tokens through unchanged
//
// Auxiliary losses (their gradients are added in Backward; they are not
// part of the logged task loss):
//   load balancing (Switch): coef * E * sum_e f_e * P_e, where f_e is the
//       fraction of the N * k choices routed to e (before the capacity) and
//       P_e the mean router probability of e over the N tokens;
//   router z-loss: z_coef * mean_t logsumexp(logits_t)^2.
// The balance loss is computed over the tokens routed together (one routing
// group: by default one micro-batch on one rank; under cp the whole
// sequences of the cp group's chunks) and weighted like a
// per-token loss: its gradient is scaled by the group's N * ctx.dloss_scale,
// so it averages over groups, micro-batches and data-parallel ranks like the
// task loss does; the z-loss likewise per token.
//
// Expert parallelism plugs in through an ExpertDispatcher (the experts'
// rows go to other ranks and back), tensor parallelism through the experts'
// ExpertPartialSums, context parallelism through a RoutingExchange (the
// routing group spans the chunks of each sequence that other ranks hold:
// the layer routes the whole group's choices and keeps its own tokens'
// rows); the layer itself knows no ranks.
// In a dry run on the meta device (memory estimates) there are no indices
// to read: choices go round-robin, an equal share per expert.
// On CUDA the routing plan is built on the host from the top-k indices (one
// small device-to-host copy per layer call): the grouped GEMMs and the
// all_to_all_v need the per-expert counts on the host anyway.
#ifndef WEFT_CORE_NN_MOE_H_
#define WEFT_CORE_NN_MOE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/kernels/moe_ops.h"
#include "core/nn/expert_dispatcher.h"
#include "core/nn/expert_mlps.h"
#include "core/nn/linear.h"
#include "core/nn/module.h"
#include "core/nn/moe_routing.h"
#include "core/nn/moe_routing_exchange.h"

namespace weft {

struct MoeConfig {
  int64_t channels = 128;
  int64_t hidden = 512;  // per expert
  int num_experts = 8;
  int top_k = 2;
  ExpertActivation expert_activation = ExpertActivation::kGelu;
  RouterScore router_score = RouterScore::kSoftmax;
  // Gates renormalised over the top_k choices; unset: when top_k > 1 (a
  // renormalised single gate is the constant 1 and teaches the router
  // nothing).
  std::optional<bool> normalize_gates;
  // Hidden size of a shared SwiGLU expert (kSwiGlu experts only); 0: none.
  int64_t shared_hidden = 0;
  // Capacity per expert = ceil(factor * N * k / E); <= 0: dropless.
  double capacity_factor = 0.0;
  float aux_loss_coef = 0.01f;
  float z_loss_coef = 0.0f;
  // Route the micro-batch's samples as this many independent groups
  // (sample b in group b % routing_groups), each with its own capacity and
  // balance loss: one process reproducing how routing_groups data-parallel
  // ranks route their own samples (the sampler deals rank r samples r, r +
  // W, ...). 1: the whole micro-batch is one group.
  int routing_groups = 1;
  float init_std = 0.02f;
  float proj_init_std = 0.02f;
};

// Checks the config: experts >= 1, 1 <= top_k <= min(16, experts), sizes
// > 0, routing_groups >= 1, no z-loss with sigmoid scores, no renormalised
// single gate, a shared expert only beside SwiGLU experts.
absl::Status ValidateMoeConfig(const MoeConfig& config);

// The router kernels' spec of `config`.
RouterSpec RouterSpecOf(const MoeConfig& config);

// Routing statistics summed since the last TakeStats(). Under a
// RoutingExchange they are the whole routing group's, the same on each rank.
struct MoeStats {
  std::vector<int64_t> routed;  // choices per expert, before the capacity
  int64_t choices = 0;
  int64_t dropped = 0;
  double aux_loss = 0;  // sum over calls of the unscaled balance loss
  double z_loss = 0;
  int64_t calls = 0;
};

class MoeLayer : public Module {
 public:
  explicit MoeLayer(const MoeConfig& config);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  const MoeConfig& config() const { return config_; }
  Linear* router() const { return router_; }
  ExpertMlps* experts() const { return experts_; }
  Module* shared() const { return shared_; }  // null without a shared expert
  // Null: every expert is local.
  void set_dispatcher(std::shared_ptr<ExpertDispatcher> d) { dispatcher_ = std::move(d); }
  // Null: this rank's tokens are the whole routing group.
  void set_routing_exchange(std::shared_ptr<RoutingExchange> x) { exchange_ = std::move(x); }

  MoeStats TakeStats();

 private:
  // Keys of this layer's two activation-store entries (a saved entry holds
  // four tensors; routing needs eight).
  const void* RouterKey() const { return this; }
  const void* RoutingKey() const { return &stats_; }
  // The routing group's choices (this rank's, or all ranks' through the
  // exchange) and this rank's plan; `all_plan` is the group's.
  struct Routing {
    RoutingExchange::Choices all;   // local_index only under an exchange
    std::vector<int> all_group_of;  // routing group of each of all's tokens
    RoutingPlan all_plan;
    // This rank's part under an exchange; without one, the group's own.
    std::optional<std::vector<int>> own_group_of;
    std::optional<RoutingPlan> own_plan;
    // Of this rank's tokens, and this rank's rows.
    const std::vector<int>& group_of() const { return own_group_of ? *own_group_of : all_group_of; }
    const RoutingPlan& plan() const { return own_plan ? *own_plan : all_plan; }
  };
  absl::StatusOr<Routing> Route(RunContext& ctx, const Tensor& idx, int64_t samples, int groups);
  void RouteToOwnExperts(int64_t samples, int groups, std::vector<int32_t>* experts_of) const;
  // Statistics of one call, and the balance loss's dL/dprobs (N, E) of this
  // rank's tokens. A recompute replay (count_stats false) recomputes the
  // gradient only.
  absl::Status Record(RunContext& ctx, const Routing& r, const std::vector<float>& probs,
                      const std::vector<float>& lse, bool count_stats,
                      std::vector<float>* dprobs_extra);

  const MoeConfig config_;
  Linear* router_;
  ExpertMlps* experts_;
  Module* shared_ = nullptr;
  std::shared_ptr<ExpertDispatcher> dispatcher_;
  std::shared_ptr<RoutingExchange> exchange_;
  MoeStats stats_;
};

// Pops the statistics of every MoeLayer under `root` and appends the step's
// metrics: moe_aux_loss and moe_z_loss (means over layers and calls),
// moe_load_min / moe_load_max (expert load relative to a perfect balance,
// 1.0 = balanced; the extremes over layers), moe_load_cv (coefficient of
// variation of the load, worst layer) and moe_dropped_frac.
void AppendMoeMetrics(Module& root, std::vector<std::pair<std::string, double>>* out);

}  // namespace weft

#endif  // WEFT_CORE_NN_MOE_H_
