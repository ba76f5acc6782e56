#include "core/nn/moe.h"

#include <algorithm>
#include <numeric>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/moe_ops.h"
#include "core/nn/moe_routing.h"
#include "core/nn/swiglu_mlp.h"

namespace weft {
namespace {

// Router entry (RouterKey) and routing entry (RoutingKey) tensor indexes.
enum { kProbs, kLse, kExperts, kGates };
enum { kSlots, kAssign, kExpertOut, kDprobsExtra };

absl::StatusOr<Tensor> ToDevice(const RunContext& ctx, Tensor host) {
  if (ctx.device.is_cpu()) return host;
  return host.To(ctx.device, ctx.stream);
}

}  // namespace

absl::Status ValidateMoeConfig(const MoeConfig& c) {
  if (c.num_experts < 1) {
    return InvalidArgument(absl::StrCat("num_experts=", c.num_experts), "num_experts >= 1");
  }
  if (c.top_k < 1 || c.top_k > kMaxRouterTopK || c.top_k > c.num_experts) {
    return InvalidArgument(
        absl::StrCat("top_k=", c.top_k, " with num_experts=", c.num_experts),
        absl::StrCat("1 <= top_k <= num_experts, and top_k <= ", kMaxRouterTopK),
        "e.g. --top_k=1 (Switch), 2 (GShard, Mixtral) or 8 (Qwen3-MoE) with at least that "
        "many experts");
  }
  if (c.router_score == RouterScore::kSigmoid && c.z_loss_coef != 0) {
    return InvalidArgument(absl::StrCat("a z-loss (coefficient ", c.z_loss_coef,
                                        ") with sigmoid router scores"),
                           "z_loss_coef = 0 with sigmoid scores: they do not pass through the "
                           "logsumexp the z-loss penalises",
                           "drop the z-loss, or use softmax scores");
  }
  if (c.shared_hidden < 0 ||
      (c.shared_hidden > 0 && c.expert_activation != ExpertActivation::kSwiGlu)) {
    return InvalidArgument(absl::StrCat("a shared expert of ", c.shared_hidden, " hidden units"),
                           "shared_hidden >= 0, and a shared expert only beside SwiGLU experts "
                           "(GPT's MoE has none)");
  }
  if (c.top_k == 1 && c.normalize_gates.value_or(false)) {
    return InvalidArgument("renormalised gates with top_k=1",
                           "raw gates for a single choice: renormalised, every gate is 1 and the "
                           "router gets no gradient from the task loss",
                           "set norm_topk_prob / normalize_gates false, or top_k >= 2");
  }
  if (c.channels < 1 || c.hidden < 1) {
    return InvalidArgument(absl::StrCat("channels=", c.channels, " hidden=", c.hidden),
                           "both >= 1");
  }
  if (c.routing_groups < 1) {
    return InvalidArgument(absl::StrCat("routing_groups=", c.routing_groups), ">= 1");
  }
  if (c.aux_loss_coef < 0 || c.z_loss_coef < 0) {
    return InvalidArgument(
        absl::StrCat("aux_loss_coef=", c.aux_loss_coef, " z_loss_coef=", c.z_loss_coef),
        "coefficients >= 0");
  }
  return absl::OkStatus();
}

RouterSpec RouterSpecOf(const MoeConfig& c) {
  return {.k = c.top_k,
          .score = c.router_score,
          .normalize = c.normalize_gates.value_or(c.top_k > 1)};
}

MoeLayer::MoeLayer(const MoeConfig& c) : Module("MoeLayer"), config_(c) {
  router_ = RegisterModule("router", std::make_unique<Linear>(
                                         c.channels, c.num_experts,
                                         Linear::Options{.bias = false, .init_std = c.init_std}));
  experts_ = RegisterModule("experts", std::make_unique<ExpertMlps>(
                                           c.num_experts, c.channels, c.hidden, c.init_std,
                                           c.proj_init_std, c.expert_activation));
  if (c.shared_hidden > 0) {
    shared_ = RegisterModule("shared", std::make_unique<SwiGluMlp>(c.channels, c.shared_hidden,
                                                                   c.init_std, c.proj_init_std));
  }
  stats_.routed.assign(c.num_experts, 0);
}

// A bound for dry runs (run_context.h): every rank sends its own experts
// as many choices as their capacity takes (all of them when dropless), so
// under expert parallelism each receives the most rows the ranks can send
// it; the rest go round-robin to the other experts, so the rows a rank
// sends stay those of real routing (every choice, within capacity).
void MoeLayer::RouteToOwnExperts(int64_t samples, int groups,
                                 std::vector<int32_t>* experts_of) const {
  const int k = config_.top_k, e = config_.num_experts;
  const int first = experts_->expert_offset(), local = experts_->num_local_experts();
  const int64_t tokens = static_cast<int64_t>(experts_of->size()) / k;
  const int64_t per_sample = std::max<int64_t>(1, tokens / samples);
  const int64_t capacity = ExpertCapacity(tokens / groups, k, e, config_.capacity_factor);
  std::vector<int64_t> taken(static_cast<size_t>(groups) * local, 0);
  int64_t other = 0;
  for (size_t i = 0; i < experts_of->size(); ++i) {
    const int64_t group = (static_cast<int64_t>(i) / k / per_sample) % groups;
    const int j = static_cast<int>(i % local);
    int64_t& n = taken[group * local + j];
    if (capacity < 0 || n < capacity || local == e) {
      ++n;
      (*experts_of)[i] = first + j;
    } else {
      (*experts_of)[i] = static_cast<int32_t>((first + local + other++ % (e - local)) % e);
    }
  }
}

absl::StatusOr<MoeLayer::Routing> MoeLayer::Route(RunContext& ctx, const Tensor& idx,
                                                  int64_t samples, int groups) {
  const int k = config_.top_k, e = config_.num_experts;
  const int64_t n = idx.numel() / k;
  Routing r;
  if (exchange_ != nullptr) {
    WEFT_ASSIGN_OR_RETURN(r.all, exchange_->Gather(ctx, idx, samples));
  } else {
    // The plan needs the choices on the host (see the file comment).
    WEFT_ASSIGN_OR_RETURN(r.all.experts_of, idx.ToVector<int32_t>());
  }
  if (idx.device().is_meta()) {
    // A dry run (memory estimate) has no router output: route round-robin,
    // every expert the same share of the choices, as the load-balancing
    // loss aims for. Real routing depends on the data: an expert above its
    // share holds more rows (at most its capacity, with a capacity factor).
    if (ctx.meta_moe_routing_bound) {
      RouteToOwnExperts(samples, groups, &r.all.experts_of);
    } else {
      for (size_t i = 0; i < r.all.experts_of.size(); ++i) {
        r.all.experts_of[i] = static_cast<int32_t>(i % e);
      }
    }
  }
  // Routing groups: sample b in b % groups (the group's samples are ours).
  const int64_t n_all = static_cast<int64_t>(r.all.experts_of.size()) / k;
  const int64_t per_sample = n_all / samples;
  r.all_group_of.resize(n_all);
  for (int64_t t = 0; t < n_all; ++t) {
    r.all_group_of[t] = static_cast<int>((t / per_sample) % groups);
  }
  // Capacity bounds training's work per expert. Outside training (validation,
  // sampling) every choice is kept: a row's output then does not depend on
  // the rows batched with it, so validation is the same for any layout and
  // micro-batch (and its ignored padding rows take no capacity), and a
  // sample the same with the KV cache on or off.
  const double factor = ctx.training ? config_.capacity_factor : 0.0;
  const std::vector<int64_t> capacity(groups, ExpertCapacity(n_all / groups, k, e, factor));
  r.all_plan = BuildGroupedRoutingPlan(r.all.experts_of, k, e, r.all_group_of, capacity);
  if (exchange_ != nullptr) {
    // This rank's tokens are part of the group: their groups and rows.
    std::vector<int>& own = r.own_group_of.emplace(n);
    for (int64_t t = 0; t < n; ++t) own[t] = r.all_group_of[r.all.local_index[t]];
    r.own_plan = SubsetRoutingPlan(r.all_plan, r.all.experts_of, k, e, r.all_group_of, groups,
                                   r.all.local_index);
  }
  return r;
}

absl::Status MoeLayer::Record(RunContext& ctx, const Routing& r, const std::vector<float>& probs,
                              const std::vector<float>& lse, bool count_stats,
                              std::vector<float>* dprobs_extra) {
  const int e = config_.num_experts, k = config_.top_k, groups = config_.routing_groups;
  const int64_t n = static_cast<int64_t>(r.group_of().size());
  const int64_t n_all = static_cast<int64_t>(r.all_group_of.size());
  // f[g, j]: fraction of group g's choices routed to j, over the whole
  // group (every rank of an exchange has all its choices).
  std::vector<double> f(static_cast<size_t>(groups) * e, 0.0);
  std::vector<int64_t> tokens(groups, 0);
  for (int64_t t = 0; t < n_all; ++t) {
    const int g = r.all_group_of[t];
    ++tokens[g];
    for (int j = 0; j < k; ++j) f[g * e + r.all.experts_of[t * k + j]] += 1.0;
  }
  for (int g = 0; g < groups; ++g) {
    for (int j = 0; j < e; ++j) f[g * e + j] /= static_cast<double>(tokens[g] * k);
  }
  if (count_stats) {
    // sums[g, j]: this rank's sum of probs (P_gj * N_g once summed over the
    // exchange); the last entry: the sum of lse^2. Metrics only.
    std::vector<double> sums(f.size() + 1, 0.0);
    for (int64_t t = 0; t < n; ++t) {
      for (int j = 0; j < e; ++j) sums[r.group_of()[t] * e + j] += probs[t * e + j];
    }
    for (float v : lse) sums.back() += static_cast<double>(v) * v;
    if (exchange_ != nullptr) WEFT_RETURN_IF_ERROR(exchange_->Sum(ctx, sums));
    double aux = 0;
    for (int g = 0; g < groups; ++g) {
      for (int j = 0; j < e; ++j) {
        aux += e * f[g * e + j] * sums[g * e + j] / static_cast<double>(tokens[g]) / groups;
      }
    }
    for (int j = 0; j < e; ++j) stats_.routed[j] += r.all_plan.routed[j];
    stats_.choices += static_cast<int64_t>(r.all.experts_of.size());
    stats_.dropped += r.all_plan.dropped;
    stats_.aux_loss += aux;
    stats_.z_loss += sums.back() / static_cast<double>(n_all);
    ++stats_.calls;
  }
  // d(coef * E * sum_j f_gj P_gj)/d probs[t, j] = coef * E * f_gj / N_g, times
  // the group's per-token weight N_g * ctx.dloss_scale (N_g: the whole
  // group's tokens, so ranks sharing a group add up to one process).
  dprobs_extra->resize(static_cast<size_t>(n) * e);
  for (int64_t t = 0; t < n; ++t) {
    for (int j = 0; j < e; ++j) {
      (*dprobs_extra)[t * e + j] = static_cast<float>(config_.aux_loss_coef * e *
                                                      f[r.group_of()[t] * e + j] * ctx.dloss_scale);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> MoeLayer::Forward(RunContext& ctx, const Tensor& x) {
  const int64_t c = config_.channels;
  const int k = config_.top_k, e = config_.num_experts;
  if (x.dim(-1) != c) {
    return InvalidArgument(absl::StrCat("MoE input ", ShapeString(x.shape())),
                           absl::StrCat("last dimension ", c));
  }
  WEFT_ASSIGN_OR_RETURN(MoeKernelOps * moe, GetMoeKernelOps(ctx.device.type));
  const int64_t n = x.numel() / c;
  const Tensor x2 = x.View({n, c});
  const KernelContext kc = ctx.kernel();

  // Router: (N, C) -> logits (N, E) -> probs, top-k choices and gates.
  WEFT_ASSIGN_OR_RETURN(Tensor logits, router_->CallForward(ctx, x2));
  WEFT_ASSIGN_OR_RETURN(Tensor probs, ctx.Empty({n, e}, DType::kF32));
  WEFT_ASSIGN_OR_RETURN(Tensor lse, ctx.Empty({n}, DType::kF32));
  WEFT_ASSIGN_OR_RETURN(Tensor idx, ctx.Empty({n, k}, DType::kI32));
  WEFT_ASSIGN_OR_RETURN(Tensor gates, ctx.Empty({n, k}, DType::kF32));
  WEFT_RETURN_IF_ERROR(moe->RouterTopK(kc, probs, lse, idx, gates, logits,
                                       RouterSpecOf(config_)));

  // Routing groups: sample b (rows of x's first dimension) in b % groups.
  int groups = config_.routing_groups;
  const int64_t samples = x.ndim() >= 3 ? x.dim(0) : n;
  if (!ctx.training && samples % groups != 0) {
    // Groups split a training micro-batch (one process standing for several
    // ranks); a sequence being decoded is one sample, routed whole.
    groups = static_cast<int>(std::gcd<int64_t>(groups, samples));
  }
  if (samples % groups != 0) {
    return InvalidArgument(absl::StrCat(samples, " samples in ", groups, " routing groups"),
                           "a number of samples divisible by routing_groups",
                           "make the micro-batch a multiple of --moe_routing_groups");
  }
  WEFT_ASSIGN_OR_RETURN(Routing routing, Route(ctx, idx, samples, groups));
  const RoutingPlan& plan = routing.plan();
  const int64_t m = static_cast<int64_t>(plan.assign.size());
  WEFT_ASSIGN_OR_RETURN(Tensor slots, ToDevice(ctx, *Tensor::FromVector<int32_t>(plan.slots, {n, k})));
  WEFT_ASSIGN_OR_RETURN(Tensor assign, ToDevice(ctx, *Tensor::FromVector<int32_t>(plan.assign, {m})));

  // Tokens grouped by expert (M, C), to the experts' ranks and back.
  WEFT_ASSIGN_OR_RETURN(Tensor grouped, ctx.Empty({m, c}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(moe->GatherRows(kc, grouped, x2, assign, k, Tensor()));
  Tensor expert_out;
  if (dispatcher_ != nullptr) {
    WEFT_ASSIGN_OR_RETURN(expert_out, dispatcher_->Forward(ctx, grouped, plan.counts, *experts_));
  } else {
    WEFT_ASSIGN_OR_RETURN(expert_out, experts_->ForwardGrouped(ctx, grouped, plan.counts));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor y, ctx.Empty({n, c}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(moe->CombineRows(kc, y, expert_out, slots, gates, /*accumulate=*/false));
  if (shared_ != nullptr) {
    WEFT_ASSIGN_OR_RETURN(Tensor ys, shared_->CallForward(ctx, x2));
    WEFT_RETURN_IF_ERROR(ctx.ops->Add(kc, y, y, ys));
  }

  if (ctx.training) {
    // The probabilities and log-sum-exps are read for the metrics only (the
    // balance-loss gradient needs the routing fractions): a recompute's
    // metrics are not counted, so it skips the two reads (host syncs).
    std::vector<float> probs_host, lse_host;
    if (!ctx.recomputing) {
      WEFT_ASSIGN_OR_RETURN(probs_host, probs.ToVector<float>());
      WEFT_ASSIGN_OR_RETURN(lse_host, lse.ToVector<float>());
    }
    std::vector<float> dprobs_extra;
    WEFT_RETURN_IF_ERROR(Record(ctx, routing, probs_host, lse_host,
                                /*count_stats=*/!ctx.recomputing, &dprobs_extra));
    SavedActivations& r = ctx.store().Get(RouterKey(), ctx.slot);
    r[kProbs] = probs;
    r[kLse] = lse;
    r[kExperts] = idx;
    r[kGates] = gates;
    r.shape = x.shape();
    SavedActivations& s = ctx.store().Get(RoutingKey(), ctx.slot);
    s[kSlots] = slots;
    s[kAssign] = assign;
    s[kExpertOut] = expert_out;
    WEFT_ASSIGN_OR_RETURN(s[kDprobsExtra],
                          ToDevice(ctx, *Tensor::FromVector<float>(dprobs_extra, {n, e})));
  }
  return y.View(x.shape());
}

absl::StatusOr<Tensor> MoeLayer::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* r = ctx.store().Find(RouterKey(), ctx.slot);
  SavedActivations* s = ctx.store().Find(RoutingKey(), ctx.slot);
  if (r == nullptr || s == nullptr) {
    return FailedPrecondition("MoeLayer backward without saved routing",
                              "Forward in training mode before Backward");
  }
  WEFT_ASSIGN_OR_RETURN(MoeKernelOps * moe, GetMoeKernelOps(ctx.device.type));
  const int64_t c = config_.channels;
  const int k = config_.top_k, e = config_.num_experts;
  const int64_t n = dy.numel() / c;
  const Tensor dy2 = dy.View({n, c});
  const Tensor slots = (*s)[kSlots], assign = (*s)[kAssign], expert_out = (*s)[kExpertOut];
  const Tensor gates = (*r)[kGates];
  const int64_t m = assign.numel();
  const KernelContext kc = ctx.kernel();

  // y[t] = sum_j g[t, j] * out[slot]: dg = <dy, out>, d out[slot] = g * dy[t].
  WEFT_ASSIGN_OR_RETURN(Tensor dgates, ctx.Empty({n, k}, DType::kF32));
  WEFT_RETURN_IF_ERROR(moe->RowDots(kc, dgates, dy2, expert_out, slots));
  WEFT_ASSIGN_OR_RETURN(Tensor dout, ctx.Empty({m, c}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(moe->GatherRows(kc, dout, dy2, assign, k, gates));
  Tensor dgrouped;
  if (dispatcher_ != nullptr) {
    WEFT_ASSIGN_OR_RETURN(dgrouped, dispatcher_->Backward(ctx, dout, *experts_));
  } else {
    WEFT_ASSIGN_OR_RETURN(dgrouped, experts_->BackwardGrouped(ctx, dout));
  }
  // Every kept choice of token t read x[t] once.
  WEFT_ASSIGN_OR_RETURN(Tensor dx, ctx.Empty({n, c}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(moe->CombineRows(kc, dx, dgrouped, slots, Tensor(), false));

  // Router: gates, the balance loss and the z-loss -> dlogits -> dx.
  WEFT_ASSIGN_OR_RETURN(Tensor dlogits, ctx.Empty({n, e}, ctx.compute_dtype));
  const float lse_scale = 2.0f * config_.z_loss_coef * ctx.dloss_scale;
  WEFT_RETURN_IF_ERROR(moe->RouterTopKBackward(kc, dlogits, dgates, (*r)[kProbs], (*r)[kLse],
                                               (*r)[kExperts], (*s)[kDprobsExtra], lse_scale,
                                               RouterSpecOf(config_)));
  const Shape shape = r->shape;
  ctx.store().Drop(RouterKey(), ctx.slot);
  ctx.store().Drop(RoutingKey(), ctx.slot);
  WEFT_ASSIGN_OR_RETURN(Tensor dx_router, router_->CallBackward(ctx, dlogits));
  WEFT_RETURN_IF_ERROR(ctx.ops->Add(kc, dx, dx, dx_router));
  if (shared_ != nullptr) {
    WEFT_ASSIGN_OR_RETURN(Tensor dx_shared, shared_->CallBackward(ctx, dy2));
    WEFT_RETURN_IF_ERROR(ctx.ops->Add(kc, dx, dx, dx_shared));
  }
  return dx.View(shape);
}

MoeStats MoeLayer::TakeStats() {
  MoeStats out = stats_;
  stats_ = MoeStats();
  stats_.routed.assign(config_.num_experts, 0);
  return out;
}

void AppendMoeMetrics(Module& root, std::vector<std::pair<std::string, double>>* out) {
  double aux = 0, z = 0, lo = 0, hi = 0, cv = 0;
  int64_t calls = 0, choices = 0, dropped = 0;
  bool any = false;
  for (Module* m : root.Modules()) {
    auto* layer = dynamic_cast<MoeLayer*>(m);
    if (layer == nullptr) continue;
    MoeStats s = layer->TakeStats();
    if (s.calls == 0) continue;
    aux += s.aux_loss;
    z += s.z_loss;
    calls += s.calls;
    choices += s.choices;
    dropped += s.dropped;
    // Load relative to a perfect balance (choices / E per expert).
    const double mean = static_cast<double>(s.choices) / s.routed.size();
    double l_min = 1e300, l_max = 0, var = 0;
    for (int64_t r : s.routed) {
      const double l = r / mean;
      l_min = std::min(l_min, l);
      l_max = std::max(l_max, l);
      var += (l - 1.0) * (l - 1.0);
    }
    const double layer_cv = std::sqrt(var / s.routed.size());
    lo = any ? std::min(lo, l_min) : l_min;
    hi = any ? std::max(hi, l_max) : l_max;
    cv = std::max(cv, layer_cv);
    any = true;
  }
  if (!any) return;
  out->push_back({"moe_aux_loss", aux / calls});
  out->push_back({"moe_z_loss", z / calls});
  out->push_back({"moe_load_min", lo});
  out->push_back({"moe_load_max", hi});
  out->push_back({"moe_load_cv", cv});
  out->push_back({"moe_dropped_frac", static_cast<double>(dropped) / choices});
}

}  // namespace weft
