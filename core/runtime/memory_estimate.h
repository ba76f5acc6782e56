// Memory estimate: the bytes one rank of a job will hold, per category and
// at the peak, before anything runs.
//
// The estimate is a dry run of the job itself on the meta device
// (core/tensor/meta_backend.cc): the real Trainer builds the real model,
// materializes its parameters, applies the real strategies over "meta"
// process groups of the job's size (comm/meta), creates the optimizer and
// takes optimizer steps, with kernels that compute nothing and an allocator
// that hands out addresses but no memory. Every tensor the job would
// allocate on its device is allocated, with the same sizes, in the same
// order, and freed at the same points, so the allocator's exact statistics
// are the job's: parameters, gradients, optimizer state, activations, and
// what no formula lists (ddp buckets, zero/fsdp gathered units and full
// gradient buffers in flight, logits, reduction casts). A model of any size
// costs only its parameter count in bookkeeping.
//
// Pipeline stages differ (the first holds the embedding and, under 1F1B,
// the most micro-batches in flight; the last holds the logits), so each
// rank is estimated on its own (`rank`, or EstimateWorstRank over the pp
// axis). What a stage receives from its neighbours is what the model states
// (Model::StageInput; every real pipeline run checks that statement), and
// an estimate fails rather than guess where the model states nothing or
// the job's split depends on measured times (--pp_split=time).
//
// What it cannot see: memory kernels allocate privately (cuBLAS workspaces,
// NCCL buffers, the CUDA context), batches the loader stages on the device
// (CUDA; on CPU they live in host staging memory outside the device
// allocator), and the caching allocator's rounding and fragmentation,
// which show in reserved bytes, not in the allocated bytes estimated here.
// Mixture-of-experts layers route round-robin in the dry run (an equal
// share per expert, the same on every rank): real routing depends on the
// data, so an expert's buffers and an ep rank's received rows differ by the
// router's imbalance (within 3% at initialisation in
// tests/memory_estimate_moe_test.cc; at most the capacity with a factor).
// Single-process dp keeps every replica on the one meta device: exact for a
// CPU job (host memory holds them all), an upper bound for a CUDA job's
// device 0 (its other replicas live on other GPUs).
#ifndef WEFT_CORE_RUNTIME_MEMORY_ESTIMATE_H_
#define WEFT_CORE_RUNTIME_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/runtime/trainer.h"

namespace weft {

struct MemoryEstimateOptions {
  // The trainer as it would be created (config and job). The config's
  // device says which device to estimate for (its compute dtype: bf16 on
  // CUDA with dtype=auto); the dry run itself runs on meta.
  Trainer::Options trainer;
  int world_size = 1;
  int rank = 0;   // which rank to simulate (pipeline stages differ; dp ranks by padding)
  int steps = 2;  // optimizer steps to run; buffers created lazily show up by the second
  // MoE layers: balanced routing (the expected peak), or each rank's bound
  // under expert parallelism (all the ranks' rows to its experts, within
  // their capacity), which a memory budget needs.
  bool moe_routing_bound = false;
};

struct MemoryEstimate {
  std::string device;    // the device estimated for ("cpu", "cuda:0")
  std::string strategy;  // "none" or the --strategy list
  int world_size = 1;
  int rank = 0;
  // Per-category peaks while training (each category's own high-water mark).
  int64_t params = 0;
  int64_t grads = 0;
  int64_t optimizer = 0;
  int64_t activations = 0;  // what forward/backward allocate: saved tensors, their grads, logits
  // Everything live after a step (model state and persistent strategy buffers).
  int64_t resident = 0;
  // The device allocator's peak: while building (materialized model plus
  // what strategies pack and shard), and while training.
  int64_t setup_peak = 0;
  int64_t step_peak = 0;
  int64_t peak() const { return std::max(setup_peak, step_peak); }
};

absl::StatusOr<MemoryEstimate> EstimateMemory(MemoryEstimateOptions options);

// One estimate per pipeline stage (--pp > 1): options.rank's coordinates on
// every other axis, each pp coordinate in turn, in stage order. Without a
// pipeline, options.rank's estimate alone.
absl::StatusOr<std::vector<MemoryEstimate>> EstimatePipelineStages(
    const MemoryEstimateOptions& options);
// The estimate with the largest peak (what a job must fit); non-empty input.
const MemoryEstimate& WorstRank(const std::vector<MemoryEstimate>& estimates);

// A per-category table, one rank, human-readable (MiB and bytes).
std::string FormatMemoryEstimate(const MemoryEstimate& estimate);
// One line per rank (a pipeline's stages), the worst one marked.
std::string FormatStageTable(const std::vector<MemoryEstimate>& estimates);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_MEMORY_ESTIMATE_H_
