// Bottom-up time of one training step (one optimizer update) on a cluster: per-op roofline
// times for the slowest pipeline stage, tensor/context/expert-parallel collectives on the
// critical path, the pipeline bubble of 1F1B or interleaved 1F1B (Narayanan et al. 2021),
// point-to-point activation sends, data-parallel gradient reduction bucketed and overlapped
// with the last backward, ZeRO traffic (Rajbhandari et al. 2020), recomputation and a
// memory-bound optimizer step. Every part is kept so that the breakdown sums to the total.
// Stages may hold different numbers of layers (ParallelPlan::stage_layers): the slowest
// stage sets the pace of the pipeline and the fullest one the memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"
#include "model/spec.hpp"
#include "simulate/collectives.hpp"
#include "simulate/costs.hpp"
#include "simulate/framework.hpp"
#include "simulate/memory.hpp"
#include "simulate/roofline.hpp"

namespace trainsim::sim {

struct StepOptions {
  double bucket_bytes = 25.0 * 1024 * 1024; // DP gradient bucket (PyTorch DDP default)
  // Explicit gradient buckets (bytes, in the order backward makes them ready), e.g. one per
  // parameter tensor for per-parameter all-reduce; empty: equal buckets of bucket_bytes.
  std::vector<double> dp_bucket_list_bytes;
  bool dp_overlap = true;  // bucketed gradient reduction overlapped with backward
  bool tp_overlap = false; // hide TP collectives behind GEMMs (off: Megatron-LM 2021)
  // Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm): one micro-batch's
  // forward runs merged with another's backward, layer by layer, so that the expert-parallel
  // all-to-alls of each hide behind the other's compute (ep_overlap_applies says where).
  bool ep_overlap = false;
  Algorithm dp_algorithm = Algorithm::automatic;
  // Equal buckets (no explicit list) are priced once and overlapped in closed form
  // (overlap_equal_buckets); false walks them one by one as an explicit list would (for tests).
  bool closed_form_buckets = true;
  // The training framework (kernels, host time, optimizer, memory rules); null: our own trainer
  // (trainsim_framework(), the identity).
  std::shared_ptr<const FrameworkProfile> framework;
  [[nodiscard]] const FrameworkProfile& fw() const {
    return framework ? *framework : trainsim_framework();
  }
};

/// Seconds of one micro-batch on a pipeline stage, by part (forward, backward, recompute and
/// the exposed tensor/context/expert-parallel traffic).
struct StageTime {
  double fwd = 0, bwd = 0, rc = 0, tp = 0, cp = 0, ep = 0;
  // Host issue time of forward and of backward with its recompute (queue-model frameworks;
  // not GPU time, so not in total()).
  double host_fwd = 0, host_bwd = 0;
  // Of ep, what a merged forward/backward pair hides (StepOptions::ep_overlap; else 0): the
  // forward's all-to-alls up to the backward's compute and the backward's up to the forward's.
  double ep_hidden = 0;
  [[nodiscard]] double total() const { return fwd + bwd + rc + tp + cp + ep; }
  /// Every part times k.
  [[nodiscard]] StageTime scaled(double k) const {
    return {k * fwd, k * bwd,      k * rc,       k * tp,       k * cp,
            k * ep,  k * host_fwd, k * host_bwd, k * ep_hidden};
  }
  /// Adds k x `o` to every part.
  StageTime& add_scaled(const StageTime& o, double k) {
    fwd += k * o.fwd;
    bwd += k * o.bwd;
    rc += k * o.rc;
    tp += k * o.tp;
    cp += k * o.cp;
    ep += k * o.ep;
    host_fwd += k * o.host_fwd;
    host_bwd += k * o.host_bwd;
    ep_hidden += k * o.ep_hidden;
    return *this;
  }
  /// No micro-batch of a step takes less (every one merged).
  [[nodiscard]] double least() const { return total() - ep_hidden; }
};
/// A stage of n layers takes n x layer, plus first_extra on the first stage (embedding) and
/// last_extra on the last (final norm, LM head, loss), under the plan's recompute policy.
/// `layer_plain` is a layer that does not recompute: under full recompute of some layers only
/// (TrainingSetup::recompute_layers) the stage's other layers cost that.
struct StageCosts {
  StageTime layer, layer_plain, first_extra, last_extra;
  /// The n layers of a stage, `recomputed` of them under the plan's policy
  /// (model::layers_recomputed), without the stage's extras.
  [[nodiscard]] StageTime layers(std::int64_t n, std::int64_t recomputed) const;
};

inline StageTime StageCosts::layers(std::int64_t n, std::int64_t recomputed) const {
  if (recomputed >= n) // every layer runs the policy (the plan search's usual case)
    return layer.scaled(static_cast<double>(n));
  const double k = static_cast<double>(std::max<std::int64_t>(recomputed, 0));
  return layer.scaled(k).add_scaled(layer_plain, static_cast<double>(n) - k);
}

[[nodiscard]] StageCosts stage_costs(const MicroBatchTimes& t, const model::ParallelPlan& plan,
                                     const StepOptions& options);

struct StepBreakdown { // seconds per step, on the critical path
  double forward = 0, backward = 0, recompute = 0;
  double tp_comm = 0, cp_comm = 0, ep_comm = 0, pp_comm = 0, dp_comm = 0;
  double bubble = 0, optimizer = 0;
  double host = 0;    // host-bound: the host's issue time beyond the GPU's work (queue model)
  double offload = 0; // activation offload's host transfers beyond the compute they hide behind
  [[nodiscard]] double total() const {
    return forward + backward + recompute + tp_comm + cp_comm + ep_comm + pp_comm + dp_comm +
           bubble + optimizer + host + offload;
  }
};

struct StepEstimate {
  double step_time_s = 0;
  StepBreakdown breakdown_s;
  double mfu = 0, hfu = 0;
  double tokens_per_step = 0, tokens_per_s = 0;
  double model_flops_per_step = 0, hardware_flops_per_step = 0;
  double achieved_flops_per_s_per_gpu = 0; // model FLOPs / (step x GPUs)
  double peak_flops_per_s = 0;
  std::int64_t micro_batches = 1; // per step per pipeline (gradient accumulation)
  std::int64_t global_batch_size = 0;
  double micro_batch_stage_s = 0;        // one micro-batch through the slowest stage (fwd+bwd+...)
  std::int64_t slowest_stage = 0;        // the pipeline stage that sets the pace (first if tied)
  std::int64_t slowest_stage_layers = 0; // transformer layers on it
  double dp_bytes = 0;                   // gradient bytes reduced per step per GPU
  double dp_volume_bytes = 0;            // bytes each GPU sends for DP/ZeRO per step (bus volume)
  double dp_overlap_slowdown_s = 0;      // compute lost to overlapped DP traffic (inside backward)
  double zero_allgather_s = 0; // ZeRO-1/2 weight all-gather after the optimizer (in dp_comm)
  // Activation offload (TrainingSetup::offload_activation_layers): bytes each micro-batch sends
  // to host memory (and brings back), and the seconds of one way over the GPU's host link.
  double offload_bytes_per_micro_batch = 0;
  double offload_transfer_s = 0;
  // Combined 1F1B (StepOptions::ep_overlap, where it applies): the forward/backward pairs
  // merged per pipeline rank and the expert-parallel all-to-all seconds they hid (not in ep_comm).
  bool ep_overlap = false;
  std::int64_t ep_merged_pairs = 0;
  double ep_hidden_s = 0;
  // Host time to issue the step (queue-model frameworks), per phase: forward, backward with
  // its recompute, optimizer step; and in all.
  double host_forward_s = 0, host_backward_s = 0, host_optimizer_s = 0;
  double host_issue_s() const { return host_forward_s + host_backward_s + host_optimizer_s; }
  // Error band from the framework profile's fit residuals (the prediction interval of 1 sigma,
  // Student t with band_dof degrees of freedom: FitResiduals; 0 runs: no band known).
  double band_sigma_fraction = 0;
  std::int64_t band_dof = 0;
  std::int64_t band_runs = 0;
  bool band_leave_one_out = false; // the sigma is out of sample (FitResiduals)
  std::string framework; // the framework profile's name (estimate_step; not the plan search)
  std::vector<std::string> caveats;   // the profile's caveats that apply here (estimate_step)
  std::string torch_compile = "none"; // FrameworkProfile::torch_compile
  bool band_multi_gpu = false;        // the band is the profile's multi-GPU residuals
  std::string_view band_kind; // "dense" / "MoE" (literals): the residuals of that kind of model
  std::int64_t collective_evaluations = 0; // collective_cost() calls compose_step made (the
                                           // plan search's work per plan; guarded by a test)
  MemoryBreakdown memory;
  std::vector<OpCost> layer_forward, layer_backward; // one layer of each kind, for explanations
  Placement placement;
};

/// Where Megatron-Core runs its combined 1F1B schedule (combined_1f1b.py, schedules.py): with
/// expert parallelism (ep > 1), without full recompute (a checkpointed micro-batch cannot be
/// merged) and, with a pipeline, only interleaved (interleave > 1). "" when it applies, else the
/// rule it breaks, for the CLI to name (a literal: cheap on the plan search's path).
[[nodiscard]] std::string_view ep_overlap_rule(const model::ParallelPlan& plan);
/// Forward/backward pairs the combined 1F1B merges per rank in one step of m micro-batches:
/// without a pipeline all but the first forward and the last backward (m - 1); interleaved,
/// the m x v chunk passes less the first rank's warm-up, (pp - 1) x 2 + (v - 1) x pp + 1
/// (schedules.py get_pp_rank_microbatches: one more forward with the overlap), in chunk pairs.
[[nodiscard]] std::int64_t ep_merged_chunk_pairs(const model::ParallelPlan& plan,
                                                 std::int64_t micro_batches);

/// What phase 2 reads: phase 1's cached per-micro-batch results and the configuration.
struct StepInputs {
  const MicroBatchAccounting& acc;
  const MicroBatchTimes& times;
  const model::ModelSpec& model;
  const hw::ClusterSpec& cluster;
  const hw::GpuSpec& gpu;
  const hw::HardwareProfile& profile;
  const model::ParallelPlan& plan;
  const model::TrainingSetup& setup;
  const StepOptions& options;
  double model_flops_per_token = 0;
  // The fullest stage's memory when already composed (e.g. by a search that prunes on memory
  // first); null: composed here.
  const MemoryBreakdown* memory = nullptr;
};
/// Phase 2: the step from cached per-micro-batch results: its scalar fields (not the per-op
/// lists), in stages: the slowest pipeline stage, the schedule, the memory, data-parallel
/// traffic, FSDP2's copies, the optimizer, host-bound phases, the band and the rates.
[[nodiscard]] StepEstimate compose_step(const StepInputs& in);

/// Time to train on `tokens` tokens at this estimate's throughput (bottom-up), and the top-down
/// 6ND time at the MFU the estimate predicts (simulate/topdown.hpp), a cross-check: the two
/// differ by the FLOPs 6N leaves out (attention, the LM head's share).
struct TrainingTime {
  double seconds = 0, days = 0, gpu_hours = 0;
  double days_top_down_6nd = 0;
};
[[nodiscard]] TrainingTime training_time(const StepEstimate& e, double active_params, double tokens,
                                         std::int64_t num_gpus);
/// Days to train on `tokens` tokens at `tokens_per_step` every `step_time_s` (a plan's row).
[[nodiscard]] double days_to_train(double tokens, double tokens_per_step, double step_time_s);

/// Requires validated inputs (plan.num_gpus() == cluster.num_gpus()).
[[nodiscard]] StepEstimate
estimate_step(const model::ModelSpec& model, const hw::ClusterSpec& cluster, const hw::GpuSpec& gpu,
              const hw::HardwareProfile& profile, const model::ParallelPlan& plan,
              const model::TrainingSetup& setup, const StepOptions& options = {});

} // namespace trainsim::sim
