#include "core/nn/module.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/check.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

std::string Module::name() const {
  std::vector<std::string> parts;
  for (const Module* m = this; m != nullptr; m = m->parent_) {
    if (!m->local_name_.empty()) parts.push_back(m->local_name_);
  }
  std::reverse(parts.begin(), parts.end());
  return absl::StrJoin(parts, ".");
}

std::vector<Module*> Module::children() const {
  std::vector<Module*> out;
  for (const auto& [n, c] : children_) out.push_back(c.get());
  return out;
}

void Module::AdoptChild(std::string local_name, std::unique_ptr<Module> child, bool swappable) {
  WEFT_CHECK(local_name.empty() || child_names_.insert(local_name).second)
      << "duplicate child name " << local_name;
  if (!swappable) pinned_children_.push_back(local_name);
  child->local_name_ = local_name;
  child->parent_ = this;
  children_.emplace_back(std::move(local_name), std::move(child));
  children_.back().second->RefreshNames();
}

Parameter* Module::RegisterParameter(std::string local_name, Shape shape, InitSpec init,
                                     bool weight_decay) {
  for (const auto& p : params_) {
    WEFT_CHECK(p->local_name() != local_name) << "duplicate parameter " << local_name;
  }
  params_.push_back(
      std::make_unique<Parameter>(std::move(local_name), std::move(shape), init, weight_decay));
  Parameter* p = params_.back().get();
  const std::string prefix = name();
  p->set_name(prefix.empty() ? p->local_name() : absl::StrCat(prefix, ".", p->local_name()));
  return p;
}

void Module::RefreshNames() {
  const std::string prefix = name();
  for (auto& p : params_) {
    p->set_name(prefix.empty() ? p->local_name() : absl::StrCat(prefix, ".", p->local_name()));
  }
  for (auto& [n, c] : children_) c->RefreshNames();
}

std::vector<Parameter*> Module::held_own_parameters() const {
  std::vector<Parameter*> out;
  for (const auto& p : params_) {
    if (p->held()) out.push_back(p.get());
  }
  return out;
}

namespace {
// True when the subtree owns parameters and this rank holds none of them.
bool HeldElsewhere(Module& m, bool* any) {
  for (const auto& p : m.own_parameters()) {
    *any = true;
    if (p->held()) return false;
  }
  for (Module* c : m.children()) {
    if (!HeldElsewhere(*c, any)) return false;
  }
  return true;
}
}  // namespace

std::vector<Parameter*> Module::Parameters() {
  std::vector<Parameter*> out;
  for (auto& p : params_) {
    if (p->held()) out.push_back(p.get());
  }
  for (auto& [n, c] : children_) {
    std::vector<Parameter*> sub = c->Parameters();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<Parameter*> Module::AllParameters() {
  std::vector<Parameter*> out;
  for (auto& p : params_) out.push_back(p.get());
  for (auto& [n, c] : children_) {
    std::vector<Parameter*> sub = c->AllParameters();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<Module*> Module::Modules() {
  std::vector<Module*> out = {this};
  for (auto& [n, c] : children_) {
    bool any = false;
    if (HeldElsewhere(*c, &any) && any) continue;
    std::vector<Module*> sub = c->Modules();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

Module* Module::FindModule(const std::string& dotted_name) {
  for (Module* m : Modules()) {
    if (m->name() == dotted_name) return m;
  }
  return nullptr;
}

Parameter* Module::FindParameter(const std::string& dotted_name) {
  for (Parameter* p : Parameters()) {
    if (p->name() == dotted_name) return p;
  }
  return nullptr;
}

void Module::ReleaseActivationsRecursive(RunContext& ctx) {
  ctx.DropSaved(this);
  for (auto& [n, c] : children_) c->ReleaseActivationsRecursive(ctx);
}

Module* Module::child(const std::string& local_name) const {
  for (const auto& [n, c] : children_) {
    if (n == local_name) return c.get();
  }
  return nullptr;
}

bool Module::swappable(const std::string& local_name) const {
  return child(local_name) != nullptr &&
         std::find(pinned_children_.begin(), pinned_children_.end(), local_name) ==
             pinned_children_.end();
}

absl::StatusOr<std::unique_ptr<Module>> Module::ReplaceChild(
    const std::string& local_name, std::unique_ptr<Module> replacement) {
  if (child(local_name) != nullptr && !swappable(local_name)) {
    // Swapping it would leave the parent calling the old module through its
    // typed pointer: a silent no-op at best, a dangling pointer at worst.
    return FailedPrecondition(
        absl::StrCat("module '", name(), "' (", type_name(), ") uses its child '", local_name,
                     "' through its own type, so it cannot be swapped"),
        "a child registered with RegisterSwappableModule",
        "swap the parent instead, or register the child as swappable and call it through "
        "child()");
  }
  for (auto& [n, c] : children_) {
    if (n != local_name) continue;
    std::unique_ptr<Module> old = std::move(c);
    old->parent_ = nullptr;
    replacement->local_name_ = n;
    replacement->parent_ = this;
    c = std::move(replacement);
    c->RefreshNames();
    return old;
  }
  std::vector<std::string> names;
  for (auto& [n, c] : children_) names.push_back(n);
  return NotFound(absl::StrCat("module '", name(), "' has no child '", local_name, "'"),
                  absl::StrCat("one of [", absl::StrJoin(names, ", "), "]"));
}

int Module::AddHook(HookPoint point, Hook hook) {
  hooks_.push_back({next_hook_id_, point, std::move(hook)});
  return next_hook_id_++;
}

void Module::RemoveHook(int id) {
  hooks_.erase(std::remove_if(hooks_.begin(), hooks_.end(),
                              [id](const HookEntry& h) { return h.id == id; }),
               hooks_.end());
}

absl::Status Module::RunHooks(HookPoint point, RunContext& ctx) {
  for (HookEntry& h : hooks_) {
    if (h.point != point) continue;
    absl::Status s = h.hook(*this, ctx);
    if (!s.ok()) return Annotate(s, absl::StrCat("hook on '", name(), "'"));
  }
  return absl::OkStatus();
}

absl::Status Module::FinishBackward(RunContext& ctx) {
  WEFT_RETURN_IF_ERROR(RunHooks(HookPoint::kPostBackward, ctx));
  const bool any = std::any_of(hooks_.begin(), hooks_.end(), [](const HookEntry& h) {
    return h.point == HookPoint::kGradientsReady;
  });
  if (!any) return absl::OkStatus();
  if (!ctx.defer_weight_grads) return RunHooks(HookPoint::kGradientsReady, ctx);
  // This module's weight-gradient work (and its children's, with their
  // hooks) is already queued in the slot: the hooks run right after it.
  RunContext later = ctx;
  later.defer_weight_grads = false;
  ctx.store().Defer(ctx.slot, [this, later]() mutable {
    return RunHooks(HookPoint::kGradientsReady, later);
  });
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Module::CallForward(RunContext& ctx, const Tensor& x) {
  WEFT_RETURN_IF_ERROR(RunHooks(HookPoint::kPreForward, ctx));
  absl::StatusOr<Tensor> y = Forward(ctx, x);
  if (!y.ok()) return Annotate(y.status(), absl::StrCat(type_name_, " '", name(), "' forward"));
  WEFT_RETURN_IF_ERROR(RunHooks(HookPoint::kPostForward, ctx));
  return y;
}

absl::StatusOr<Tensor> Module::CallBackward(RunContext& ctx, const Tensor& dy) {
  WEFT_RETURN_IF_ERROR(RunHooks(HookPoint::kPreBackward, ctx));
  absl::StatusOr<Tensor> dx = Backward(ctx, dy);
  if (!dx.ok()) return Annotate(dx.status(), absl::StrCat(type_name_, " '", name(), "' backward"));
  WEFT_RETURN_IF_ERROR(FinishBackward(ctx));
  return dx;
}

absl::Status Module::RunHooked(RunContext& ctx, bool backward,
                               const std::function<absl::Status()>& body) {
  WEFT_RETURN_IF_ERROR(
      RunHooks(backward ? HookPoint::kPreBackward : HookPoint::kPreForward, ctx));
  absl::Status s = body();
  if (!s.ok()) {
    return Annotate(s, absl::StrCat(type_name_, " '", name(), backward ? "' backward" : "' forward"));
  }
  return backward ? FinishBackward(ctx) : RunHooks(HookPoint::kPostForward, ctx);
}

}  // namespace weft
