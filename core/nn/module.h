// Module: a named tree of layers with explicit Forward and Backward.
//
// Each module declares its Parameters, keeps only the activations its
// Backward needs, and is called through CallForward / CallBackward so the
// hooks strategies rely on fire in a fixed order:
//   pre-forward hooks, Forward, post-forward hooks
//   pre-backward hooks, Backward, post-backward hooks, gradients-ready hooks
// After a module's Backward (and so in its post-backward hooks) the
// gradients of its own parameters are final for this micro-batch, unless
// the backward was split (RunContext::defer_weight_grads: a zero-bubble
// pipeline's B computes input gradients and queues the weight-gradient
// GEMMs for its W). Gradients-ready hooks run when they are final: right
// after the post-backward hooks, or, for a split backward, queued behind
// the module's weight-gradient work in its micro-batch slot. Hooks that
// reduce or rewrite gradients (data parallelism, freezing) belong there;
// post-backward hooks are for what must happen when Backward returns. A tied
// weight is owned by the module that runs backward last (the token
// embedding); the head that borrows it (BorrowedParameters) accumulates into
// the same gradient earlier.
//
// A strategy can do three things to a module: hook it, swap it for a
// parallel version (ReplaceChild), or re-place its parameters.
#ifndef WEFT_CORE_NN_MODULE_H_
#define WEFT_CORE_NN_MODULE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/parameter.h"
#include "core/nn/run_context.h"

namespace weft {

class Module {
 public:
  using Hook = std::function<absl::Status(Module&, RunContext&)>;
  enum class HookPoint { kPreForward, kPostForward, kPreBackward, kPostBackward, kGradientsReady };

  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // x -> y; in training, saves what Backward needs in the context's
  // activation store under (this, ctx.slot), never in members, so several
  // micro-batches can be in flight.
  virtual absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) = 0;
  // dL/dy -> dL/dx for the micro-batch ctx.slot; accumulates parameter
  // gradients and drops what its forward saved. Modules whose input is not
  // differentiable (token ids) return an undefined tensor.
  virtual absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) = 0;
  // Parameters this module reads but another module owns (a tied head).
  virtual std::vector<Parameter*> BorrowedParameters() const { return {}; }

  absl::StatusOr<Tensor> CallForward(RunContext& ctx, const Tensor& x);
  absl::StatusOr<Tensor> CallBackward(RunContext& ctx, const Tensor& dy);
  // Runs `body` between the hooks of the given phase: for layers with an
  // extra entry point (e.g. a residual-fused LayerNorm).
  absl::Status RunHooked(RunContext& ctx, bool backward, const std::function<absl::Status()>& body);

  // Hooks run in the order added. Returns an id for RemoveHook.
  int AddHook(HookPoint point, Hook hook);
  void RemoveHook(int id);

  const std::string& type_name() const { return type_name_; }
  const std::string& local_name() const { return local_name_; }
  // Dotted path from the root, e.g. "blocks.3.attn"; "" for the root.
  std::string name() const;
  Module* parent() const { return parent_; }

  // Direct children and parameters in registration order.
  std::vector<Module*> children() const;
  size_t num_children() const { return children_.size(); }
  const std::vector<std::unique_ptr<Parameter>>& own_parameters() const { return params_; }
  // The owned parameters this rank holds (Parameter::held): what strategies
  // shard, reduce and update.
  std::vector<Parameter*> held_own_parameters() const;
  // Every parameter owned in the subtree that this rank holds, depth-first
  // in registration order. A parameter a module uses but does not own (a
  // tied weight) is not listed again: each appears once, under its owner.
  std::vector<Parameter*> Parameters();
  // Every parameter owned in the subtree, held on this rank or not: the
  // whole model's parameters (e.g. what a checkpoint of the job holds).
  std::vector<Parameter*> AllParameters();
  // Every module in the subtree, this one first (pre-order), except
  // subtrees whose parameters are all held by other ranks.
  std::vector<Module*> Modules();
  Module* FindModule(const std::string& dotted_name);
  Parameter* FindParameter(const std::string& dotted_name);
  // Drops what this subtree saved for the micro-batch ctx.slot (recompute).
  void ReleaseActivationsRecursive(RunContext& ctx);

  // The child registered as `local_name`, or nullptr.
  Module* child(const std::string& local_name) const;
  // Whether ReplaceChild may swap that child (RegisterSwappableModule).
  bool swappable(const std::string& local_name) const;

  // Swaps the child registered as `local_name` for `replacement`, which takes
  // its name; returns the old child. Parameters' names are refreshed. A
  // pinned child (one its parent uses through its own type) is an error.
  absl::StatusOr<std::unique_ptr<Module>> ReplaceChild(const std::string& local_name,
                                                       std::unique_ptr<Module> replacement);

 protected:
  // A child the parent calls through its own type (it keeps the returned
  // pointer and uses M's methods): pinned, ReplaceChild refuses to swap it.
  template <typename M>
  M* RegisterModule(std::string local_name, std::unique_ptr<M> child) {
    M* raw = child.get();
    AdoptChild(std::move(local_name), std::move(child), /*swappable=*/false);
    return raw;
  }
  // A child the parent reaches only through Module (CallForward and
  // CallBackward on child(local_name), looked up at each call): strategies
  // may swap it for a parallel version or a recompute wrapper. The returned
  // pointer is for construction only.
  template <typename M>
  M* RegisterSwappableModule(std::string local_name, std::unique_ptr<M> child) {
    M* raw = child.get();
    AdoptChild(std::move(local_name), std::move(child), /*swappable=*/true);
    return raw;
  }
  Parameter* RegisterParameter(std::string local_name, Shape shape, InitSpec init,
                               bool weight_decay);

 private:
  struct HookEntry {
    int id;
    HookPoint point;
    Hook hook;
  };
  void AdoptChild(std::string local_name, std::unique_ptr<Module> child, bool swappable);
  void RefreshNames();
  absl::Status RunHooks(HookPoint point, RunContext& ctx);
  // The post-backward hooks, then the gradients-ready hooks now or (split
  // backward) after the slot's queued weight-gradient work.
  absl::Status FinishBackward(RunContext& ctx);

  std::string type_name_;
  std::string local_name_;
  Module* parent_ = nullptr;
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  std::vector<std::string> pinned_children_;  // registered with RegisterModule
  // children_'s names, so adding a child is O(1): a 100000-block model was
  // quadratic to build.
  absl::flat_hash_set<std::string> child_names_;
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<HookEntry> hooks_;
  int next_hook_id_ = 0;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_MODULE_H_
