#include "core/kernels/cuda/matmul.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cuda/elementwise.h"
#include "core/kernels/cuda/matmul_kernels.h"
#include "core/tensor/allocator.h"
#include "core/tensor/cuda/cuda_check.h"
#include "core/tensor/tensor.h"

namespace weft::cuda {
namespace {

// cuBLAS recommends 32 MiB of workspace on Hopper.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxDevices = 64;
// Algorithms WEFT_GEMM_AUTOTUNE times per plan; runs per algorithm.
constexpr int kTuneCandidates = 8;
constexpr int kTuneRuns = 3;

// WEFT_GEMM_AUTOTUNE=1: on a plan's first use, time cuBLASLt's first
// kTuneCandidates heuristic algorithms on scratch outputs (one host sync
// per new GEMM shape) and keep the fastest. Off by default: the choice
// follows timing, so two runs may pick different algorithms and differ in
// the last bits, where the heuristic's first choice is the same every run.
bool AutotuneRequested() {
  const char* v = std::getenv("WEFT_GEMM_AUTOTUNE");
  return v != nullptr && v[0] == '1';
}

cudaDataType_t CudaType(DType d) { return d == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

// Largest power of two dividing the address, capped at cuBLASLt's default
// assumption (256). The heuristic must know it: algorithms it picks for
// 256-byte-aligned operands may fault on less aligned ones.
uint32_t Alignment(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 1;
  while (a < 256 && v % (a * 2) == 0) a *= 2;
  return a;
}

cublasLtEpilogue_t LtEpilogue(const MatmulArgs& args) {
  switch (args.epilogue) {
    case MatmulEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case MatmulEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case MatmulEpilogue::kBiasGelu: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case MatmulEpilogue::kDGelu:
      return args.bias_grad != nullptr ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
    case MatmulEpilogue::kBiasGradA: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Everything a cached plan depends on. Pointers only through alignment.
struct PlanKey {
  int64_t m, n, k;
  bool trans_a, trans_b, accumulate, bias_grad;
  DType ab, out, bias;
  MatmulEpilogue epilogue;
  uint32_t align_a, align_b, align_out, align_bias, align_aux;

  friend bool operator==(const PlanKey& x, const PlanKey& y) {
    return x.m == y.m && x.n == y.n && x.k == y.k && x.trans_a == y.trans_a &&
           x.trans_b == y.trans_b && x.accumulate == y.accumulate &&
           x.bias_grad == y.bias_grad && x.ab == y.ab &&
           x.out == y.out && x.bias == y.bias && x.epilogue == y.epilogue &&
           x.align_a == y.align_a && x.align_b == y.align_b && x.align_out == y.align_out &&
           x.align_bias == y.align_bias && x.align_aux == y.align_aux;
  }
  template <typename H>
  friend H AbslHashValue(H h, const PlanKey& k) {
    return H::combine(std::move(h), k.m, k.n, k.k, k.trans_a, k.trans_b, k.accumulate,
                      k.bias_grad, k.ab,
                      k.out, k.bias, k.epilogue, k.align_a, k.align_b, k.align_out, k.align_bias,
                      k.align_aux);
  }
};

// Descriptors and the chosen algorithm for one PlanKey.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr;  // cuBLASLt's A: our b
  cublasLtMatrixLayout_t layout_b = nullptr;  // cuBLASLt's B: our a
  cublasLtMatrixLayout_t layout_d = nullptr;  // C and D: our out
  cublasLtMatmulAlgo_t algo{};
  bool supported = false;
  // WEFT_GEMM_AUTOTUNE: the heuristic's candidates (algo is the first
  // until timed), and whether they were timed.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool tuned = true;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (layout_d != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_d);
    if (layout_b != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_b);
    if (layout_a != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_a);
    if (desc != nullptr) (void)cublasLtMatmulDescDestroy(desc);
  }
};

template <typename V>
absl::Status SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                     const V& value) {
  WEFT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
  return absl::OkStatus();
}

// Pointer attributes change per call; the heuristic also reads them (for
// alignment), so they are set before it runs and before every matmul.
absl::Status SetPointers(const Plan& plan, const MatmulArgs& args) {
  if (args.epilogue == MatmulEpilogue::kBias || args.epilogue == MatmulEpilogue::kBiasGelu) {
    WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, args.bias));
  }
  if (args.epilogue == MatmulEpilogue::kBiasGelu || args.epilogue == MatmulEpilogue::kDGelu) {
    WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, args.aux));
  }
  if (args.bias_grad != nullptr) {  // kBiasGradA, or kDGelu's DGELU_BGRAD
    WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, args.bias_grad));
  }
  return absl::OkStatus();
}

// WEFT_GEMM_LOG=1 names each GEMM shape whose fused epilogue cuBLASLt
// turned down (once per cached plan): the run is correct either way, but
// slower, and this is how to see it.
void LogRejected(const MatmulArgs& args, absl::string_view why) {
  static const bool on = [] {
    const char* v = std::getenv("WEFT_GEMM_LOG");
    return v != nullptr && v[0] == '1';
  }();
  if (!on) return;
  const std::string line = absl::StrCat(
      "weft gemm: cuBLASLt epilogue ", static_cast<int>(LtEpilogue(args)), " rejected (", why,
      "): M=", args.m, " N=", args.n, " K=", args.k, " trans_a=", args.trans_a,
      " trans_b=", args.trans_b, " ", DTypeName(args.ab_dtype), "->", DTypeName(args.out_dtype),
      " bias_grad=", args.bias_grad != nullptr, " accumulate=", args.accumulate, "\n");
  std::fputs(line.c_str(), stderr);
}

// WEFT_GEMM_LOG=1 also reports each autotuned shape: the chosen candidate
// and its time against the heuristic's first choice.
void LogTuned(const MatmulArgs& args, size_t chosen, size_t candidates, float first_ms,
              float best_ms) {
  const char* v = std::getenv("WEFT_GEMM_LOG");
  if (v == nullptr || v[0] != '1') return;
  const std::string line = absl::StrCat(
      "weft gemm: autotuned M=", args.m, " N=", args.n, " K=", args.k, " epilogue ",
      static_cast<int>(LtEpilogue(args)), ": candidate ", chosen + 1, " of ", candidates, ", ",
      best_ms * 1000.0f, " us against ", first_ms * 1000.0f, " us for the heuristic's first\n");
  std::fputs(line.c_str(), stderr);
}

// One GPU's cuBLASLt state. Calls are serialized by `mu` because cached
// descriptors are mutated (pointer attributes) right before each enqueue.
class LtDevice {
 public:
  explicit LtDevice(int device) : device_(device) {}

  absl::Status Init() {
    WEFT_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle_));
    return absl::OkStatus();
  }

  // Runs args as given, or returns Unimplemented when no algorithm exists.
  absl::Status Run(const MatmulArgs& args, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    const PlanKey key{args.m,
                      args.n,
                      args.k,
                      args.trans_a,
                      args.trans_b,
                      args.accumulate,
                      args.bias_grad != nullptr,
                      args.ab_dtype,
                      args.out_dtype,
                      args.bias_dtype,
                      args.epilogue,
                      Alignment(args.a),
                      Alignment(args.b),
                      Alignment(args.out),
                      Alignment(args.bias_grad != nullptr ? args.bias_grad : args.bias),
                      Alignment(args.aux)};
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      auto plan = std::make_unique<Plan>();
      WEFT_RETURN_IF_ERROR(BuildPlan(args, *plan));
      it = plans_.emplace(key, std::move(plan)).first;
    }
    Plan& plan = *it->second;
    if (!plan.supported) {
      return absl::UnimplementedError("no cuBLASLt algorithm for this GEMM");
    }
    void* workspace = nullptr;
    WEFT_ASSIGN_OR_RETURN(workspace, Workspace(stream));
    if (!plan.tuned) WEFT_RETURN_IF_ERROR(Tune(plan, args, workspace, stream));
    WEFT_RETURN_IF_ERROR(SetPointers(plan, args));
    const float alpha = 1.0f;
    const float beta = args.accumulate ? 1.0f : 0.0f;
    const cublasStatus_t st =
        cublasLtMatmul(handle_, plan.desc, &alpha, args.b, plan.layout_a, args.a, plan.layout_b,
                       &beta, args.out, plan.layout_d, args.out, plan.layout_d, &plan.algo,
                       workspace, kWorkspaceBytes, stream);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED && args.epilogue != MatmulEpilogue::kNone) {
      // Rejected before any work was enqueued: remember, and let the caller
      // run the unfused epilogue.
      plan.supported = false;
      LogRejected(args, "cublasLtMatmul: NOT_SUPPORTED");
      return absl::UnimplementedError("cuBLASLt rejected this fused epilogue");
    }
    WEFT_CUBLAS_RETURN_IF_ERROR(st);
    return absl::OkStatus();
  }

 private:
  absl::Status BuildPlan(const MatmulArgs& args, Plan& plan) {
    WEFT_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_a = args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a));
    WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b));
    const uint32_t epilogue = LtEpilogue(args);
    WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue));
    const bool has_bias =
        args.epilogue == MatmulEpilogue::kBias || args.epilogue == MatmulEpilogue::kBiasGelu;
    if (has_bias && args.bias_dtype != args.out_dtype) {
      const int32_t type = CudaType(args.bias_dtype);
      WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type));
    }
    if (args.bias_grad != nullptr && args.out_dtype != DType::kF32) {
      const int32_t type = CUDA_R_32F;  // the bias gradient is always f32 here
      WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type));
    }
    if (args.epilogue == MatmulEpilogue::kBiasGelu || args.epilogue == MatmulEpilogue::kDGelu) {
      // aux is (M, N) row-major: column-major with N rows, like D.
      const int64_t ld = args.n;
      WEFT_RETURN_IF_ERROR(SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld));
    }
    WEFT_RETURN_IF_ERROR(SetPointers(plan, args));

    // Row-major x (R, C) is column-major (C, R) with ld C; see matmul.h.
    const uint64_t a_rows = args.trans_b ? args.k : args.n;
    const uint64_t a_cols = args.trans_b ? args.n : args.k;
    const uint64_t b_rows = args.trans_a ? args.m : args.k;
    const uint64_t b_cols = args.trans_a ? args.k : args.m;
    const cudaDataType_t ab = CudaType(args.ab_dtype);
    WEFT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.layout_a, ab, a_rows, a_cols,
                                                           static_cast<int64_t>(a_rows)));
    WEFT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.layout_b, ab, b_rows, b_cols,
                                                           static_cast<int64_t>(b_rows)));
    WEFT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(
        &plan.layout_d, CudaType(args.out_dtype), args.n, args.m, args.n));

    cublasLtMatmulPreference_t pref = nullptr;
    WEFT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace = kWorkspaceBytes;
    const uint32_t align_a = Alignment(args.b), align_b = Alignment(args.a);
    const uint32_t align_d = Alignment(args.out);
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                &align_a, sizeof(align_a));
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                &align_b, sizeof(align_b));
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                &align_d, sizeof(align_d));
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                &align_d, sizeof(align_d));
    }
    const bool autotune = AutotuneRequested();
    std::array<cublasLtMatmulHeuristicResult_t, kTuneCandidates> results{};
    int returned = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
      // Any failure here means "no algorithm": NOT_SUPPORTED for unsupported
      // combinations, INVALID_VALUE for e.g. an aux ld that is not a multiple
      // of 8. The caller then falls back to an unfused epilogue.
      const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(
          handle_, plan.desc, plan.layout_a, plan.layout_b, plan.layout_d, plan.layout_d, pref,
          autotune ? kTuneCandidates : 1, results.data(), &returned);
      plan.supported = hs == CUBLAS_STATUS_SUCCESS && returned > 0;
      if (!plan.supported) {
        LogRejected(args, absl::StrCat("heuristic: status ", static_cast<int>(hs), ", ", returned,
                                       " algorithms"));
      }
    }
    (void)cublasLtMatmulPreferenceDestroy(pref);
    WEFT_CUBLAS_RETURN_IF_ERROR(st);
    if (plan.supported) {
      plan.algo = results[0].algo;
      for (int i = 0; i < returned; ++i) {
        if (results[i].state == CUBLAS_STATUS_SUCCESS) plan.candidates.push_back(results[i].algo);
      }
      plan.tuned = plan.candidates.size() < 2;
    }
    return absl::OkStatus();
  }

  // Times each candidate of `plan` on scratch copies of every output (out,
  // GELU's aux, the bias gradient), so the caller's tensors are untouched,
  // and keeps the fastest. Synchronizes the host once.
  absl::Status Tune(Plan& plan, const MatmulArgs& args, void* workspace, cudaStream_t stream) {
    const Device dev = Device::Cuda(device_);
    const int64_t out_floats =
        (args.m * args.n * static_cast<int64_t>(DTypeSize(args.out_dtype)) + 3) / 4;
    auto scratch_floats = [&](int64_t n) {
      return Tensor::Empty({n}, DType::kF32, dev, nullptr, stream);
    };
    WEFT_ASSIGN_OR_RETURN(Tensor out, scratch_floats(out_floats));
    WEFT_ASSIGN_OR_RETURN(Tensor aux, scratch_floats(out_floats));
    WEFT_ASSIGN_OR_RETURN(Tensor grad, scratch_floats(std::max(args.m, args.n)));
    WEFT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_data(), 0, out_floats * 4, stream));
    MatmulArgs scratch = args;
    scratch.out = out.raw_data();
    // GELU's aux is written by GELU_AUX_BIAS (read by DGELU: kept).
    if (args.epilogue == MatmulEpilogue::kBiasGelu) scratch.aux = aux.raw_data();
    if (args.bias_grad != nullptr) scratch.bias_grad = grad.data<float>();
    WEFT_RETURN_IF_ERROR(SetPointers(plan, scratch));
    Event start, stop;
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start.e));
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop.e));
    const float alpha = 1.0f;
    const float beta = args.accumulate ? 1.0f : 0.0f;
    float best_ms = -1.0f, first_ms = -1.0f;
    size_t best = 0;
    for (size_t i = 0; i < plan.candidates.size(); ++i) {
      auto run = [&] {
        return cublasLtMatmul(handle_, plan.desc, &alpha, args.b, plan.layout_a, args.a,
                              plan.layout_b, &beta, scratch.out, plan.layout_d, scratch.out,
                              plan.layout_d, &plan.candidates[i], workspace, kWorkspaceBytes,
                              stream);
      };
      if (run() != CUBLAS_STATUS_SUCCESS) continue;  // warm-up; a candidate may still refuse
      WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.e, stream));
      for (int r = 0; r < kTuneRuns; ++r) WEFT_CUBLAS_RETURN_IF_ERROR(run());
      WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.e, stream));
      WEFT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.e));
      float ms = 0.0f;
      WEFT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.e, stop.e));
      if (i == 0) first_ms = ms;
      if (best_ms < 0.0f || ms < best_ms) best_ms = ms, best = i;
    }
    plan.tuned = true;
    if (best_ms < 0.0f) return absl::OkStatus();  // none ran: keep the heuristic's first
    plan.algo = plan.candidates[best];
    LogTuned(args, best, plan.candidates.size(), first_ms / kTuneRuns, best_ms / kTuneRuns);
    return absl::OkStatus();
  }

  // A CUDA event destroyed with its scope (Tune returns early on errors).
  struct Event {
    cudaEvent_t e = nullptr;
    ~Event() {
      if (e != nullptr) (void)cudaEventDestroy(e);
    }
  };

  // A workspace per stream: two streams running GEMMs at once must not share.
  absl::StatusOr<void*> Workspace(cudaStream_t stream) {
    auto it = workspaces_.find(stream);
    if (it != workspaces_.end()) return it->second;
    WEFT_ASSIGN_OR_RETURN(Allocator * alloc, DefaultAllocator(Device::Cuda(device_)));
    WEFT_ASSIGN_OR_RETURN(void* ws, alloc->Allocate(kWorkspaceBytes, stream));
    workspaces_.emplace(stream, ws);  // kept for the process lifetime
    return ws;
  }

  const int device_;
  std::mutex mu_;
  cublasLtHandle_t handle_ = nullptr;
  absl::flat_hash_map<cudaStream_t, void*> workspaces_;
  absl::flat_hash_map<PlanKey, std::unique_ptr<Plan>> plans_;
};

absl::StatusOr<LtDevice*> GetLtDevice(int device) {
  if (device < 0 || device >= kMaxDevices) {
    return InvalidArgument(absl::StrCat("cuda:", device, " for a GEMM"),
                           absl::StrCat("a device index below ", kMaxDevices));
  }
  static std::mutex* mu = new std::mutex;
  // Deliberately leaked: handles must outlive static destructors that may
  // still run GEMMs, and the driver tears them down at exit.
  static auto* devices = new std::array<LtDevice*, kMaxDevices>{};
  std::lock_guard<std::mutex> lock(*mu);
  LtDevice*& slot = (*devices)[device];
  if (slot == nullptr) {
    auto d = std::make_unique<LtDevice>(device);
    WEFT_RETURN_IF_ERROR(d->Init());
    slot = d.release();
  }
  return slot;
}

// Whether to try cuBLASLt's fused epilogue at all. Its aux matrix needs an
// ld that is a multiple of 8, and we want 16-byte aligned vectors. GELU
// epilogues are fused only for bf16 outputs: cuBLASLt may evaluate tanh
// approximately, which bf16 rounding hides but f32 parity (1e-4) would not,
// so f32 runs our exact unfused epilogue (the f32 path is for correctness).
bool FusedEpilogueMayApply(const MatmulArgs& args) {
  const bool has_aux =
      args.epilogue == MatmulEpilogue::kBiasGelu || args.epilogue == MatmulEpilogue::kDGelu;
  if (has_aux && args.out_dtype != DType::kBF16) return false;
  if (has_aux && (args.n % 8 != 0 || Alignment(args.aux) < 16)) return false;
  if (args.bias != nullptr && Alignment(args.bias) < 16) return false;
  if (args.epilogue == MatmulEpilogue::kBiasGradA && !args.trans_a) return false;
  if (args.bias_grad != nullptr && Alignment(args.bias_grad) < 16) return false;
  return true;
}

absl::Status NoAlgorithm(const MatmulArgs& args) {
  return Internal(absl::StrCat("cuBLASLt has no algorithm for a ", DTypeName(args.ab_dtype),
                               " GEMM (M=", args.m, ", N=", args.n, ", K=", args.k, ") with ",
                               DTypeName(args.out_dtype), " output"),
                  "f32 or bf16 operands with 16-byte aligned rows",
                  "check the operands' dtypes, shapes and alignment");
}

// A plain GEMM (no epilogue) into `dest`, which has out's layout and dtype.
absl::Status RunPlain(LtDevice& lt, const MatmulArgs& args, void* dest, cudaStream_t stream) {
  MatmulArgs plain = args;
  plain.out = dest;
  plain.epilogue = MatmulEpilogue::kNone;
  plain.bias = nullptr;
  plain.aux = nullptr;
  plain.bias_grad = nullptr;
  plain.bias_dtype = DType::kF32;
  const absl::Status st = lt.Run(plain, stream);
  return absl::IsUnimplemented(st) ? NoAlgorithm(args) : st;
}

// The unfused bias gradient, written like cuBLASLt's: dst (cols, f32) =
// column sums of src (rows, cols).
absl::Status WriteColumnSums(int device, float* dst, const void* src, DType src_dtype,
                             int64_t rows, int64_t cols, Allocator* scratch_allocator,
                             cudaStream_t stream) {
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(dst, 0, static_cast<size_t>(cols) * sizeof(float), stream));
  if (rows == 0) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(Tensor scratch,
                        Tensor::Empty({ColumnSumScratchFloats(rows, cols)}, DType::kF32,
                                      Device::Cuda(device), scratch_allocator, stream));
  return LaunchColumnSum(dst, DType::kF32, src, src_dtype, rows, cols, scratch.data<float>(),
                         stream);
}

}  // namespace

absl::Status Matmul(int device, const MatmulArgs& args, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(LtDevice * lt, GetLtDevice(device));
  // Unfused, the GEMM result goes to aux for kBiasGelu and to out otherwise.
  void* const dest = args.epilogue == MatmulEpilogue::kBiasGelu ? args.aux : args.out;
  if (args.k == 0) {
    // op(a)·op(b) is all zeros; cuBLASLt does not take K = 0.
    if (!args.accumulate) {
      const size_t bytes = static_cast<size_t>(args.m * args.n) * DTypeSize(args.out_dtype);
      WEFT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dest, 0, bytes, stream));
    }
  } else if (args.epilogue != MatmulEpilogue::kNone && !FusedEpilogueMayApply(args)) {
    WEFT_RETURN_IF_ERROR(RunPlain(*lt, args, dest, stream));
  } else {
    const absl::Status fused = lt->Run(args, stream);
    if (fused.ok()) return fused;
    if (!absl::IsUnimplemented(fused)) return fused;
    if (args.epilogue == MatmulEpilogue::kNone) return NoAlgorithm(args);
    if (args.epilogue == MatmulEpilogue::kDGelu && args.bias_grad != nullptr) {
      // DGELU_BGRAD rejected: DGELU alone still saves a pass over the
      // activations; the bias gradient then comes from our column sum.
      MatmulArgs dgelu = args;
      dgelu.bias_grad = nullptr;
      const absl::Status st = lt->Run(dgelu, stream);
      if (st.ok()) {
        return WriteColumnSums(device, args.bias_grad, args.out, args.out_dtype, args.m, args.n,
                               args.scratch_allocator, stream);
      }
      if (!absl::IsUnimplemented(st)) return st;
    }
    WEFT_RETURN_IF_ERROR(RunPlain(*lt, args, dest, stream));
  }
  switch (args.epilogue) {
    case MatmulEpilogue::kNone:
      return absl::OkStatus();
    case MatmulEpilogue::kBias:
      return LaunchAddBias(args.out, args.out_dtype, args.bias, args.bias_dtype, args.m, args.n,
                           stream);
    case MatmulEpilogue::kBiasGelu:
      return LaunchBiasGelu(args.out, args.aux, args.out_dtype, args.bias, args.bias_dtype,
                            args.m, args.n, stream);
    case MatmulEpilogue::kDGelu:
      // out *= gelu'(aux), in place.
      WEFT_RETURN_IF_ERROR(LaunchGeluBackward(args.out, args.out, args.aux, args.out_dtype,
                                              args.m * args.n, stream));
      if (args.bias_grad == nullptr) return absl::OkStatus();
      return WriteColumnSums(device, args.bias_grad, args.out, args.out_dtype, args.m, args.n,
                             args.scratch_allocator, stream);
    case MatmulEpilogue::kBiasGradA:  // a is (K, M)
      return WriteColumnSums(device, args.bias_grad, args.a, args.ab_dtype, args.k, args.m,
                             args.scratch_allocator, stream);
  }
  return absl::OkStatus();
}

}  // namespace weft::cuda
