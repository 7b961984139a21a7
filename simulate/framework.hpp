// Framework profiles: how a training framework (Megatron-Core with Transformer Engine, PyTorch
// FSDP, DeepSpeed, eager PyTorch, torch.compile, our own trainer) turns the op list's work into
// kernels, host time, memory and communication. The op list (model/ops.hpp) is the work of a
// perfectly fused implementation; a profile says, per op role (never per op name), how many
// kernels the framework launches for it, how many HBM passes that costs relative to the fused
// op, and how much it saves for backward; plus its host cost per launch, optimizer
// implementation, caching-allocator behaviour and the residuals of the runs it was fitted on.
// Profiles are data (presets/frameworks/*.json, docs/frameworks.md); the `trainsim` profile is
// the identity (every factor 1, the per-op launch model of our own trainer).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/ops.hpp"

namespace trainsim::sim {

/// How one framework runs the ops of one role, relative to the op list's fused op.
struct RoleCost {
  double fwd_kernels = -1;       // kernel launches in forward (< 0: default_kernels())
  double bwd_kernels = -1;       // in backward (< 0: default_kernels(): a GEMM's dgrad + wgrad)
  double fwd_bytes_factor = 1;   // HBM bytes / the fused op's (unfused elementwise, fp32 casts)
  double bwd_bytes_factor = 1;   // likewise in backward
  double saved_bytes_factor = 1; // bytes saved for backward / the op list's saved tensors
  // The same in fp32 training (< 0: saved_bytes_factor). Autocast saves fp32 copies beside
  // 16-bit ones where fp32 training saves one tensor (e.g. softmax(dtype=float32).to(bf16)).
  double saved_bytes_factor_fp32 = -1;
  // The bytes factors in fp32 training (< 0: as above): autocast's casts between 16-bit and
  // fp32 (e.g. around an fp32 softmax) are passes fp32 training does not make.
  double fwd_bytes_factor_fp32 = -1, bwd_bytes_factor_fp32 = -1;
  // Compute time / the op cost model's (a framework's own kernel for the role, e.g. PyTorch's
  // fp32 SDPA is the memory-efficient kernel, not FlashAttention), and in fp32 training
  // (< 0: as the 16-bit one).
  double fwd_compute_factor = 1, bwd_compute_factor = 1;
  double fwd_compute_factor_fp32 = -1, bwd_compute_factor_fp32 = -1;
  // Separate casts of a GEMM's fp32 input to 16-bit in forward under autocast (eager: one per
  // projection reading the same fp32 tensor, e.g. 3 for separate q/k/v projections), with
  // FrameworkProfile::autocast_cast_passes; 0: the input is already 16-bit.
  double autocast_input_casts = 0;
  [[nodiscard]] double saved_factor(bool fp32) const {
    return fp32 && saved_bytes_factor_fp32 >= 0 ? saved_bytes_factor_fp32 : saved_bytes_factor;
  }
  bool operator==(const RoleCost&) const = default;
  [[nodiscard]] double compute_factor(bool backward, bool fp32) const {
    const double f32 = backward ? bwd_compute_factor_fp32 : fwd_compute_factor_fp32;
    return fp32 && f32 >= 0 ? f32 : backward ? bwd_compute_factor : fwd_compute_factor;
  }
  [[nodiscard]] double bytes_factor(bool backward, bool fp32) const {
    const double f32 = backward ? bwd_bytes_factor_fp32 : fwd_bytes_factor_fp32;
    return fp32 && f32 >= 0 ? f32 : backward ? bwd_bytes_factor : fwd_bytes_factor;
  }
};

/// How host time and GPU time combine.
///  per_op: each op costs max(its GPU time + launch gap, its host issue time), the launch model
///          measured for our own C++ trainer (kernels/dev/launch_probe).
///  queue:  the host issues the whole step ahead of the GPU (CUDA's launch queue); a step costs
///          max(host issue time, GPU time): eager PyTorch on small models is host-bound.
enum class HostModel { per_op, queue };

/// What the profile's fit left over: relative residuals of step time and peak memory on its
/// fit rows (1 sigma), so that estimates carry an error band.
struct FitResiduals {
  std::int64_t time_runs = 0;
  double time_sigma_fraction = 0; // RMS of (predicted - measured) / measured
  // How that RMS was taken: each fit row predicted by a fit on the other rows (leave-one-out,
  // what `trainsim calibrate` writes when it fits time parameters on 3 rows or more), or
  // in-sample residuals.
  bool time_sigma_leave_one_out = false;
  double time_bias_fraction = 0; // mean of the same (0 after a fit with a free scale)
  // Degrees of freedom of that sigma: time_runs less the time parameters fitted (0: unknown).
  // The band is the prediction interval a k-sigma band stands for, with Student-t quantiles
  // for these degrees of freedom (common/stats.hpp, t_band_sigmas): few residuals, wider band.
  // Set through set_time_dof, which also works out the band widths once (a t quantile costs
  // ~1e5 density evaluations; the plan search asks for the band millions of times).
  [[nodiscard]] std::int64_t time_dof() const { return time_dof_; }
  void set_time_dof(std::int64_t dof);
  /// Half-width of the k-sigma band (k = 1 or 2) as a fraction of the step time.
  [[nodiscard]] double time_band_fraction(int k) const;
  std::int64_t memory_runs = 0;
  double memory_sigma_fraction = 0; // on peak reserved bytes (peak allocated when not reserved)
  std::string fitted_on;            // files and rule (docs/frameworks.md)

 private:
  std::int64_t time_dof_ = 0;
  double band_sigmas_[2] = {1, 2}; // t_band_sigmas(1 and 2, time_dof_)
};

struct FrameworkProfile {
  std::string name;    // CLI handle: "megatron", "fsdp", "deepspeed", "pytorch", ...
  std::string source;  // what the profile describes and where its values come from
  std::string version; // framework version the values were derived or fitted for
  std::string notes;   // how the derived values were derived (documentation, kept by fits)
  // The ZeRO stage a run of this framework has when the user names none (the CLI's --zero
  // left unset): how the framework's own recipes shard by default, with where that is set.
  std::int64_t default_zero_stage = 0;
  std::string default_zero_stage_source;
  // The ZeRO stages the framework can run (ascending; the default among them), and how: FSDP2
  // has no optimizer-only sharding, eager PyTorch's DDP shards at most its optimizer states.
  // `estimate`, `memory` and `sweep` refuse another; `plan` searches only these.
  std::vector<std::int64_t> zero_stages{0, 1, 2, 3};
  std::string zero_stages_source;
  [[nodiscard]] bool runs_zero_stage(std::int64_t z) const {
    return std::find(zero_stages.begin(), zero_stages.end(), z) != zero_stages.end();
  }
  // The parallelisms beyond data parallelism the framework runs (tp, pp, cp, ep), each perhaps
  // only with some ZeRO stages (DeepSpeed's pipeline engine: ZeRO-0/1; its AutoTP training:
  // ZeRO-0/1/2): `estimate`, `memory` and `sweep` refuse a degree > 1 of one the framework does
  // not run, or with another stage, naming the rule's source; `plan` never searches it. A
  // profile without the key runs all four with any of zero_stages.
  enum class ParallelDim { tp, pp, cp, ep };
  static constexpr std::size_t kParallelDims = 4;
  struct ParallelismRule {
    bool runs = true;
    std::vector<std::int64_t> zero_stages; // with a degree > 1; empty: any of zero_stages
    std::string source;                    // where the framework runs it (and with which stages)
    bool interleave = true; // pp only: virtual pipeline chunks (Megatron's interleaved 1F1B)
    bool operator==(const ParallelismRule&) const = default;
  };
  std::array<ParallelismRule, kParallelDims> parallelisms{};
  std::string parallelisms_source; // why the ones left out are not run (required then)
  [[nodiscard]] const ParallelismRule& parallelism(ParallelDim d) const {
    return parallelisms[static_cast<std::size_t>(d)];
  }
  [[nodiscard]] bool runs(ParallelDim d) const { return parallelism(d).runs; }
  /// Whether any parallelism is left out or limited to some ZeRO stages.
  [[nodiscard]] bool parallelisms_limited() const;
  /// What the framework runs, in words: "data parallelism only", or e.g. "data, tensor,
  /// pipeline and expert parallelism (tensor with ZeRO 0, 1, 2; pipeline with ZeRO 0, 1)".
  [[nodiscard]] std::string parallelisms_text() const;
  /// Whether the framework runs `plan`'s layout at its ZeRO stage (layout_refusal() empty).
  [[nodiscard]] bool runs_layout(const model::ParallelPlan& plan) const;
  /// Empty when the framework runs `plan`'s layout at its ZeRO stage; else why not, naming the
  /// degree, the rule and its source.
  [[nodiscard]] std::string layout_refusal(const model::ParallelPlan& plan) const;

  // What the profile is known to predict badly, from its recorded comparisons, said beside
  // every estimate it applies to: `when` names the case ("context_parallel": cp > 1; "moe": a
  // model with routed experts; "full_recompute_memory": the memory of a step with full
  // recompute whose blocks the allocator model generates rather than plays from a recorded
  // program; "always": every step time, e.g. a profile no run of its framework has checked),
  // `text` what was measured and where it is written up.
  struct Caveat {
    enum class When { context_parallel, moe, full_recompute_memory, always };
    When when = When::context_parallel;
    std::string text;
  };
  std::vector<Caveat> caveats;

  std::array<RoleCost, static_cast<std::size_t>(model::OpRole::count_)> roles{};

  HostModel host_model = HostModel::per_op;
  double host_s_per_kernel = 0; // host time to issue one kernel (dispatcher, autograd), queue
  // Backward host time per modelled kernel relative to the forward's (the op list's kernel
  // counts and the launches they stand for differ by pass; measured by phase timings).
  double host_bwd_kernel_factor = 1;
  double host_s_per_checkpoint = 0; // per checkpointed layer and micro-batch under recompute
                                    // (torch.utils.checkpoint's saved-tensor hooks, re-dispatch)
  // Per kernel of a layer's forward, once in the forward and once in the re-run forward, under
  // torchtitan's per-op checkpointing (Recompute::selective_op): eager PyTorch runs that policy
  // through a Python TorchDispatchMode (torch.utils.checkpoint.
  // create_selective_checkpoint_contexts) that sees every op of both passes; torch.compile
  // traces it away (0 there).
  double host_s_per_sac_kernel = 0;
  double gemm_efficiency_scale = 1;        // achieved GEMM rate / the hardware profile's model
  double expert_gemm_efficiency_scale = 1; // routed experts' grouped GEMMs, on top of the above
                                           // (many small GEMMs, permutation, uneven loads)
  // A further GEMM scale per GPU preset (absent: 1), on top of gemm_efficiency_scale: the
  // hardware profiles of GPUs with no local measurement are datasheet defaults, and the
  // framework's achieved rate relative to them differs by GPU generation.
  std::map<std::string, double> gpu_gemm_efficiency_scale;
  [[nodiscard]] double gemm_scale_on(const std::string& gpu) const {
    const auto it = gpu_gemm_efficiency_scale.find(gpu);
    return gemm_efficiency_scale * (it == gpu_gemm_efficiency_scale.end() ? 1.0 : it->second);
  }
  // PyTorch's scaled_dot_product_attention per GPU preset (absent: 1): its kernel time over
  // the hardware profile's attention model (calibrated on our own FlashAttention-2), 16-bit,
  // forward and backward, at head dims 64 and 128 (linear between, held outside). PyTorch picks
  // its SDPA backend itself (cuDNN on the H200 with torch 2.11), which runs at a rate of its own.
  struct SdpaFactors {
    double fwd_64 = 1, bwd_64 = 1, fwd_128 = 1, bwd_128 = 1;
    [[nodiscard]] double at(std::int64_t head_dim, bool backward) const {
      const double lo = backward ? bwd_64 : fwd_64, hi = backward ? bwd_128 : fwd_128;
      const double t = std::clamp((static_cast<double>(head_dim) - 64.0) / 64.0, 0.0, 1.0);
      return lo + t * (hi - lo);
    }
    bool operator==(const SdpaFactors&) const = default;
  };
  std::map<std::string, SdpaFactors> gpu_sdpa_time_factors;
  [[nodiscard]] double sdpa_factor_on(const std::string& gpu, std::int64_t head_dim,
                                      bool backward) const {
    const auto it = gpu_sdpa_time_factors.find(gpu);
    return it == gpu_sdpa_time_factors.end() ? 1.0 : it->second.at(head_dim, backward);
  }
  // Fixed time per MoE layer and micro-batch (forward + backward), exposed: what does not
  // grow with the tokens. Without CUDA graphs the token dispatcher copies the per-expert token
  // counts to the host before its all-to-all (a device-to-host synchronisation in every MoE
  // layer, Megatron-Core's MoEAlltoAllTokenDispatcher) and its small kernels run at the host's
  // pace; published rows run under full-iteration CUDA graphs show the floor too, so most of it
  // is GPU-side, around the all-to-alls (docs/frameworks.md, "What a profile holds"). Fitted;
  // 0 = none.
  double moe_dispatch_s_per_layer = 0;
  // Share of a layer's tensor-parallel collectives hidden behind its GEMMs when the run
  // overlaps them (StepOptions::tp_overlap: Megatron's TP communication overlap, PyTorch's
  // async TP); the rest stays exposed. 1 = all hidden, up to the layer's compute time.
  double tp_overlap_hidden_fraction = 1;

  // Optimizer step (AdamW): bytes relative to one fused pass (PyTorch's foreach AdamW makes
  // several passes over each state), and host time per parameter tensor.
  double optimizer_bytes_factor = 1;
  double optimizer_host_s_per_tensor = 0;

  // Memory.
  double activation_bytes_factor = 1;      // on every saved tensor (after the per-role factors)
  double activation_bytes_factor_fp32 = 0; // the same for fp32 training (0: as above); eager
                                           // autocast saves 16-bit casts beside fp32 tensors,
                                           // which fp32 training does not
  // Peak over the step's phases instead of everything at once: gradients are allocated during
  // backward as activations are freed (zero_grad(set_to_none=True)), so the backward peak is
  // states + max(activations, gradients); the optimizer step adds its transient buffers to
  // states + gradients (PyTorch's foreach AdamW: one fp32 list, torch._foreach_sqrt of
  // exp_avg_sq, 4 B/param; torch/optim/adamw.py, _multi_tensor_adamw).
  bool memory_timeline = false;
  double optimizer_transient_bytes_per_param = 0;
  // Bytes per parameter of weights, gradients and optimizer states under mixed precision
  // (0 = trainsim's 2 + 2 + 12). PyTorch autocast and FSDP2 keep fp32 parameters and
  // gradients (4 + 4 + 8); Megatron-Core keeps bf16 parameters, fp32 main gradients and fp32
  // master weights with the moments (2 + 4 + 12; its docs' "18 bytes per parameter").
  double mixed_weight_bytes = 0, mixed_grad_bytes = 0, mixed_optimizer_bytes = 0;
  // Keys and values saved at every query head's width (the reference code's repeat_kv before
  // attention), not at their grouped width (model::SavedTensor::kv_group).
  bool expand_kv_heads = false;
  // How context parallelism's ring runs (cp > 1). "p2p": each step's K/V send beside the
  // previous step's attention (Transformer Engine's ring; trainsim's own). "torch_allgather":
  // PyTorch's experimental ring attention (torch/distributed/tensor/experimental/_attention.py,
  // rotate_method ALL_GATHER, convert_to_f32): K/V all-gathered once per pass and waited for
  // after the first step, dK/dV passed in fp32 after every backward step, the last waited for
  // at once (docs/frameworks.md, "What a profile holds").
  enum class CpRing { p2p, torch_allgather };
  CpRing cp_ring = CpRing::p2p;
  double logits_peak_bytes_per_elem = 0; // transient bytes per logit element alive at the loss
  // The same in fp32 training (0 = as in mixed precision): torch.compile keeps one logits
  // tensor in the compute dtype and writes its gradient in place (2 B in bf16, 4 B in fp32).
  double logits_peak_bytes_per_elem_fp32 = 0;
  // The same with tensor parallelism (tp > 1, 16-bit training), where the framework runs a
  // vocabulary-parallel cross-entropy (torchtitan: PyTorch's loss_parallel whenever tp > 1,
  // its log-softmax and NLL decomposed into DTensor ops); 0 = as without.
  double logits_peak_bytes_per_elem_loss_parallel = 0;
  [[nodiscard]] double logits_peak_bytes(bool fp32, std::int64_t tp = 1) const {
    if (!fp32 && tp > 1 && logits_peak_bytes_per_elem_loss_parallel > 0)
      return logits_peak_bytes_per_elem_loss_parallel;
    return fp32 && logits_peak_bytes_per_elem_fp32 > 0 ? logits_peak_bytes_per_elem_fp32
                                                       : logits_peak_bytes_per_elem;
  }
  // Bytes per attention score alive only while one layer's backward runs through naive
  // attention's softmax (the probabilities' gradients; 16-bit and fp32 training), beside what
  // is saved: eager PyTorch holds the fp32 gradient from the cast's backward and the 16-bit
  // one the softmax's backward makes (4 + 2), in fp32 training the two fp32 ones (4 + 4).
  double score_bwd_transient_bytes = 0, score_bwd_transient_bytes_fp32 = 0;
  // Activation gradients of [tokens, ffn] shape alive beside the saved tensors while one
  // layer's feed-forward backward runs (eager autograd: the gated product's backward holds the
  // gradients of both of its inputs while the down projection's input gradient is alive too;
  // the saved tensors they replace are freed only after each node has run). In the activation
  // dtype (16-bit under mixed precision, 4 B in fp32 training). 0: none counted.
  double ffn_bwd_transient_tensors = 0;
  // Autocast over fp32 weights (torch.autocast with fp32 parameters): every linear layer's
  // 16-bit copy of its weight is saved for its backward (2 B/param, alive from the layer's
  // forward to its backward, re-made with the layer under full recompute), and the residual
  // stream stays fp32 (the fp32 embedding output plus 16-bit branch outputs promotes to
  // fp32), so a checkpointed layer keeps a 4-byte input.
  bool autocast_fp32_weights = false;
  // Autocast's casts around GEMMs run as passes of their own, in series with the GEMM (eager):
  // forward, each 16-bit GEMM's weight cast from fp32 (6 B/param: read 4, write 2) and its
  // input cast RoleCost::autocast_input_casts times (6 B/element); backward, the weight's
  // gradient cast back to fp32 (6 B/param), each input gradient cast back (6 B/element) and
  // the fp32 input gradients of the separate projections summed (12 B/element per sum).
  bool autocast_cast_passes = false;
  // FSDP2's own GPU copies per micro-batch (torch.distributed.fsdp.fully_shard): before each
  // forward and each backward the fp32 shards are cast into the all-gather buffer, after
  // backward the gradients are copied into the fp32 reduce-scatter buffer (chunk_cat); at world
  // size 1 the all-gather and reduce-scatter are local copies too.
  bool fsdp2_copies = false;
  // Pipeline parallelism over FSDP (ZeRO-3) keeps each stage's parameters unsharded from the
  // first micro-batch's forward to the last one's backward (torchtitan: reshard_after_forward
  // = False when pp is enabled, "to avoid per-microbatch all-gathers"), in the parameter
  // dtype, and accumulates the unsharded gradients in the reduce dtype, fp32, until the last
  // micro-batch reduce-scatters them (torch.distributed.pipelining runs the other micro-batches'
  // backward without gradient sync; FSDP2 upcasts the accumulated unsharded gradient to its
  // reduce dtype).
  bool pp_unsharded_stage = false;
  // Megatron-Core's DDP: gradients live in main_grad buffers whose dtype
  // TrainingSetup::grad_reduce_bytes may pick (grad_reduce_in_fp32: fp32 by default, bf16 in
  // NVIDIA's Megatron-Bridge performance configurations); --grad-reduce-dtype needs it.
  bool megatron_main_grads = false;
  // FP8 primary weights (Megatron-Bridge's FP8 recipes set fp8_param_gather = True: Transformer
  // Engine keeps the FP8 linears' parameters as FP8 tensors, with no 16-bit copy; the fp32
  // master copy stays with the optimizer): under FP8 those weights are their FP8 copies alone.
  bool fp8_param_gather = false;
  // (fp32 copy, log-probs, their gradients); 0: the op
  // list's own (fp32 softmax + 16-bit logits)
  // Reserved bytes from a model of PyTorch's caching allocator run over the step's tensors
  // (simulate/allocator.hpp) instead of a fitted fraction: allocator_overhead_fraction stays 0.
  bool caching_allocator = false;
  // torch.compile over the whole model and its loss already (pytorch-compile): --torch-compile
  // does not apply on top.
  bool compiled = false;
  // The compiled profile whose loss chain --torch-compile blocks+loss takes over (a preset's
  // name; empty: that option is refused for this profile).
  std::string compiled_loss_profile;
  double allocator_overhead_fraction = 0; // peak reserved / peak allocated - 1 (fragmentation)
  double context_bytes = 0; // CUDA context + library workspaces outside the allocator; 0: the
                            // hardware profile's context_overhead_bytes

  FitResiduals fit;
  // Time residuals of the profile on fit-half runs on more than one GPU, where they differ in
  // kind from `fit`'s (the fsdp profile: `fit` over one lent GPU, these over the published
  // multi-node rows; `trainsim calibrate --fit-only tp-overlap` writes them). A prediction on
  // more than one GPU takes its band from these when there are any (time_residuals).
  FitResiduals fit_multi_gpu;
  // The fit rows' leave-one-out residuals by kind of model, where both kinds have at least
  // kMinRowsPerKind fit rows (the megatron profile: its MoE rows miss several times more than
  // its dense ones): a prediction for a model with routed experts takes its band from fit_moe,
  // one without from fit_dense, ahead of the rules above.
  FitResiduals fit_dense, fit_moe;
  static constexpr std::int64_t kMinRowsPerKind = 5;
  [[nodiscard]] const FitResiduals& time_residuals(std::int64_t num_gpus, bool moe = false) const {
    const FitResiduals& kind = moe ? fit_moe : fit_dense;
    if (kind.time_runs >= kMinRowsPerKind)
      return kind;
    return num_gpus > 1 && fit_multi_gpu.time_runs > 0 ? fit_multi_gpu : fit;
  }
  /// The same for the memory band: the multi-GPU rows' when they measured memory.
  [[nodiscard]] const FitResiduals& memory_residuals(std::int64_t num_gpus) const {
    return num_gpus > 1 && fit_multi_gpu.memory_runs > 0 ? fit_multi_gpu : fit;
  }
  // What with_torch_compile applied ("none", "blocks", "blocks+loss"): printed beside the
  // name; not a profile field (a profile file cannot set it).
  std::string torch_compile = "none";

  [[nodiscard]] const RoleCost& role(model::OpRole r) const {
    return roles[static_cast<std::size_t>(r)];
  }
  /// True for a profile that changes nothing (the op list and hardware profile as they are).
  [[nodiscard]] bool is_identity() const;
};

/// The identity profile (our own trainer): what trainsim computed before framework profiles.
[[nodiscard]] const FrameworkProfile& trainsim_framework();

/// Loads presets/frameworks/<name>.json (or a path); strict keys, every problem reported.
[[nodiscard]] FrameworkProfile load_framework(const std::string& name_or_path);

/// The texts of `fw`'s time caveats that apply to a run of a model with routed experts (`moe`)
/// or with context parallelism (`context_parallel`), and those said always, in the profile's
/// order.
[[nodiscard]] std::vector<std::string> applicable_caveats(const FrameworkProfile& fw, bool moe,
                                                          bool context_parallel);
/// The texts of `fw`'s caveats of one case alone (e.g. the context-parallel ones that apply only
/// to some of the plans a search lists), in the profile's order.
[[nodiscard]] std::vector<std::string> caveats_of(const FrameworkProfile& fw,
                                                  FrameworkProfile::Caveat::When when);
/// The texts of `fw`'s memory caveats that apply to a step (`full_recompute`: with full
/// recompute, whose blocks the caching-allocator model generates).
[[nodiscard]] std::vector<std::string> memory_caveats(const FrameworkProfile& fw,
                                                      bool full_recompute);

/// torch.compile over an eager PyTorch profile the way torchtitan applies it: `blocks`
/// compiles each transformer block (the per-op checkpointing policy is traced into the graph:
/// no dispatch cost per kernel; the kernels keep the eager profile's costs, as the published
/// rows measured them, docs/frameworks.md), `blocks_and_loss` compiles the loss too (torchtitan
/// since April 2025): the loss chain of the pytorch-compile profile (one 16-bit logits tensor,
/// its gradient in place) replaces the eager one.
enum class TorchCompile { none, blocks, blocks_and_loss };
/// "none", "blocks" or "blocks+loss"; ConfigError naming `field` otherwise.
[[nodiscard]] TorchCompile parse_torch_compile(const std::string& text, const std::string& field);
/// Whether torch.compile is modelled over this profile: eager PyTorch (a caching allocator),
/// not compiled already (FrameworkProfile::compiled).
[[nodiscard]] bool torch_compile_applies(const FrameworkProfile& fw);
/// The profile under that compilation; ConfigError for a profile that is not eager PyTorch
/// (no caching allocator: megatron, deepspeed, trainsim) or is compiled already
/// (FrameworkProfile::compiled), and for blocks+loss one without compiled_loss_profile.
[[nodiscard]] FrameworkProfile with_torch_compile(const FrameworkProfile& fw, TorchCompile c);
[[nodiscard]] FrameworkProfile framework_from_json(const nlohmann::json& j,
                                                   const std::string& source);
[[nodiscard]] nlohmann::json framework_to_json(const FrameworkProfile& f);
void validate(const FrameworkProfile& f, const std::string& source);

/// The role's kernel count in a pass (GEMM backward: dgrad + wgrad) when the profile does not
/// set it: what the op list's fused op launches.
[[nodiscard]] double default_kernels(model::OpKind kind, bool backward);

} // namespace trainsim::sim
