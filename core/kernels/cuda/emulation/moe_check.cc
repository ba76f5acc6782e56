// Runs the mixture-of-experts kernels of moe.cu under CPU emulation (see
// run.sh) through the launchers CudaMoeKernelOps calls, against references
// in double written here: router softmax + top-k (k = 1, 2, ties) and its
// backward, and the permutation round trip of an MoE layer with a capacity
// that drops choices and an expert nobody picks (GatherRows, CombineRows,
// RowDots), in f32 and bf16.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "core/kernels/cuda/moe.h"
#include "core/kernels/cuda/emulation/check_util.h"

using weft::DType;
using namespace emu_check;
using namespace weft::cuda;

namespace {

int bad = 0;
void Report(const char* what, DType dt, double err, double tol) {
  const bool good = err <= tol;
  printf("%-44s %s: max err %.2e (tol %.0e) %s\n", what, Name(dt), err, tol, good ? "ok" : "FAIL");
  bad += !good;
}

// Tolerances, relative to the largest reference value. f32 results come
// from expf/logf and sums of at most E or C = 67 terms: 1e-5 (measured
// about 1e-7). A bf16 output is one rounding of its f32 value, at most
// 2^-8 of the element, so of the largest: 4e-3 (measured up to 3.7e-3).
// Probabilities, lse, gates and the row dots are f32 for either dtype.
double Tol(DType dt) { return dt == DType::kBF16 ? 4e-3 : 1e-5; }
constexpr double kF32Tol = 1e-5;

// Router logits (n, e): the first half multiples of 0.25 in [-1, 1], which
// tie often and exactly (in f32 and in bf16); row 0 all equal; the rest
// uniform in [-3, 3] (no near-ties at this seed, or the index check fails).
std::vector<float> Logits(int n, int e, DType dt, std::mt19937& g) {
  std::vector<float> x = Rand(size_t(n) * e, g, dt, 3.f);
  std::uniform_int_distribution<int> q(-4, 4);
  for (int t = 0; t < n / 2; ++t)
    for (int j = 0; j < e; ++j) x[t * e + j] = t == 0 ? 0.5f : q(g) * 0.25f;
  return x;
}

// k choices of e experts; softmax or sigmoid scores; gates renormalised
// over the k or raw.
void Router(DType dt, int k, bool sigmoid, bool normalize) {
  const int n = 300, e = k > 2 ? 12 : 7;  // 300 threads: two blocks, the second partial
  std::mt19937 g(11 + k);
  const std::vector<float> logits = Logits(n, e, dt, g);
  std::vector<double> probs(size_t(n) * e), lse(n);
  std::vector<int32_t> idx(size_t(n) * k);
  std::vector<double> gates(size_t(n) * k);
  for (int t = 0; t < n; ++t) {
    const float* x = &logits[size_t(t) * e];
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < e; ++j) mx = std::max(mx, double(x[j]));
    for (int j = 0; j < e; ++j) sum += std::exp(x[j] - mx);
    lse[t] = mx + std::log(sum);
    for (int j = 0; j < e; ++j) {
      probs[t * e + j] = sigmoid ? 1.0 / (1.0 + std::exp(-double(x[j]))) : std::exp(x[j] - mx) / sum;
    }
    // The k largest, best first; equal ones in index order.
    std::vector<int> order(e);
    for (int j = 0; j < e; ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return probs[t * e + a] > probs[t * e + b]; });
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += probs[t * e + order[j]];
    for (int j = 0; j < k; ++j) {
      idx[t * k + j] = order[j];
      gates[t * k + j] = probs[t * e + order[j]] / (normalize ? chosen : 1.0);
    }
  }
  std::vector<float> gp(size_t(n) * e, 777.f), gl(n, 777.f), gg(size_t(n) * k, 777.f);
  std::vector<int32_t> gi(size_t(n) * k, 777);
  Buf x(dt, logits);
  Ok(LaunchRouterTopK(gp.data(), gl.data(), gi.data(), gg.data(), x.data(), dt, n, e, k, sigmoid,
                      normalize, nullptr),
     "router");
  Err ep, el, eg;
  long wrong_idx = 0;
  for (size_t i = 0; i < probs.size(); ++i) ep.Add(gp[i], probs[i]);
  for (int t = 0; t < n; ++t) el.Add(gl[t], lse[t]);
  for (size_t i = 0; i < gates.size(); ++i) eg.Add(gg[i], gates[i]), wrong_idx += gi[i] != idx[i];
  char what[96];
  const char* kind = sigmoid ? "sigmoid" : "softmax";
  const char* norm = normalize ? "renormalised" : "raw";
  snprintf(what, sizeof(what), "router %s top-%d %s n=%d e=%d: probs/lse/gates", kind, k, norm,
           n, e);
  Report(what, dt, std::max({ep.Rel(), el.Rel(), eg.Rel()}), kF32Tol);
  snprintf(what, sizeof(what), "router top-%d: indices differing (of %zu)", k, idx.size());
  Report(what, dt, double(wrong_idx), 0);

  // Backward from the kernel's own probs, lse and choices (what it gets in
  // training), with and without the balance term, with the z-loss term.
  for (bool extra_term : {true, false}) {
    const std::vector<float> dgates = Rand(size_t(n) * k, g, DType::kF32, 1.f);
    const std::vector<float> extra = Rand(size_t(n) * e, g, DType::kF32, 0.1f);
    const float lse_scale = extra_term && !sigmoid ? 0.01f : 0.f;
    std::vector<double> want(size_t(n) * e);
    for (int t = 0; t < n; ++t) {
      const float* p = &gp[size_t(t) * e];
      const int32_t* ix = &gi[size_t(t) * k];
      std::vector<double> dp(e, 0.0);
      if (extra_term) for (int j = 0; j < e; ++j) dp[j] = extra[t * e + j];
      // gate_j = p_j / S (renormalised) or p_j, S the chosen scores' sum.
      double s = 0, dot = 0;
      for (int j = 0; j < k; ++j) s += p[ix[j]];
      for (int j = 0; j < k; ++j) dot += dgates[t * k + j] * p[ix[j]] / s;
      for (int j = 0; j < k; ++j)
        dp[ix[j]] += normalize ? (dgates[t * k + j] - dot) / s : dgates[t * k + j];
      if (sigmoid) {
        for (int j = 0; j < e; ++j) want[t * e + j] = double(p[j]) * (1.0 - p[j]) * dp[j];
        continue;
      }
      double pdp = 0;
      for (int j = 0; j < e; ++j) pdp += p[j] * dp[j];
      for (int j = 0; j < e; ++j) want[t * e + j] = p[j] * (dp[j] - pdp + double(lse_scale) * gl[t]);
    }
    Buf dlogits(dt, std::vector<float>(size_t(n) * e, 777.f));
    Ok(LaunchRouterTopKBackward(dlogits.data(), dt, dgates.data(), gp.data(), gl.data(), gi.data(),
                                extra_term ? extra.data() : nullptr, lse_scale, n, e, k, sigmoid,
                                normalize, nullptr),
       "router backward");
    Err ed;
    const std::vector<float> got = dlogits.Get();
    for (size_t i = 0; i < want.size(); ++i) ed.Add(got[i], want[i]);
    snprintf(what, sizeof(what), "router %s top-%d %s backward %s", kind, k, norm,
             extra_term ? (sigmoid ? "+ balance" : "+ balance + z-loss") : "(gates only)");
    Report(what, dt, ed.Rel(), Tol(dt));
  }
}

// The expert-grouped order of an MoE layer: each expert's kept choices in
// token order, at most `capacity` per expert (later ones dropped: slot -1).
struct Plan {
  std::vector<int32_t> slots, assign;
  int dropped = 0, empty_experts = 0;
};
Plan MakePlan(const std::vector<int32_t>& idx, int n, int k, int e, int capacity) {
  Plan p;
  p.slots.assign(size_t(n) * k, -1);
  for (int x = 0; x < e; ++x) {
    int used = 0;
    for (int c = 0; c < n * k; ++c) {
      if (idx[c] != x) continue;
      if (used == capacity) { ++p.dropped; continue; }
      p.slots[c] = static_cast<int32_t>(p.assign.size());
      p.assign.push_back(c);
      ++used;
    }
    p.empty_experts += used == 0;
  }
  return p;
}

// Forward (gather x into expert order, combine the expert outputs with the
// gates) and backward (gate gradients, gather dy weighted by the gates,
// combine the expert input gradients into dx) of one layer.
void Permute(DType dt, int k) {
  const int n = 37, e = 5, c = 67;
  std::mt19937 g(23 + k);
  // Experts 0..3 only (expert 4 stays empty), expert 0 for every third token.
  std::vector<int32_t> idx(size_t(n) * k);
  for (int t = 0; t < n; ++t) {
    idx[t * k] = t % 3 == 0 ? 0 : t % 4;
    if (k == 2) idx[t * k + 1] = (idx[t * k] + 1 + t % 3) % 4;
  }
  const int capacity = (n * k + e - 1) / e;  // capacity factor 1
  const Plan plan = MakePlan(idx, n, k, e, capacity);
  const int m = static_cast<int>(plan.assign.size());
  if (plan.dropped == 0 || plan.empty_experts == 0) {
    printf("moe plan: %d dropped, %d empty experts: the case lost its point\n", plan.dropped,
           plan.empty_experts);
    ++bad;
  }
  const std::vector<float> x = Rand(size_t(n) * c, g, dt), dy = Rand(size_t(n) * c, g, dt);
  const std::vector<float> expert_out = Rand(size_t(m) * c, g, dt);
  const std::vector<float> dgrouped = Rand(size_t(m) * c, g, dt);
  const std::vector<float> gates = Rand(size_t(n) * k, g, DType::kF32, 1.f);
  const std::vector<float> before = Rand(size_t(n) * c, g, dt);  // accumulate's old values

  // grouped = x[assign / k]: a copy, so bitwise.
  Buf grouped(dt, std::vector<float>(size_t(m) * c, 777.f));
  Ok(LaunchGatherRows(grouped.data(), Buf(dt, x).data(), plan.assign.data(), nullptr, dt, m, c, k,
                      nullptr),
     "gather");
  Err eg;
  std::vector<float> got = grouped.Get();
  for (int i = 0; i < m; ++i)
    for (int col = 0; col < c; ++col) eg.Add(got[size_t(i) * c + col], x[size_t(plan.assign[i] / k) * c + col]);
  char what[96];
  snprintf(what, sizeof(what), "gather top-%d m=%d (%d dropped)", k, m, plan.dropped);
  Report(what, dt, eg.Rel(), 0);

  // y = sum_j gates * expert_out[slot], over junk (accumulate = false).
  Buf y(dt, std::vector<float>(size_t(n) * c, 777.f));
  Ok(LaunchCombineRows(y.data(), Buf(dt, expert_out).data(), plan.slots.data(), gates.data(), dt, n,
                       c, k, false, nullptr),
     "combine");
  // dx = before + sum_j dgrouped[slot] (accumulate, no weights).
  Buf dx(dt, before);
  Ok(LaunchCombineRows(dx.data(), Buf(dt, dgrouped).data(), plan.slots.data(), nullptr, dt, n, c, k,
                       true, nullptr),
     "combine accumulate");
  Err ey, ex;
  const std::vector<float> gy = y.Get(), gx = dx.Get();
  for (int t = 0; t < n; ++t)
    for (int col = 0; col < c; ++col) {
      double wy = 0, wx = before[size_t(t) * c + col];
      for (int j = 0; j < k; ++j) {
        const int s = plan.slots[t * k + j];
        if (s < 0) continue;
        wy += double(gates[t * k + j]) * expert_out[size_t(s) * c + col];
        wx += dgrouped[size_t(s) * c + col];
      }
      ey.Add(gy[size_t(t) * c + col], wy);
      ex.Add(gx[size_t(t) * c + col], wx);
    }
  snprintf(what, sizeof(what), "combine top-%d weighted / accumulate", k);
  Report(what, dt, std::max(ey.Rel(), ex.Rel()), Tol(dt));

  // dgates = <dy[t], expert_out[slot]>, 0 for a dropped choice (over junk).
  std::vector<float> dg(size_t(n) * k, 777.f);
  Ok(LaunchRowDots(dg.data(), Buf(dt, dy).data(), Buf(dt, expert_out).data(), plan.slots.data(), dt,
                   n, c, k, nullptr),
     "row dots");
  Err ed;
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const int s = plan.slots[t * k + j];
      double want = 0;
      for (int col = 0; s >= 0 && col < c; ++col)
        want += double(dy[size_t(t) * c + col]) * expert_out[size_t(s) * c + col];
      ed.Add(dg[t * k + j], want);
    }
  snprintf(what, sizeof(what), "row dots top-%d", k);
  Report(what, dt, ed.Rel(), kF32Tol);

  // dout = gates[a] * dy[a / k]: one f32 product, rounded for bf16.
  Buf dout(dt, std::vector<float>(size_t(m) * c, 777.f));
  Ok(LaunchGatherRows(dout.data(), Buf(dt, dy).data(), plan.assign.data(), gates.data(), dt, m, c,
                      k, nullptr),
     "gather weighted");
  Err ew;
  got = dout.Get();
  for (int i = 0; i < m; ++i) {
    const int a = plan.assign[i];
    for (int col = 0; col < c; ++col)
      ew.Add(got[size_t(i) * c + col], double(gates[a]) * dy[size_t(a / k) * c + col]);
  }
  snprintf(what, sizeof(what), "gather top-%d weighted by the gates", k);
  Report(what, dt, ew.Rel(), Tol(dt));
}

}  // namespace

int main() {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int k : {1, 2}) {
      Router(dt, k, /*sigmoid=*/false, /*normalize=*/k > 1);  // GPT's router
      Permute(dt, k);
    }
    // Qwen3-MoE (top-8, renormalised or raw) and sigmoid scores.
    Router(dt, 8, false, true);
    Router(dt, 8, false, false);
    Router(dt, 2, true, true);
  }
  printf(bad ? "FAILURES: %d\n" : "all ok\n", bad);
  return bad;
}
