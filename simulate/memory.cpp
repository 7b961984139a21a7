// Per-GPU memory accounting (memory.hpp).
#include "simulate/memory.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "model/count.hpp"
#include "simulate/allocator.hpp"

namespace trainsim::sim {

using model::Optimizer;
using model::Precision;
using model::Recompute;

double chosen_grad_bytes(const model::TrainingSetup& setup, const FrameworkProfile& fw,
                         double fallback) {
  const bool mixed = setup.precision != Precision::fp32 && setup.precision != Precision::bf16;
  return fw.megatron_main_grads && mixed && setup.grad_reduce_bytes > 0 ? setup.grad_reduce_bytes
                                                                        : fallback;
}

StateBytesPerParam state_bytes_per_param(Precision p, Optimizer o) {
  const double moments = o == Optimizer::adamw ? 8.0 : 4.0; // fp32 m, v (or momentum)
  switch (p) {
  case Precision::fp32: return {4, 4, moments};
  case Precision::bf16_mixed:
  case Precision::fp16_mixed:
  case Precision::fp8_delayed: // FP8 copies of the linear weights are counted apart
  case Precision::fp8_current:
  case Precision::mxfp8: return {2, 2, 4 + moments}; // + fp32 master weights
  case Precision::bf16: return {2, 2, moments};
  }
  return {4, 4, moments};
}

MemoryBreakdown model_state_bytes(double params, Precision precision, Optimizer optimizer,
                                  double dp, std::int64_t zero_stage) {
  const auto per = state_bytes_per_param(precision, optimizer);
  const double n = std::max(dp, 1.0);
  MemoryBreakdown m;
  m.params_on_gpu = params;
  m.shard_ways = n;
  m.optimizer = per.optimizer * params / (zero_stage >= 1 ? n : 1.0);
  m.gradients = per.gradients * params / (zero_stage >= 2 ? n : 1.0);
  m.weights = per.weights * params / (zero_stage >= 3 ? n : 1.0);
  m.total = m.weights + m.gradients + m.optimizer;
  return m;
}

namespace {
// compose_memory's stages, in order, over one breakdown: each reads the inputs and what the
// stages before it set.
struct MemoryComposer : MemoryInputs {
  const FrameworkProfile& fw;
  const bool first, last;
  const std::int64_t num_layers; // on this stage
  const double layers;
  MemoryBreakdown& m; // the breakdown composed
  double layer_params = 0, params = 0, shard = 1, fp8_state = 0;
  std::int64_t micro_batches = 1, recomputed = 0;
  double in_flight = 1, end_of_backward_act = 0;

  MemoryComposer(const MemoryInputs& in, MemoryBreakdown& out)
      : MemoryInputs(in), fw(in.options.framework ? *in.options.framework : trainsim_framework()),
        first(in.stage == 0), last(in.stage == in.plan.pp - 1),
        num_layers(model::layers_on_stage(in.plan, in.model.num_layers, in.stage)),
        layers(static_cast<double>(num_layers)), m(out) {}

  // Weights, gradients and optimizer states of this stage's parameters.
  void model_states() {
    // Parameters on this GPU: its layers (experts split over ep), the embedding on the first
    // stage, the head on the last (plus a copy of a tied table when it is not the first).
    layer_params = acc.layer_dense_params + acc.layer_expert_params / static_cast<double>(plan.ep);
    params = layers * layer_params;
    if (first)
      params += acc.emb_params;
    if (last)
      params += acc.head_params + (first ? 0.0 : acc.tied_copy_params);
    // ZeRO shards dense parameters over dp x cp and the experts over the expert-data-parallel
    // group, dp x cp / ep (each expert lives on one ep rank of it): one mean divisor for both.
    const double expert_params = layers * acc.layer_expert_params / static_cast<double>(plan.ep);
    const auto n_dense = static_cast<double>(plan.dp_cp());
    const auto n_expert = static_cast<double>(plan.expert_dp_cp());
    const double sharded = (params - expert_params) / n_dense + expert_params / n_expert;
    shard = sharded > 0 ? params / sharded : n_dense;
    m = model_state_bytes(params, setup.precision, setup.optimizer, shard, plan.zero_stage);
    m.expert_params_on_gpu = expert_params;
    m.stage = stage;
    if (fw.mixed_weight_bytes > 0 && setup.precision != model::Precision::fp32 &&
        setup.precision != model::Precision::bf16) {
      // The framework's own mixed-precision policy (framework.hpp), sharded as ZeRO shards.
      const double n = shard;
      m.weights = fw.mixed_weight_bytes * params / (plan.zero_stage >= 3 ? n : 1.0);
      // Megatron-Core's main_grad buffers in the dtype the run reduces in (grad_reduce_in_fp32).
      m.gradients = chosen_grad_bytes(setup, fw, fw.mixed_grad_bytes) * params /
                    (plan.zero_stage >= 2 ? n : 1.0);
      m.optimizer = fw.mixed_optimizer_bytes * params / (plan.zero_stage >= 1 ? n : 1.0);
    }
    fp8_state = 0;
    if (model::is_fp8(setup.precision)) {
      // FP8 copies of the linear weights (Transformer Engine's Float8Tensor): the data and, on
      // Hopper, a transposed copy for the GEMMs that need the other layout (1 + 1 B/param);
      // MXFP8 keeps row- and column-wise copies, each with one E8M0 scale per 32 elements
      // (2 x (1 + 1/32) B/param). Delayed scaling adds its amax history: 1024 fp32 entries for
      // each of the 3 tensors of every FP8 GEMM (TE DelayedScaling, amax_history_len = 1024).
      const double fp8_params =
          layers *
          (acc.layer_fp8_dense_params + acc.layer_fp8_expert_params / static_cast<double>(plan.ep));
      const double per_param = setup.precision == model::Precision::mxfp8 ? 2 * (1 + 1.0 / 32) : 2;
      // FP8 primary weights (FrameworkProfile::fp8_param_gather): the copies are the weights;
      // those linears keep no 16-bit parameter.
      const double sixteen_bit =
          fw.fp8_param_gather ? (fw.mixed_weight_bytes > 0 ? fw.mixed_weight_bytes : 2.0) : 0.0;
      m.weights += fp8_params * (per_param - sixteen_bit) / (plan.zero_stage >= 3 ? shard : 1);
      if (setup.precision == model::Precision::fp8_delayed)
        fp8_state = layers * 4 * 3 * 1024 * 4.0 * 3; // 4 linear modules x 3 GEMMs x 3 tensors
    }
    m.stage_num_layers = num_layers;
    if (options.offload_optimizer) {
      m.optimizer = 0;
      m.gradients = 0;
    }
    if (options.offload_params && plan.zero_stage == 3)
      m.weights = 0;
  }

  void activations() {
    // Activations: micro-batches in flight on this stage (1F1B: stage i holds pp - i of them,
    // so the first holds all layers' worth; Narayanan et al. 2021) times saved bytes per layer.
    micro_batches = std::max<std::int64_t>(model::grad_accumulation_steps(plan, setup), 1);
    in_flight =
        static_cast<double>(std::max<std::int64_t>(std::min(plan.pp - stage, micro_batches), 1));
    // Korthikanti et al. 2022 Sec. 4.2.3; never more than every micro-batch of the step (with
    // as many micro-batches as stages the interleaved schedule's first rank runs every forward
    // before its first backward and holds all of them, as 1F1B's does).
    if (plan.interleave > 1 && plan.pp > 1 && first)
      in_flight = std::min(in_flight * (1.0 + static_cast<double>(plan.pp - 1) /
                                                  static_cast<double>(plan.pp * plan.interleave)),
                           static_cast<double>(micro_batches));
    // Activation offload (Megatron-Core's cpu_offloading_num_layers, pp = 1): the first n
    // layers' saved tensors go to host memory as the forward leaves them and come back ahead of
    // their backward; Transformer Engine's offload handler double-buffers one layer's worth on
    // the GPU while it copies (transformer_engine/pytorch/cpu_offload.py), so n - 1 layers' worth
    // leave the GPU.
    const std::int64_t offloaded =
        std::min<std::int64_t>(setup.offload_activation_layers, num_layers);
    const double kept_layers =
        layers - static_cast<double>(std::max<std::int64_t>(offloaded - 1, 0));
    // Saved bytes of a layer, the stage's mean: under full recompute of some layers only, the
    // recomputed ones keep their input and the others what no recompute keeps.
    recomputed = model::layers_recomputed(plan, setup, num_layers);
    const double layer_act =
        recomputed >= num_layers
            ? acc.layer_act[static_cast<int>(plan.recompute)]
            : (static_cast<double>(recomputed) * acc.layer_act[static_cast<int>(plan.recompute)] +
               static_cast<double>(num_layers - recomputed) *
                   acc.layer_act[static_cast<int>(Recompute::none)]) /
                  layers;
    m.host_activation_bytes = in_flight * static_cast<double>(offloaded) * layer_act;
    double act = in_flight * kept_layers * layer_act;
    if (first)
      act += in_flight * acc.emb_act;
    // Full recompute re-materialises one layer at a time, during that layer's backward, where
    // the framework's backward transients of that layer appear too; the head's tensors (the
    // loss chain) are freed by then, having been used first: the two are never alive together.
    // Per-op checkpointing re-makes the rest of the layer's tensors beside the ones it kept.
    const double kept = acc.layer_act[static_cast<int>(Recompute::selective_op)] -
                        acc.layer_act[static_cast<int>(Recompute::full)];
    const double remade =
        (plan.recompute == Recompute::full           ? acc.layer_saved_all
         : plan.recompute == Recompute::selective_op ? std::max(0.0, acc.layer_saved_all - kept)
                                                     : 0.0) +
        acc.layer_bwd_transient;
    act += last ? std::max(remade, acc.head_act) : remade;
    m.activations = act;
    // The backward's last layer (the first in forward order): every gradient of the stage is
    // made, and that layer's own tensors (re-made under full recompute) and backward transients
    // are still alive (allocator traces of eager full recompute with naive attention: the peak
    // is in layer 0's backward, beside all the gradients).
    end_of_backward_act =
        acc.layer_act[static_cast<int>(plan.recompute)] + remade + (first ? acc.emb_act : 0.0);
    m.in_flight_micro_batches = in_flight;
  }

  void buffers() {
    // Buffers: gradient buckets (double-buffered) when gradients are communicated, ZeRO-3's
    // gathered 16-bit parameters of the current and the prefetched layer, and pipeline
    // send/receive buffers of one activation each way.
    double buffers = 0;
    if (plan.dp_cp() > 1)
      buffers += 2 * options.bucket_bytes;
    const double gathered_bytes_per_param =
        fw.fsdp2_copies && setup.precision != model::Precision::fp32
            ? 2.0 // FSDP2 gathers into the mixed-precision policy's 16-bit parameters
            : state_bytes_per_param(setup.precision, setup.optimizer).weights;
    if (fw.pp_unsharded_stage && plan.pp > 1 && plan.zero_stage == 3 && plan.dp_cp() > 1 &&
        micro_batches > 1) {
      // The stage's parameters stay gathered across its micro-batches, and their unsharded
      // gradients accumulate in fp32 until the last one (FrameworkProfile::pp_unsharded_stage).
      buffers += params * (gathered_bytes_per_param + 4.0);
    } else if (plan.zero_stage == 3 && plan.dp_cp() > 1) {
      buffers += 2 * layer_params * state_bytes_per_param(setup.precision, setup.optimizer).weights;
    }
    if (plan.pp > 1)
      buffers += 2 * acc.pp_send_bytes * static_cast<double>(plan.tp) /
                 (plan.sequence_parallel ? static_cast<double>(plan.tp) : 1.0);
    m.buffers = buffers + fp8_state;
    m.activations_saved = m.activations;
    m.overhead = fw.context_bytes > 0 ? fw.context_bytes : profile.context_overhead_bytes;
  }

  // The step's tensors through the caching-allocator model (allocator.hpp), before the
  // timeline below reduces the parts to those alive at the peak.
  [[nodiscard]] StepTensors step_tensors() const {
    const auto& t = acc.tensors;
    StepTensors st;
    if (first) {
      st.emb_params = t.emb_params;
      st.emb_saved = t.emb_saved;
    }
    if (last) {
      st.head_params = t.head_params;
      st.head_saved = t.head_saved;
    }
    st.layer_params = t.layer_params;
    st.num_layers = num_layers;
    st.weight_bytes_per_param = m.weights / params;
    st.grad_bytes_per_param = m.gradients / params;
    const double state = m.optimizer / params;
    st.num_states = std::max<std::int64_t>(static_cast<std::int64_t>(std::lround(state / 4)), 1);
    st.state_bytes_per_param = state / static_cast<double>(st.num_states);
    st.transient_bytes_per_param =
        fw.optimizer_transient_bytes_per_param / (plan.zero_stage >= 3 ? shard : 1.0);
    st.layer_saved = t.layer_saved[static_cast<int>(plan.recompute)];
    if (plan.recompute == Recompute::full || plan.recompute == Recompute::selective_op)
      st.layer_recomputed = t.layer_saved_all;
    if (recomputed < num_layers) { // full recompute of the first `recomputed` layers only
      st.recomputed_layers = recomputed;
      st.layer_saved_plain = t.layer_saved[static_cast<int>(Recompute::none)];
    }
    st.layer_bwd_transient = acc.layer_bwd_transient;
    st.layer_bwd_transient_block = acc.layer_bwd_transient_block;
    st.activation_grad_bytes = t.activation_grad_bytes;
    st.micro_batches_in_flight = static_cast<std::int64_t>(std::lround(in_flight));
    if (m.buffers > 0)
      st.persistent.push_back(m.buffers);
    if (fw.fsdp2_copies) {
      // FSDP2's gathers and reduce-scatters (allocator.hpp): unsharded in the policy's
      // parameter dtype (bf16 when mixed), reduced in fp32.
      const bool mixed = setup.precision != model::Precision::fp32;
      st.fsdp2 = true;
      st.unsharded_bytes_per_param = mixed ? 2.0 : 4.0;
      st.reduce_bytes_per_param = 4.0;
      st.cast_on_gather = mixed;
    }
    st.cap_bytes = options.allocator_cap_bytes > 0 ? options.allocator_cap_bytes
                   : options.device_bytes > 0 ? std::max(options.device_bytes - m.overhead, 1.0)
                                              : 0.0;
    st.empty_cache_before_steps = options.empty_cache_before_steps;
    st.steps = std::max<std::int64_t>(options.allocator_steps, 2); // the first makes the states
    st.stop_at_out_of_memory = options.verdict_only_above_bytes > 0 && st.cap_bytes > 0;
    return st;
  }

  // The parts alive at the peak (FrameworkProfile::memory_timeline).
  void timeline() {
    if (fw.memory_timeline) {
      // Backward: activations freed as gradients are made (state + max of the two); optimizer
      // step: gradients plus the optimizer's transient lists. The peak is the larger moment.
      const double local_params = params / (plan.zero_stage >= 3 ? shard : 1);
      const double transient = fw.optimizer_transient_bytes_per_param * local_params;
      const double end_of_backward = m.gradients + end_of_backward_act;
      const double backward_peak = std::max(m.activations, end_of_backward);
      const double optimizer_peak = m.gradients + transient;
      if (optimizer_peak > backward_peak) {
        m.activations = 0;
        m.transient = transient;
      } else if (end_of_backward > m.activations) {
        m.activations = end_of_backward_act; // end of backward: every gradient, one layer left
      } else {
        m.gradients = 0; // start of backward: every activation, no gradient yet
      }
    }
  }

  // The allocator's slack: the played step's (frameworks that simulate their allocator), else
  // the profile's fraction.
  void allocator(std::optional<StepTensors> played) {
    AllocatorPeaks simulated;
    if (played && !(options.verdict_only_above_bytes > 0 &&
                    m.peak_allocated() + m.overhead > options.verdict_only_above_bytes)) {
      simulated = simulate_step_allocator(*played);
      m.allocator_step = std::make_shared<const StepTensors>(std::move(*played));
    }
    // The caching allocator's slack at the peak (fitted per framework on measured reserved vs
    // allocated bytes): a fraction of what is allocated plus segment rounding.
    m.allocator = fw.allocator_overhead_fraction * m.peak_allocated();
    // Frameworks that simulate their allocator: the slack the model's allocator keeps beyond
    // its own peak of live blocks (docs/frameworks.md, "The caching allocator").
    // Out of memory under the cap: the step cannot run, and reserved is what it would have
    // needed (beyond the cap), however the timeline's allocated bytes compare.
    if (fw.caching_allocator && simulated.reserved_bytes > 0)
      m.allocator =
          std::max(simulated.reserved_bytes - simulated.allocated_bytes,
                   simulated.out_of_memory ? simulated.reserved_bytes - m.peak_allocated() : 0.0);
    m.total = m.peak_reserved() + m.overhead;
  }
};
} // namespace

MemoryBreakdown compose_memory(const MemoryInputs& in) {
  MemoryBreakdown m;
  MemoryComposer c(in, m);
  c.model_states();
  c.activations();
  c.buffers();
  std::optional<StepTensors> played; // simulated once the analytic peak is known
  if (c.fw.caching_allocator && c.params > 0 && in.options.simulate_allocator)
    played = c.step_tensors();
  c.timeline();
  c.allocator(std::move(played));
  return m;
}

MemoryBreakdown compose_memory_fullest(const MicroBatchAccounting& a, const model::ModelSpec& model,
                                       const model::ParallelPlan& plan,
                                       const model::TrainingSetup& setup,
                                       const hw::HardwareProfile& profile,
                                       const MemoryOptions& options, double stop_above_bytes) {
  auto at = [&](std::int64_t stage) {
    return compose_memory({a, model, plan, setup, profile, options, stage});
  };
  MemoryBreakdown fullest = at(0);
  if (plan.pp == 1 || fullest.total > stop_above_bytes)
    return fullest;
  // Middle stages differ only in layers and micro-batches in flight (pp - i, falling with i):
  // one with no more layers than an earlier middle stage cannot be fuller than it.
  std::int64_t most = 0;
  for (std::int64_t i = 1; i + 1 < plan.pp && !plan.stage_layers.empty(); ++i) {
    if (plan.stage_layers[static_cast<std::size_t>(i)] <= most)
      continue;
    most = plan.stage_layers[static_cast<std::size_t>(i)];
    const MemoryBreakdown mid = at(i);
    if (mid.total > fullest.total)
      fullest = mid;
    if (fullest.total > stop_above_bytes)
      return fullest;
  }
  const MemoryBreakdown last = at(plan.pp - 1);
  return fullest.total >= last.total ? fullest : last;
}

MemoryBreakdown estimate_memory(const model::ModelSpec& model, const model::ParallelPlan& plan,
                                const model::TrainingSetup& setup,
                                const hw::HardwareProfile& profile, const MemoryOptions& options) {
  const model::OpList ops = model::build_ops(model, model::make_op_context(plan, setup));
  const FrameworkProfile& fw = options.framework ? *options.framework : trainsim_framework();
  return compose_memory_fullest(account_micro_batch(model, ops, plan, setup, fw), model, plan,
                                setup, profile, options);
}

namespace {
// Whether a breakdown fits in memory_bytes and, under an explicit allocator cap, its reserved
// bytes under the cap (a request the cap cannot hold is PyTorch's out-of-memory error).
bool fits_in(const MemoryBreakdown& b, double memory_bytes, const MemoryOptions& o) {
  return b.total <= memory_bytes &&
         (o.allocator_cap_bytes <= 0 || b.peak_reserved() <= o.allocator_cap_bytes);
}

// Whether micro-batch b fits in memory_bytes (the allocator capped at it, less the overhead,
// unless the options cap it themselves).
bool micro_batch_fits(const model::ModelSpec& model, const model::ParallelPlan& plan,
                      model::TrainingSetup setup, const hw::HardwareProfile& profile,
                      double memory_bytes, const MemoryOptions& options, std::int64_t b) {
  MemoryOptions o = options;
  if (o.allocator_cap_bytes <= 0)
    o.device_bytes = memory_bytes;
  // As many micro-batches per step as the asked step has, so a pipeline stage holds as many
  // in flight (1F1B: min(pp - stage, micro-batches)); the global batch scales with b.
  const std::int64_t micro_batches =
      std::max<std::int64_t>(model::grad_accumulation_steps(plan, setup), 1);
  setup.micro_batch_size = b;
  setup.global_batch_size = b * std::max<std::int64_t>(plan.dp, 1) * micro_batches;
  return fits_in(estimate_memory(model, plan, setup, profile, o), memory_bytes, o);
}
} // namespace

std::int64_t fits_again_above(const model::ModelSpec& model, const model::ParallelPlan& plan,
                              const model::TrainingSetup& setup, const hw::HardwareProfile& profile,
                              double memory_bytes, const MemoryOptions& options,
                              std::int64_t max_micro_batch, std::int64_t window) {
  std::int64_t found = 0;
  if (!options.framework || !options.framework->caching_allocator || max_micro_batch <= 0)
    return 0;
  for (std::int64_t b = max_micro_batch + 2; b <= max_micro_batch + window; ++b)
    if (micro_batch_fits(model, plan, setup, profile, memory_bytes, options, b))
      found = b;
  return found;
}

std::int64_t max_micro_batch(const model::ModelSpec& model, const model::ParallelPlan& plan,
                             model::TrainingSetup setup, const hw::HardwareProfile& profile,
                             double memory_bytes, const MemoryOptions& options) {
  auto fits = [&](std::int64_t b) {
    return micro_batch_fits(model, plan, setup, profile, memory_bytes, options, b);
  };
  if (!fits(1))
    return 0;
  std::int64_t lo = 1, hi = 2;
  if (options.framework && options.framework->caching_allocator) {
    constexpr std::int64_t kScanUpTo = 1024; // memory.hpp: the recorded boundaries are below
    for (std::int64_t b = 2; b <= kScanUpTo; ++b)
      if (!fits(b))
        return b - 1;
    lo = kScanUpTo;
    hi = 2 * kScanUpTo;
  }
  while (hi <= (1 << 20) && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi > (1 << 20))
    return lo;
  while (hi - lo > 1) { // invariant: fits(lo), !fits(hi)
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::int64_t min_recompute_layers(const model::ModelSpec& model, model::ParallelPlan plan,
                                  model::TrainingSetup setup, const hw::HardwareProfile& profile,
                                  double memory_bytes, const MemoryOptions& options) {
  MemoryOptions o = options;
  if (o.allocator_cap_bytes <= 0)
    o.device_bytes = memory_bytes;
  auto fits = [&](Recompute rc, std::int64_t n) {
    plan.recompute = rc;
    setup.recompute_layers = n;
    return fits_in(estimate_memory(model, plan, setup, profile, o), memory_bytes, o);
  };
  if (fits(Recompute::none, 0))
    return 0;
  // Layers of the largest model chunk: past it every chunk re-runs all its layers.
  std::int64_t most = model.num_layers / plan.pp;
  for (std::int64_t n : plan.stage_layers)
    most = std::max(most, n);
  const std::int64_t chunk = (most + std::max<std::int64_t>(plan.interleave, 1) - 1) /
                             std::max<std::int64_t>(plan.interleave, 1);
  if (!fits(Recompute::full, 0))
    return -1;
  if (options.framework && options.framework->caching_allocator) {
    for (std::int64_t n = 1; n < chunk; ++n)
      if (fits(Recompute::full, n))
        return n;
    return chunk;
  }
  std::int64_t lo = 0, hi = chunk; // !fits(lo) (0 = none), fits(hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(Recompute::full, mid) ? hi : lo) = mid;
  }
  return hi;
}

std::string memory_verdict(double need, double capacity, double sigma) {
  if (need * (1 + sigma) <= capacity)
    return "fits";
  if (need * (1 - sigma) > capacity)
    return "does not fit";
  return "within the band: try it";
}

MemoryAnswer answer_memory(const model::ModelSpec& model, const model::ParallelPlan& plan,
                           const model::TrainingSetup& setup, const hw::HardwareProfile& profile,
                           double gpu_memory_bytes, MemoryOptions options) {
  MemoryAnswer ans;
  const FrameworkProfile& fw = *options.framework;
  ans.band = &fw.memory_residuals(plan.num_gpus());
  ans.band_multi_gpu = ans.band == &fw.fit_multi_gpu;
  const double sigma = ans.band->memory_sigma_fraction;
  // The allocator runs under this GPU's memory: at the cap it returns its cached segments and
  // retries (allocator.hpp), as max_micro_batch assumes; the verdict and the reserved bytes are
  // those of the step on this GPU, not of an unbounded one.
  options.device_bytes = gpu_memory_bytes;
  const double cap = options.allocator_cap_bytes;
  ans.breakdown = estimate_memory(model, plan, setup, profile, options);
  const MemoryBreakdown& b = ans.breakdown;
  ans.need_bytes = cap > 0 ? b.peak_reserved() : b.total;
  ans.capacity_bytes = cap > 0 ? cap : gpu_memory_bytes;
  ans.fits = b.total <= gpu_memory_bytes && ans.need_bytes <= ans.capacity_bytes;
  ans.verdict = memory_verdict(ans.need_bytes, ans.capacity_bytes, sigma);
  ans.max_micro_batch = max_micro_batch(model, plan, setup, profile, gpu_memory_bytes, options);
  if (ans.max_micro_batch > 0 && ans.max_micro_batch < 1024)
    ans.fits_again_up_to = fits_again_above(model, plan, setup, profile, gpu_memory_bytes, options,
                                            ans.max_micro_batch);
  // The least full recompute that makes this step fit (Megatron-Core's --recompute-num-layers),
  // and how far it moves within the memory band: the same search with the memory (and the cap)
  // scaled by 1 / (1 - sigma) (the step needs sigma less than predicted) and by
  // 1 / (1 + sigma) (sigma more). Measured boundaries move by whole layers for errors of a few
  // percent (docs/frameworks.md, "Under a cap: the OOM boundary").
  auto least = [&](double f) {
    MemoryOptions so = options;
    so.allocator_cap_bytes = cap * f;
    return min_recompute_layers(model, plan, setup, profile, gpu_memory_bytes * f, so);
  };
  ans.min_recompute_layers = least(1);
  ans.min_recompute_layers_low = ans.min_recompute_layers_high = ans.min_recompute_layers;
  if (ans.band->memory_runs > 0 && sigma > 0 && sigma < 1) {
    ans.min_recompute_layers_low = least(1 / (1 - sigma));
    ans.min_recompute_layers_high = least(1 / (1 + sigma));
  }
  // What the profile's recorded comparisons say this figure misses: the asked step's, and the
  // full-recompute steps behind the least recompute that fits.
  ans.caveats =
      memory_caveats(fw, plan.recompute == model::Recompute::full || ans.min_recompute_layers != 0);
  return ans;
}

double max_params(double memory_bytes, std::int64_t num_gpus, Precision precision,
                  Optimizer optimizer, std::int64_t zero_stage) {
  // States per GPU are linear in params: bytes = params * per_param_bytes_after_sharding.
  const MemoryBreakdown one = model_state_bytes(1.0, precision, optimizer, num_gpus, zero_stage);
  return memory_bytes / one.total;
}

} // namespace trainsim::sim
