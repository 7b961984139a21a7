// The inputs that describe a training job, one struct per concept:
// ModelSpec (decoder-only transformer, dense or MoE), ParallelPlan (how it is split over
// GPUs), TrainingSetup (batch, sequence, precision). They never embed each other.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace trainsim::model {

enum class FfnKind { gated, plain }; // gated: SwiGLU/GeGLU, 3 matrices; plain: GELU, 2
/// layernorm: weight + bias; rmsnorm and layernorm_no_bias (DBRX): weight only;
/// layernorm_no_affine (OLMo 1): no parameters.
enum class NormKind { layernorm, rmsnorm, layernorm_no_bias, layernorm_no_affine };
/// learned: a [max_seq_len, hidden] table; rotary: RoPE on (a fraction of) Q and K; none: no
/// position op (ALiBi's bias lives inside the attention kernel, NoPE has nothing).
enum class PositionKind { learned, rotary, none };
/// standard: multi-head attention with num_kv_heads K/V heads (MHA, GQA, MQA); mla: multi-head
/// latent attention (DeepSeek-V2/V3: low-rank Q and KV projections, decoupled RoPE dims).
enum class AttentionKind { standard, mla };
/// Where a layer's norms sit: pre (before each sublayer, Llama), post (on each sublayer's
/// output before the residual add, OLMo 2), sandwich (both, Gemma 2/3).
enum class NormPlacement { pre, post, sandwich };
/// RMSNorm on Q and K after their projection: per_head (one head_dim-wide weight shared by the
/// heads; Qwen3, Gemma 3) or full (over all heads' width; OLMo 2, OLMoE).
enum class QkNorm { none, per_head, full };

struct ModelSpec {
  std::string name;   // CLI handle or file it came from
  std::string source; // paper / model card / config file
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0; // == num_heads: MHA; 1: MQA; between: GQA
  std::int64_t head_dim = 0;     // usually hidden_size / num_heads
  std::int64_t ffn_hidden_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_seq_len = 0; // positions the model was built for (learned table size)
  FfnKind ffn = FfnKind::gated;
  NormKind norm = NormKind::rmsnorm;
  PositionKind position = PositionKind::rotary;
  bool tied_embeddings = false; // LM head shares the token embedding
  bool qkv_bias = false;        // bias on the Q, K, V projections
  bool out_bias = false;        // bias on the attention output projection
  bool mlp_bias = false;        // bias on the FFN matrices
  bool dropout = false;         // dropout layers present in training (GPT-2/3, Megatron)
  bool lm_head_bias = false;    // bias on the LM head (Phi-1/2)

  // ---- attention variants ----
  AttentionKind attention_kind = AttentionKind::standard;
  // MLA (DeepSeek-V2 Sec. 2.1): Q = W_uq norm(W_dq x) (or W_q x when q_lora_rank = 0),
  // [K_nope, V] = W_ukv norm(c_kv), c_kv = first kv_lora_rank of W_dkv x; the rest of W_dkv x
  // is one shared qk_rope_head_dim-wide RoPE key. Q and K heads are qk_nope + qk_rope wide.
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  QkNorm qk_norm = QkNorm::none;
  double rotary_fraction = 1.0; // share of each head's dims that RoPE rotates (Phi, NeoX)
  // Sliding-window attention: each query sees the last sliding_window keys. With
  // full_attention_interval = n, every n-th layer (1-based: layers n-1, 2n-1, ...) attends to
  // the whole sequence (Gemma 2, GPT-OSS: n = 2; Gemma 3: n = 6); 0 = all layers slide.
  std::int64_t sliding_window = 0;
  std::int64_t full_attention_interval = 0;
  bool attention_sinks = false;   // a learned logit per head in the softmax (GPT-OSS)
  bool attention_softcap = false; // tanh soft-capping of the scores (Gemma 2)
  bool logit_softcap = false;     // tanh soft-capping of the final logits (Gemma 2)
  NormPlacement norm_placement = NormPlacement::pre;
  // Parallel block (GPT-J, GPT-NeoX, Falcon, PaLM): attention and FFN both read the layer
  // input and their outputs are added to it together; shared_block_norm: one norm feeds both.
  bool parallel_block = false;
  bool shared_block_norm = false;

  // ---- mixture of experts (num_experts == 0: dense) ----
  // An MoE layer's FFN is a router plus num_experts experts of expert_ffn_hidden_size; each
  // token visits top_k of them and all num_shared_experts shared experts (each as wide as a
  // routed expert). The first first_dense_layers layers keep a dense FFN of ffn_hidden_size
  // (DeepSeek's first_k_dense_replace).
  std::int64_t num_experts = 0;
  std::int64_t top_k = 0;
  std::int64_t expert_ffn_hidden_size = 0;
  std::int64_t num_shared_experts = 0;
  std::int64_t first_dense_layers = 0;
  bool router_bias = false; // a bias per expert on the router (GPT-OSS; DeepSeek-V3's
                            // e_score_correction_bias)
  // Multi-token prediction (DeepSeek-V3 Sec. 2.2): num_mtp_modules sequential modules on the
  // last stage, each two norms, a [2h -> h] projection, one transformer layer (the kind of the
  // last layer), a final norm and the shared embedding and LM head.
  std::int64_t num_mtp_modules = 0;

  [[nodiscard]] bool is_moe() const { return num_experts > 0; }
  /// Whether layer i (0-based) has a routed-expert FFN.
  [[nodiscard]] bool is_moe_layer(std::int64_t i) const {
    return is_moe() && i >= first_dense_layers;
  }
  /// Whether layer i attends through a sliding window.
  [[nodiscard]] bool is_sliding_layer(std::int64_t i) const {
    return sliding_window > 0 &&
           !(full_attention_interval > 0 && (i + 1) % full_attention_interval == 0);
  }
};

/// Training precision policies. The FP8 ones are Transformer Engine's (NVIDIA TE docs, "Using
/// FP8 with Transformer Engine"): the linear layers' GEMMs in FP8 (E4M3 forward, E5M2
/// gradients), everything else bf16, fp32 master weights; fp8-delayed scales from an amax
/// history (DelayedScaling), fp8-current from the tensor itself (Float8CurrentScaling); mxfp8 is
/// the OCP microscaling format (32-element blocks with E8M0 scales) of Blackwell GPUs.
enum class Precision { fp32, bf16_mixed, fp16_mixed, bf16, fp8_delayed, fp8_current, mxfp8 };
[[nodiscard]] inline bool is_fp8(Precision p) {
  return p == Precision::fp8_delayed || p == Precision::fp8_current || p == Precision::mxfp8;
}
/// none; selective: Megatron's, the attention core (Korthikanti et al. 2022, Sec. 4.2); full:
/// each layer from its input; selective_op: torchtitan's per-op policy (parallelize_llama.py,
/// `_apply_ac_to_transformer_block`, selective_ac_option = "op"): keeps the outputs of every
/// other aten.mm of a layer and of scaled-dot-product attention, recomputes everything else.
enum class Recompute { none, selective, full, selective_op };
inline constexpr int kRecomputePolicies = 4;
/// Megatron-Core's selective recompute modules (TransformerConfig.recompute_modules,
/// megatron/core/transformer/transformer_config.py, Megatron-Core 0.13+): core_attn, mlp, moe
/// and shared_experts are checkpointed (their inputs kept, everything inside re-made in
/// backward); layernorm and moe_act discard their outputs after the next op has used them and
/// re-make them before backward needs them ("output-discarding checkpointing").
enum RecomputeModule : std::uint32_t {
  kRecomputeCoreAttn = 1u << 0,      // the attention core
  kRecomputeLayernorm = 1u << 1,     // input_layernorm and pre_mlp_layernorm, where not fused
  kRecomputeMlp = 1u << 2,           // a dense layer's MLP
  kRecomputeMoeAct = 1u << 3,        // the routed experts' activation function
  kRecomputeMoe = 1u << 4,           // the whole MoE block (router, dispatch, experts, combine)
  kRecomputeSharedExperts = 1u << 5, // the shared experts of an MoE block
};
inline constexpr std::uint32_t kRecomputeModulesAll = (1u << 6) - 1;
/// "core_attn,moe_act" (Megatron-Core's names, in the order above).
[[nodiscard]] std::string recompute_modules_string(std::uint32_t modules);
/// Megatron-Core's names (core_attn, layernorm, mlp, moe_act, moe, shared_experts) as
/// RecomputeModule bits; empty: the attention core alone. An unknown or unmodelled name
/// (mla_up_proj) is a ConfigError naming `what` (the flag or the record field).
[[nodiscard]] std::uint32_t parse_recompute_modules(const std::vector<std::string>& names,
                                                    std::string_view what);
enum class AttentionImpl { flash, naive };
enum class Optimizer { adamw, sgd };

struct ParallelPlan {
  std::int64_t tp = 1; // tensor parallel
  std::int64_t pp = 1; // pipeline parallel
  std::int64_t dp = 1; // data parallel
  std::int64_t cp = 1; // context parallel
  std::int64_t ep = 1; // expert parallel (MoE: experts split over ep ranks of the dp group)
  // Expert tensor parallel (MoE; Megatron-Core's --expert-tensor-parallel-size). 0: tp, each
  // expert split over the tp ranks and the ep ranks taken from the dp group. 1 with tp > 1: MoE
  // parallel folding (Liu et al. 2025, "MoE Parallel Folding", Sec. 3): whole experts, the ep
  // group laid over tp x dp x cp, tokens dispatched straight from their sequence-parallel shard.
  std::int64_t etp = 0;
  std::int64_t zero_stage = 0;
  bool sequence_parallel = false;
  std::int64_t interleave = 1; // virtual pipeline chunks per stage (1 = plain 1F1B)
  Recompute recompute = Recompute::none;
  // Transformer layers on each pipeline stage, first to last; empty: num_layers / pp on every
  // stage. An uneven split lightens the stages that also hold the embedding (first) or the LM
  // head and loss (last): Llama 3 405B trains 126 layers on 16 stages as 7, 8 x 14, 7
  // (Dubey et al. 2024, Sec. 3.3.2). Every stage holds at least one layer.
  std::vector<std::int64_t> stage_layers;
  [[nodiscard]] std::int64_t num_gpus() const { return tp * pp * dp * cp; }
  /// Ranks that hold the same weights: dp x cp. Context-parallel ranks see different parts of
  /// the same sequences, so their gradients are summed and ZeRO/FSDP shards across them too
  /// (Megatron-Core reduces gradients and shards its distributed optimizer over the data-parallel
  /// group with context parallel; torchtitan applies FSDP2 on the flattened dp_shard x cp mesh).
  [[nodiscard]] std::int64_t dp_cp() const { return dp * cp; }
  /// The experts' tensor-parallel degree: etp, or tp when etp is 0.
  [[nodiscard]] std::int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  /// MoE parallel folding: the experts' grid (etp x ep x edp) differs from attention's.
  [[nodiscard]] bool experts_folded() const { return expert_tp() != tp; }
  /// Ranks that hold the same MoE experts: tp x dp x cp / (etp x ep) (Megatron-Core's expert
  /// data-parallel group; with etp = tp, dp x cp / ep: each expert lives on one ep rank of the
  /// dp x cp replicas), at least 1.
  [[nodiscard]] std::int64_t expert_dp_cp() const {
    return std::max<std::int64_t>(
        tp * dp_cp() / (std::max<std::int64_t>(expert_tp(), 1) * std::max<std::int64_t>(ep, 1)), 1);
  }
};

/// Transformer layers on pipeline stage `stage` (0-based) of a validated plan.
[[nodiscard]] inline std::int64_t layers_on_stage(const ParallelPlan& plan, std::int64_t num_layers,
                                                  std::int64_t stage) {
  return plan.stage_layers.empty() ? num_layers / plan.pp
                                   : plan.stage_layers[static_cast<std::size_t>(stage)];
}

/// Fewest layers stage `stage` may hold with `interleave` model chunks per stage: one per chunk,
/// except that the first chunk of the first stage may hold only the embedding and the last
/// chunk of the last stage only the head and loss (Llama 3's layout), and never fewer than 1.
[[nodiscard]] std::int64_t min_layers_on_stage(std::int64_t pp, std::int64_t interleave,
                                               std::int64_t stage);

/// Megatron-LM's uneven split (--decoder-first-pipeline-num-layers / --decoder-last-...):
/// the first and/or the last stage hold `first` / `last` layers (< 0: not given) and the other
/// stages divide the rest evenly. Writes pp counts into `out` (its capacity is reused); false
/// when the rest does not divide evenly or a count would be below 1 (nothing is validated
/// beyond that: validate() does).
[[nodiscard]] bool first_last_stage_layers(std::int64_t num_layers, std::int64_t pp,
                                           std::int64_t first, std::int64_t last,
                                           std::vector<std::int64_t>& out);

/// The balanced uneven split: the first stage holds `a`, the middle ones `b` each, the last `c`
/// layers (Megatron's pattern), chosen to minimise the slowest stage, where a stage of n layers
/// costs n x layer_cost, plus first_extra_cost on the first and last_extra_cost on the last
/// (embedding; LM head and loss). Ties go to more layers in the middle (lighter ends), then to
/// the better balanced ends, then to the lighter first stage (it holds the most micro-batches
/// in flight). Respects min_layers_on_stage(). Writes pp counts into `out` (capacity reused);
/// false when the layers are too few. Pure arithmetic: O(log num_layers) steps, no allocation
/// once `out` has grown.
[[nodiscard]] bool balanced_stage_layers(std::int64_t num_layers, std::int64_t pp,
                                         std::int64_t interleave, double layer_cost,
                                         double first_extra_cost, double last_extra_cost,
                                         std::vector<std::int64_t>& out);

/// "7,8x14,7": counts in stage order, a run of k equal counts n written nxk.
[[nodiscard]] std::string format_stage_layers(const std::vector<std::int64_t>& stage_layers);

struct TrainingSetup {
  std::int64_t micro_batch_size = 1;  // sequences per micro-batch per data-parallel rank
  std::int64_t global_batch_size = 0; // sequences per optimizer step (0 = micro x dp)
  std::int64_t seq_len = 2048;
  Precision precision = Precision::bf16_mixed;
  AttentionImpl attention = AttentionImpl::flash;
  Optimizer optimizer = Optimizer::adamw;
  // MoE routing as trained. moe_capacity_factor > 0: every expert processes a buffer of
  // capacity_factor x its balanced share of routed tokens (GShard/Switch: overflow is dropped,
  // short buffers are padded); 0: dropless (grouped GEMMs of exactly the routed tokens).
  // moe_imbalance_factor: routed tokens on the busiest expert-parallel rank / the mean (1 =
  // balanced); a dropless step waits for that rank. Neither changes model FLOPs.
  double moe_capacity_factor = 0;
  double moe_imbalance_factor = 1;
  // Bytes per parameter of the data-parallel gradients under mixed precision where the
  // framework lets a run choose them (Megatron-Core's grad_reduce_in_fp32: 4 fp32, 2 bf16):
  // the gradient buffers' memory and the bytes reduced. 0: the framework's own default.
  double grad_reduce_bytes = 0;
  // Activations of this many transformer layers offloaded to host memory in forward and
  // brought back in backward (Megatron-Core's cpu_offloading_num_layers, through Transformer
  // Engine's CPU offload: transformer_engine/pytorch/cpu_offload.py). 0: none.
  std::int64_t offload_activation_layers = 0;
  // Full recompute of only this many transformer layers per pipeline stage's model chunk, the
  // others keeping all their activations (Megatron-Core's --recompute-method block
  // --recompute-num-layers N; torchtitan's every-k-th-layer checkpointing is the same cost with
  // num_layers / k of them). Needs recompute = full. 0: every layer.
  std::int64_t recompute_layers = 0;
  // Under recompute = selective, which modules of a layer re-run their forward in backward: a
  // set of RecomputeModule bits (Megatron-Core's TransformerConfig.recompute_modules). The
  // default, the attention core alone, is selective recompute as Korthikanti et al. 2022 (Sec.
  // 4.2) define it and as every other framework's selective policy runs.
  std::uint32_t recompute_modules = kRecomputeCoreAttn;
};

/// Transformer layers of a pipeline stage holding `stage_layers` of them that run the plan's
/// recompute policy: all of them, except under full recompute limited to
/// TrainingSetup::recompute_layers per model chunk (min(stage_layers, n x interleave)); the
/// rest run without recompute.
[[nodiscard]] inline std::int64_t
layers_recomputed(const ParallelPlan& plan, const TrainingSetup& setup, std::int64_t stage_layers) {
  if (plan.recompute != Recompute::full || setup.recompute_layers <= 0)
    return stage_layers;
  return std::min(stage_layers,
                  setup.recompute_layers * std::max<std::int64_t>(plan.interleave, 1));
}

/// The sequence length every command uses when none is given: 2048, or the model's
/// max_seq_len when that is smaller (GPT-2: 1024), so a default never exceeds what the model
/// was built for and never silently jumps to a long-context maximum (131072 for Llama 3.1).
inline constexpr std::int64_t kDefaultSeqLen = 2048;
[[nodiscard]] std::int64_t default_seq_len(const ModelSpec& model);

/// Gradient-accumulation steps: global = micro x accumulation x dp.
[[nodiscard]] std::int64_t grad_accumulation_steps(const ParallelPlan& plan,
                                                   const TrainingSetup& setup);

/// Activation/compute dtype of a precision policy (fp32 or the 16-bit type).
[[nodiscard]] Dtype compute_dtype(Precision p);

[[nodiscard]] std::string_view to_string(Precision p);
[[nodiscard]] std::string_view to_string(Recompute r);
[[nodiscard]] std::string_view to_string(AttentionImpl a);
[[nodiscard]] std::string_view to_string(Optimizer o);
[[nodiscard]] std::string_view to_string(FfnKind f);
[[nodiscard]] std::string_view to_string(NormKind n);
[[nodiscard]] std::string_view to_string(PositionKind p);
[[nodiscard]] std::string_view to_string(AttentionKind a);
[[nodiscard]] std::string_view to_string(NormPlacement n);
[[nodiscard]] std::string_view to_string(QkNorm q);
/// Parameters of one norm over `width` values (2 width, width or 0 by kind).
[[nodiscard]] double norm_params(NormKind n, double width);

/// Throw ConfigError listing every invalid field, e.g.
/// "presets/models/x.json: num_kv_heads = 5: must divide num_heads = 32".
void validate(const ModelSpec& model, const std::string& source);
void validate(const TrainingSetup& setup, const std::string& source);
/// The rules a parallel layout must satisfy for a model and setup, one bit each. check_plan()
/// is their only definition: validate(plan, ...) turns the failed ones into messages (what
/// `estimate` and every other command refuse) and the plan search calls it per candidate, so
/// both accept exactly the same layouts.
enum class PlanRule : std::uint8_t {
  degree_range,         // tp, pp, dp, cp, ep, interleave in 1..limit; ZeRO stage 0..3
  tp_heads,             // tp divides num_heads
  tp_kv_heads,          // tp divides num_kv_heads
  tp_ffn,               // tp divides ffn_hidden_size (when present)
  tp_expert_ffn,        // MoE: the experts' tp (etp, else tp) divides expert_ffn_hidden_size
  etp_value,            // etp is 0 (= tp), tp, or 1 (folding)
  etp_fold_sp,          // folding (etp = 1 < tp): sequence parallel (the dispatch's tokens)
  cp_seq,               // cp divides seq_len
  sp_seq,               // sequence parallel: tp divides seq_len / cp
  ep_experts,           // MoE: ep divides num_experts
  ep_dp,                // MoE: ep divides dp (etp = tp), or tp x dp x cp (folding)
  ep_dense,             // dense model: ep == 1
  seq_positions,        // learned positions: seq_len <= max_seq_len
  pp_layers,            // pp <= num_layers
  pp_interleave_layers, // no stage_layers given: pp x interleave divides num_layers
  stage_layers,         // stage_layers given: one count a stage, each >= its minimum, summing
                        // to num_layers
  interleave_needs_pp,  // interleave > 1 needs pp > 1
  offload_layers,       // activation offload: pp == 1 and fewer layers than the model's
  recompute_layers,     // recompute_layers > 0: recompute = full, at most num_layers
  batch_multiple,       // global batch a multiple of micro-batch x dp
  interleave_batch,     // interleaved: micro-batches per step a multiple of pp
  num_gpus,             // tp x pp x dp x cp == num_gpus (when num_gpus > 0)
  count_
};

/// Which rules to evaluate, by the plan fields they read, so a search can check each group
/// in the loop that fixes those fields (plan.cpp): layout = tp, cp, sequence parallel, ep, dp
/// with the model and seq_len; pipeline = pp, interleave, stage_layers; batch = micro-batch, dp,
/// pp, interleave and the global batch; degrees = ranges and num_gpus.
enum PlanRuleGroup : unsigned {
  kLayoutRules = 1,
  kPipelineRules = 2,
  kBatchRules = 4,
  kDegreeRules = 8,
  kAllPlanRules = 15
};

struct PlanCheck {
  std::uint32_t failed = 0; // bit i set: rule PlanRule(i) is broken
  [[nodiscard]] bool ok() const { return failed == 0; }
  [[nodiscard]] bool has(PlanRule r) const { return (failed >> static_cast<unsigned>(r)) & 1u; }
};

/// Evaluates the rules of `groups` (no allocation, no throw). num_gpus = 0 skips that rule.
[[nodiscard]] PlanCheck check_plan(const ParallelPlan& plan, const ModelSpec& model,
                                   const TrainingSetup& setup, std::int64_t num_gpus,
                                   unsigned groups = kAllPlanRules);

/// Throws ConfigError naming every rule check_plan() finds broken, with the values
/// ("tp = 5: must divide num_heads = 32"). num_gpus = 0 skips the GPU-count rule.
void validate(const ParallelPlan& plan, const ModelSpec& model, const TrainingSetup& setup,
              std::int64_t num_gpus, const std::string& source);
/// The stage_layers part of the above alone: one count per stage (pp), each at least
/// min_layers_on_stage(), summing to num_layers.
void validate_stage_layers(const ParallelPlan& plan, std::int64_t num_layers,
                           const std::string& source);

} // namespace trainsim::model
