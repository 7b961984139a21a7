// Bottom-up step time (step.hpp).
#include "simulate/step.hpp"

#include <algorithm>
#include <cmath>

#include "common/units.hpp"
#include "model/count.hpp"
#include "model/ops.hpp"
#include "simulate/costs.hpp"
#include "simulate/topdown.hpp"

namespace trainsim::sim {

using model::Recompute;

std::string_view ep_overlap_rule(const model::ParallelPlan& plan) {
  if (plan.ep <= 1)
    return "needs expert parallelism (ep > 1): it hides the expert-parallel all-to-alls";
  if (plan.recompute == Recompute::full)
    return "does not run with full recompute (Megatron-Core merges no checkpointed "
           "micro-batch; use none or selective)";
  if (plan.pp > 1 && plan.interleave <= 1)
    return "needs the interleaved schedule with a pipeline (pp > 1: --interleave > 1), as "
           "Megatron-Core runs combined 1F1B only without a pipeline or interleaved";
  return "";
}

std::int64_t ep_merged_chunk_pairs(const model::ParallelPlan& plan, std::int64_t micro_batches) {
  const std::int64_t v = plan.pp > 1 ? std::max<std::int64_t>(plan.interleave, 1) : 1;
  const std::int64_t passes = micro_batches * v;
  const std::int64_t warmup = plan.pp > 1 ? (plan.pp - 1) * 2 + (v - 1) * plan.pp + 1 : 1;
  return std::max<std::int64_t>(0, passes - warmup);
}

StageCosts stage_costs(const MicroBatchTimes& t, const model::ParallelPlan& plan,
                       const StepOptions& options) {
  // Recompute re-runs the forward's collectives: all of them under full recompute; under
  // torchtitan's per-op policy the reduce-scatters' outputs are kept (its save list) and the
  // all-gathers re-run, half of them with sequence parallelism, else the all-reduces.
  const double tp_rerun = plan.recompute == Recompute::full ? 1.0
                          : plan.recompute == Recompute::selective_op
                              ? (plan.sequence_parallel ? 0.5 : 1.0)
                              : 0.0;
  const bool selective = plan.recompute == Recompute::selective;
  double tp_layer = t.layer_tp_fwd + t.layer_tp_bwd + tp_rerun * t.layer_tp_fwd +
                    (selective ? t.layer_tp_rerun_selective : 0.0);
  const FrameworkProfile& fw = options.fw();
  // Overlapped, the framework's share of the collectives hides behind the layer's GEMMs (no
  // more than its compute time); the rest stays exposed.
  if (options.tp_overlap)
    tp_layer -= std::min(fw.tp_overlap_hidden_fraction * tp_layer, t.layer_fwd + t.layer_bwd);
  StageCosts c;
  const int rc = static_cast<int>(plan.recompute);
  const double cp_layer =
      t.layer_cp + (plan.recompute == Recompute::full ? t.layer_cp_recompute : 0.0);
  c.layer = {t.layer_fwd, t.layer_bwd, t.layer_recompute[rc],
             tp_layer,    cp_layer,    t.layer_ep + (selective ? t.layer_ep_rerun_selective : 0.0)};
  // Combined 1F1B: in a merged pair the forward's dispatch and combine run beside the other
  // micro-batch's backward (with its recompute) and the backward's beside the forward
  // (Megatron-Core combined_1f1b.py: "EP A2A in forward step is hidden by the attention/mlp
  // computation in the backward step, and vice versa"); what outlasts the compute stays exposed.
  if (options.ep_overlap && ep_overlap_rule(plan).empty())
    c.layer.ep_hidden = std::min(t.layer_ep_a2a_fwd, t.layer_bwd + t.layer_recompute[rc]) +
                        std::min(t.layer_ep_a2a_bwd, t.layer_fwd);
  // A layer that does not recompute (full recompute of some layers only): its forward's
  // collectives run once, its ring once per pass, no checkpoint wrapper, nothing re-run.
  if (plan.recompute == Recompute::full) {
    c.layer_plain = c.layer;
    double tp_plain = t.layer_tp_fwd + t.layer_tp_bwd;
    if (options.tp_overlap)
      tp_plain -= std::min(fw.tp_overlap_hidden_fraction * tp_plain, t.layer_fwd + t.layer_bwd);
    c.layer_plain.rc = 0;
    c.layer_plain.tp = tp_plain;
    c.layer_plain.cp = t.layer_cp;
  }
  c.first_extra = {t.emb_fwd, t.emb_bwd, 0, t.emb_tp, 0, 0};
  c.last_extra = {t.head_fwd, t.head_bwd, 0, t.head_tp, 0, 0};
  // Host issue time (queue-model frameworks): the ops', plus the checkpoint wrapper of a
  // recomputed layer in backward.
  const double ckpt = plan.recompute == Recompute::none ? 0 : fw.host_s_per_checkpoint;
  // Per-op checkpointing's dispatch mode sees every op of the forward and of its re-run.
  const double sac = plan.recompute == Recompute::selective_op ? t.layer_sac_dispatch_host : 0;
  c.layer.host_fwd = t.layer_fwd_host + sac;
  c.layer.host_bwd = t.layer_bwd_host + t.layer_recompute_host[rc] + ckpt + sac;
  if (plan.recompute == Recompute::full) {
    c.layer_plain.host_fwd = c.layer.host_fwd;
    c.layer_plain.host_bwd = t.layer_bwd_host;
  }
  c.first_extra.host_fwd = t.emb_fwd_host;
  c.first_extra.host_bwd = t.emb_bwd_host;
  c.last_extra.host_fwd = t.head_fwd_host;
  c.last_extra.host_bwd = t.head_bwd_host;
  return c;
}

namespace {
// compose_step's stages, in order, over one estimate: each reads the inputs and what the stages
// before it set.
struct StepComposer : StepInputs {
  StepEstimate& est;
  const Placement& pl;
  StageTime stage;         // one micro-batch through the slowest stage
  double mb = 0;           // micro-batches per step
  double layers = 0;       // layers per stage on average
  double stage_params = 0; // parameters on the fullest stage's GPU
  StateBytesPerParam per_param;
  double optimizer_host = 0; // host time of the optimizer step

  StepComposer(const StepInputs& in, StepEstimate& out)
      : StepInputs(in), est(out), pl(out.placement),
        per_param(state_bytes_per_param(in.setup.precision, in.setup.optimizer)) {}

  void slowest_stage() {
    // ---- one micro-batch through the slowest pipeline stage ----
    // A stage's time is its layers' plus the embedding (first) or the head and loss (last). With
    // an even split only the first or the last can be the slowest; with an uneven one also the
    // middle stage with the most layers (the first of them).
    const StageCosts costs = stage_costs(times, plan, options);
    auto make_stage = [&](std::int64_t num_layers, bool first, bool last) {
      const StageTime& f = costs.first_extra;
      const StageTime& h = costs.last_extra;
      StageTime s = costs.layers(num_layers, model::layers_recomputed(plan, setup, num_layers));
      s.fwd = s.fwd + (first ? f.fwd : 0) + (last ? h.fwd : 0);
      s.bwd = s.bwd + (first ? f.bwd : 0) + (last ? h.bwd : 0);
      s.tp = s.tp + (first ? f.tp : 0) + (last ? h.tp : 0);
      s.host_fwd = s.host_fwd + (first ? f.host_fwd : 0) + (last ? h.host_fwd : 0);
      s.host_bwd = s.host_bwd + (first ? f.host_bwd : 0) + (last ? h.host_bwd : 0);
      return s;
    };
    est.slowest_stage = 0;
    est.slowest_stage_layers = model::layers_on_stage(plan, model.num_layers, 0);
    stage = make_stage(est.slowest_stage_layers, true, plan.pp == 1);
    auto consider = [&](std::int64_t index, bool last) {
      const std::int64_t n = model::layers_on_stage(plan, model.num_layers, index);
      const StageTime s = make_stage(n, false, last);
      if (s.total() > stage.total()) {
        stage = s;
        est.slowest_stage = index;
        est.slowest_stage_layers = n;
      }
    };
    if (plan.pp > 2 && !plan.stage_layers.empty()) {
      const auto middle =
          std::max_element(plan.stage_layers.begin() + 1, plan.stage_layers.end() - 1);
      consider(middle - plan.stage_layers.begin(), false);
    }
    if (plan.pp > 1)
      consider(plan.pp - 1, true);
    est.micro_batch_stage_s = stage.total();
    // Layers per stage on average: what every GPU re-runs under recompute, summed over stages.
    layers = static_cast<double>(model.num_layers) / static_cast<double>(plan.pp);
  }

  void schedule() {
    // ---- schedule: 1F1B or interleaved 1F1B (Narayanan et al. 2021) ----
    // The pipeline advances at the pace of its slowest stage: step ~ (m + (p - 1) / v) x that
    // stage's micro-batch time. With uneven stages this is an upper bound: the fill and drain
    // also cross the faster stages (exact for equal stages).
    est.micro_batches = std::max<std::int64_t>(model::grad_accumulation_steps(plan, setup), 1);
    est.global_batch_size = est.micro_batches * setup.micro_batch_size * plan.dp;
    mb = static_cast<double>(est.micro_batches);
    StepBreakdown& b = est.breakdown_s;
    b = {};
    b.forward = mb * stage.fwd;
    b.backward = mb * stage.bwd;
    b.recompute = mb * stage.rc;
    b.tp_comm = mb * stage.tp;
    b.cp_comm = mb * stage.cp;
    b.ep_comm = mb * stage.ep;
    est.ep_overlap = options.ep_overlap && ep_overlap_rule(plan).empty();
    est.ep_merged_pairs = 0;
    est.ep_hidden_s = 0;
    if (est.ep_overlap) {
      // Each merged pair of chunk passes hides its share of the stage's all-to-alls; the warm-up
      // forwards and cool-down backwards run alone (the bubble below is of unmerged passes).
      est.ep_merged_pairs = ep_merged_chunk_pairs(plan, est.micro_batches);
      est.ep_hidden_s = static_cast<double>(est.ep_merged_pairs) /
                        static_cast<double>(plan.interleave) * stage.ep_hidden;
      b.ep_comm -= est.ep_hidden_s;
    }
    const double v = static_cast<double>(plan.interleave);
    b.bubble = static_cast<double>(plan.pp - 1) / v * stage.total();
    if (plan.pp > 1) {
      // Activations forward and their gradients backward cross each stage boundary once per
      // micro-batch per model chunk.
      const Group pair{2, pl.pp_inter_node ? 1 : 2};
      b.pp_comm =
          mb * 2 * v *
          collective_cost(Collective::send_recv, acc.pp_send_bytes, pair, cluster, profile).time_s;
      ++est.collective_evaluations;
    }
  }

  // The fullest stage's memory (what the step reads of it: its parameters, offloaded bytes).
  void fullest_memory() {
    MemoryOptions mo;
    mo.bucket_bytes = options.bucket_bytes;
    mo.framework = options.framework;
    mo.device_bytes = gpu.memory_bytes; // the caching allocator's cap (less the overhead)
    est.memory = memory ? *memory : compose_memory_fullest(acc, model, plan, setup, profile, mo);

    // ---- activation offload: copies to host memory beside the forward, back beside the backward
    // (Transformer Engine's offload handler runs them on their own streams); what the stage's
    // compute cannot cover is exposed ----
    // (pp = 1: one micro-batch in flight, so the memory's host bytes are one micro-batch's).
    est.offload_bytes_per_micro_batch =
        est.memory.host_activation_bytes / est.memory.in_flight_micro_batches;
    est.offload_transfer_s = 0;
    if (est.offload_bytes_per_micro_batch > 0) {
      est.offload_transfer_s =
          est.offload_bytes_per_micro_batch / hw::host_link_bytes_per_s(gpu, profile);
      est.breakdown_s.offload =
          mb * (std::max(0.0, est.offload_transfer_s - stage.fwd) +
                std::max(0.0, est.offload_transfer_s - (stage.bwd + stage.rc)));
    }
    stage_params = est.memory.params_on_gpu;
  }

  // The gradient reduction in buckets, priced and overlapped with the last micro-batch's
  // backward (`window`): equal buckets in closed form where they may be, else each bucket (the
  // run's own list, or equal buckets over the dense and the experts' groups).
  BucketOverlap gradient_buckets(Collective reduce, double grad_bytes, double dense_grad,
                                 double expert_grad, bool experts_apart, bool experts_reduced,
                                 double window) {
    if (options.dp_bucket_list_bytes.empty() && options.closed_form_buckets && !experts_apart) {
      // Equal buckets: one collective price, closed-form overlap.
      const double nb = std::max(
          options.bucket_bytes > 0 ? std::ceil(grad_bytes / options.bucket_bytes) : 1.0, 1.0);
      const double bucket_s =
          collective_cost(reduce, grad_bytes / nb, pl.dp, cluster, profile, options.dp_algorithm)
              .time_s;
      ++est.collective_evaluations;
      return overlap_equal_buckets(nb, bucket_s, window, options.dp_overlap,
                                   profile.overlap_compute_rate, profile.overlap_comm_rate);
    }
    auto equal = [&](double bytes) {
      const double nb = options.bucket_bytes > 0 ? std::ceil(bytes / options.bucket_bytes) : 1.0;
      return std::vector<double>(static_cast<std::size_t>(std::max(nb, 1.0)),
                                 bytes / std::max(nb, 1.0));
    };
    // Buckets of one size over one group cost the same: priced once.
    std::vector<double> bucket_bytes, bucket_s;
    const double expected = options.bucket_bytes > 0 ? grad_bytes / options.bucket_bytes + 2 : 2.0;
    bucket_bytes.reserve(options.dp_bucket_list_bytes.size() + static_cast<std::size_t>(expected));
    bucket_s.reserve(bucket_bytes.capacity());
    auto add = [&](const std::vector<double>& bytes, const Group& group) {
      double last_bytes = -1, last_s = 0;
      for (double b : bytes) {
        if (b != last_bytes) {
          last_s = collective_cost(reduce, b, group, cluster, profile, options.dp_algorithm).time_s;
          last_bytes = b;
          ++est.collective_evaluations;
        }
        bucket_bytes.push_back(b);
        bucket_s.push_back(last_s);
      }
    };
    add(options.dp_bucket_list_bytes.empty() ? equal(experts_apart ? dense_grad : grad_bytes)
                                             : options.dp_bucket_list_bytes,
        pl.dp);
    if (experts_reduced && options.dp_bucket_list_bytes.empty())
      add(equal(expert_grad), pl.edp);
    return overlap_buckets(bucket_s, bucket_bytes, window, options.dp_overlap,
                           profile.overlap_compute_rate, profile.overlap_comm_rate);
  }

  void data_parallel() {
    StepBreakdown& b = est.breakdown_s;
    // Gradients reduce in the dtype the run keeps them in where the framework lets it choose
    // (Megatron-Core's grad_reduce_in_fp32), else in the 16-bit compute dtype of mixed precision.
    const double grad_bytes =
        stage_params * chosen_grad_bytes(setup, options.fw(), per_param.gradients);
    const double weight_bytes = stage_params * per_param.weights;
    // MoE: the experts' gradients are summed over their own data-parallel group, dp x cp / ep
    // (Megatron-Core's expert data-parallel group), the rest over dp x cp.
    const double expert_share =
        stage_params > 0 ? est.memory.expert_params_on_gpu / stage_params : 0;
    const bool experts_apart =
        expert_share > 0 && (pl.edp.size != pl.dp.size || pl.edp.per_node != pl.dp.per_node);
    const bool experts_reduced = experts_apart && pl.edp.size > 1;
    const double dense_grad = grad_bytes * (1 - expert_share),
                 expert_grad = grad_bytes * expert_share;
    const double dense_weight = weight_bytes * (1 - expert_share),
                 expert_weight = weight_bytes * expert_share;
    est.dp_bytes = grad_bytes;
    est.dp_volume_bytes = 0;
    const std::int64_t replicas = plan.dp_cp(); // gradients are summed over dp x cp
    if (replicas > 1 || experts_reduced) { // folded experts may be replicated where dense is not
      auto volume = [&](std::int64_t n, double grads, double weights) {
        if (n <= 1)
          return 0.0;
        const double half = busbw_factor(Collective::all_gather, n);
        return plan.zero_stage == 0  ? busbw_factor(Collective::all_reduce, n) * grads
               : plan.zero_stage < 3 ? half * (grads + weights)
                                     : half * (grads + 2 * mb * weights);
      };
      est.dp_volume_bytes = experts_apart ? volume(replicas, dense_grad, dense_weight) +
                                                volume(pl.edp.size, expert_grad, expert_weight)
                                          : volume(replicas, grad_bytes, weight_bytes);
      const Collective reduce =
          plan.zero_stage == 0 ? Collective::all_reduce : Collective::reduce_scatter;
      const BucketOverlap ov =
          gradient_buckets(reduce, grad_bytes, dense_grad, expert_grad, experts_apart,
                           experts_reduced, stage.bwd + stage.rc);
      b.dp_comm = ov.exposed_s;
      // Overlapped buckets share SMs and HBM with the backward pass they hide behind.
      est.dp_overlap_slowdown_s = ov.slowdown_s;
      b.backward += ov.slowdown_s;
      auto gather = [&](double dense, double expert) {
        double t = collective_cost(Collective::all_gather, experts_apart ? dense : dense + expert,
                                   pl.dp, cluster, profile)
                       .time_s;
        ++est.collective_evaluations;
        if (experts_reduced) {
          t += collective_cost(Collective::all_gather, expert, pl.edp, cluster, profile).time_s;
          ++est.collective_evaluations;
        }
        return t;
      };
      if (plan.zero_stage >= 1 && plan.zero_stage < 3) {
        // All-gather the updated 16-bit weights after the optimizer step.
        est.zero_allgather_s = gather(dense_weight, expert_weight);
        b.dp_comm += est.zero_allgather_s;
      } else if (plan.zero_stage == 3) {
        // Gather the weights before each forward and each backward, prefetched under compute.
        const double ag = gather(dense_weight, expert_weight);
        b.dp_comm += mb * std::max(0.0, 2 * ag - (stage.fwd + stage.bwd));
      }
    }
  }

  void fsdp2_copies() {
    StepBreakdown& b = est.breakdown_s;
    if (options.fw().fsdp2_copies) {
      const bool mixed = setup.precision != model::Precision::fp32;
      const double w = mixed ? 2.0 : 4.0, r = 4.0; // unsharded parameter, reduce dtype bytes
      const double n = plan.zero_stage >= 3 ? est.memory.shard_ways : 1.0;
      const bool alone = plan.dp_cp() == 1; // the collectives are local copies at world size 1
      // Each all-gather (before forward and again before backward): the fp32 shard cast into
      // the gather buffer (4 + w per local parameter), and at world size 1 the gather itself.
      const double gather = stage_params * ((4 + w) / n + (alone ? 2 * w : 0.0));
      // After backward: the unsharded gradients copied into the fp32 reduce-scatter buffer
      // (w + r per parameter), and at world size 1 the reduce-scatter itself.
      const double reduce = stage_params * ((w + r) + (alone ? 2 * r : 0.0));
      const double bw = gpu.hbm_bandwidth_bytes_per_s * profile.elementwise_bw_fraction;
      b.forward += mb * gather / bw;
      b.backward += mb * (gather + reduce) / bw;
    }
  }

  // ---- optimizer: memory-bound update of this GPU's (ZeRO-sharded) parameters ----
  void optimizer() {
    StepBreakdown& b = est.breakdown_s;
    const double shard = plan.zero_stage >= 1 ? est.memory.shard_ways : 1.0;
    const bool mixed = setup.precision == model::Precision::bf16_mixed ||
                       setup.precision == model::Precision::fp16_mixed ||
                       model::is_fp8(setup.precision);
    // Read the gradient twice (norm for clipping, then update), read+write optimizer states
    // (and master weights), write the 16-bit copy (mixed) or read+write the weights.
    const double bytes_per_param = 2 * per_param.gradients + 2 * per_param.optimizer +
                                   (mixed ? per_param.weights : 2 * per_param.weights);
    const double body = stage_params / shard * bytes_per_param /
                        (gpu.hbm_bandwidth_bytes_per_s * profile.optimizer_bw_fraction);
    const FrameworkProfile& fw = options.fw();
    if (fw.is_identity()) {
      // A few launches (norm, update, casts): queued when the host side was measured.
      b.optimizer = profile.host_launch_s > 0 ? std::max(body, 4 * profile.host_launch_s)
                                              : body + 4 * profile.launch_overhead_s;
    } else {
      // The framework's implementation: more passes (foreach) and host time per tensor.
      const double tensors = layers * acc.layer_param_tensors +
                             (est.slowest_stage == 0 ? acc.emb_param_tensors : 0) +
                             (est.slowest_stage == plan.pp - 1 ? acc.head_param_tensors : 0);
      b.optimizer = body * fw.optimizer_bytes_factor + 4 * profile.gpu_launch_gap_s;
      optimizer_host = tensors * fw.optimizer_host_s_per_tensor;
    }
  }

  // Host-bound frameworks: the host issues each phase (forward, backward with its recompute,
  // optimizer step) ahead of the GPU; where a phase's issue time exceeds its GPU time the GPU
  // waits, and a phase cannot start on the GPU before the host has issued it, so the excess
  // of each phase is on the critical path (a host-bound forward is not hidden by a GPU-bound
  // backward that follows it).
  void host() {
    StepBreakdown& b = est.breakdown_s;
    const FrameworkProfile& fw = options.fw();
    if (fw.host_model == HostModel::queue) {
      const double hf = mb * stage.host_fwd, hb = mb * stage.host_bwd;
      est.host_forward_s = hf;
      est.host_backward_s = hb;
      est.host_optimizer_s = optimizer_host;
      b.host = std::max(0.0, hf - b.forward) + std::max(0.0, hb - b.backward - b.recompute) +
               std::max(0.0, optimizer_host - b.optimizer);
    }
  }

  void band() {
    est.step_time_s = est.breakdown_s.total();
    // The band from the residuals of runs of this kind (one GPU or several: FrameworkProfile).
    const bool moe = model.num_experts > 0;
    const FitResiduals& residuals = options.fw().time_residuals(plan.num_gpus(), moe);
    est.band_sigma_fraction = residuals.time_band_fraction(1);
    est.band_dof = residuals.time_dof();
    est.band_runs = residuals.time_runs;
    est.band_leave_one_out = residuals.time_sigma_leave_one_out;
    est.band_multi_gpu = &residuals == &options.fw().fit_multi_gpu;
    est.band_kind = &residuals == &options.fw().fit_moe     ? "MoE"
                    : &residuals == &options.fw().fit_dense ? "dense"
                                                            : "";
  }

  void rates() {
    const int rc = static_cast<int>(plan.recompute);
    // ---- rates ----
    const double n = static_cast<double>(plan.num_gpus());
    est.tokens_per_step = static_cast<double>(est.global_batch_size * setup.seq_len);
    est.tokens_per_s = est.tokens_per_step / est.step_time_s;
    est.model_flops_per_step = model_flops_per_token * est.tokens_per_step;
    // Re-run FLOPs: per GPU per micro-batch per layer, over every layer that re-runs (the
    // stages' average), micro-batch and GPU.
    const double rerun_layers =
        plan.recompute == Recompute::full && setup.recompute_layers > 0
            ? std::min(layers,
                       static_cast<double>(model::layers_recomputed(plan, setup, model.num_layers)))
            : layers;
    est.hardware_flops_per_step =
        est.model_flops_per_step + acc.layer_recompute_flops[rc] * rerun_layers * mb * n;
    est.peak_flops_per_s = mfu_peak_flops_per_s(gpu, setup.precision);
    est.achieved_flops_per_s_per_gpu = est.model_flops_per_step / (est.step_time_s * n);
    est.mfu = est.achieved_flops_per_s_per_gpu / est.peak_flops_per_s;
    est.hfu = est.hardware_flops_per_step / (est.step_time_s * n * est.peak_flops_per_s);
  }
};
} // namespace

StepEstimate compose_step(const StepInputs& in) {
  StepEstimate est;
  est.placement = place_groups(in.plan, in.cluster);
  StepComposer c(in, est);
  c.slowest_stage();
  c.schedule();
  c.fullest_memory();
  c.data_parallel();
  c.fsdp2_copies();
  c.optimizer();
  c.host();
  c.band();
  c.rates();
  return est;
}

double days_to_train(double tokens, double tokens_per_step, double step_time_s) {
  return tokens / (tokens_per_step / step_time_s) / kSecondsPerDay;
}

TrainingTime training_time(const StepEstimate& e, double active_params, double tokens,
                           std::int64_t num_gpus) {
  TrainingTime t;
  if (tokens <= 0 || e.tokens_per_s <= 0)
    return t;
  t.seconds = tokens / e.tokens_per_s;
  t.days = t.seconds / kSecondsPerDay;
  t.gpu_hours = t.seconds * static_cast<double>(num_gpus) / 3600.0;
  t.days_top_down_6nd =
      estimate_time_top_down(active_params, tokens, 0, e.peak_flops_per_s, num_gpus, e.mfu, 0).days;
  return t;
}

StepEstimate estimate_step(const model::ModelSpec& m, const hw::ClusterSpec& cluster,
                           const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                           const model::ParallelPlan& plan, const model::TrainingSetup& setup,
                           const StepOptions& options) {
  check_precision_supported(gpu, setup.precision);
  StepEstimate est;
  const model::OpList ops = model::build_ops(m, model::make_op_context(plan, setup));
  const MicroBatchAccounting a = account_micro_batch(m, ops, plan, setup, options.fw());
  const MicroBatchTimes t =
      time_micro_batch(m, ops, plan, setup, gpu, profile, cluster, options.fw());
  est = compose_step({a, t, m, cluster, gpu, profile, plan, setup, options,
                      model::flops_per_token(m, setup.seq_len).total});
  est.framework = options.fw().name;
  est.torch_compile = options.fw().torch_compile;
  est.caveats = applicable_caveats(options.fw(), m.is_moe(), plan.cp > 1);
  for (const auto& kind : ops.layers) // one layer of each kind
    for (const auto& op : kind.ops) {
      if (model::is_communication(op.kind))
        continue;
      OpCost f = op_cost(op, Pass::forward, gpu, profile);
      OpCost b = op_cost(op, Pass::backward, gpu, profile);
      f.queued_s = framework_op_time(op, Pass::forward, gpu, profile, options.fw()).gpu_s;
      b.queued_s = framework_op_time(op, Pass::backward, gpu, profile, options.fw()).gpu_s;
      est.layer_forward.push_back(f);
      est.layer_backward.push_back(b);
    }
  return est;
}

} // namespace trainsim::sim
