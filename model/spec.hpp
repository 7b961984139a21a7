// The inputs that describe a training job, one struct per concept (STYLE.md section 3):
// ModelSpec (decoder-only transformer, dense or MoE), ParallelPlan (how it is split over
// GPUs), TrainingSetup (batch, sequence, precision). They never embed each other.
#pragma once

#include <cstdint>
#include <string>

#include "common/dtype.hpp"

namespace trainsim::model {

enum class FfnKind { gated, plain };         // gated: SwiGLU, 3 matrices; plain: GELU, 2
enum class NormKind { layernorm, rmsnorm };  // LayerNorm has weight + bias; RMSNorm weight only
enum class PositionKind { learned, rotary }; // learned: a [max_seq_len, hidden] table

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
  // Mixture of experts (num_experts == 0: dense). Every layer's FFN is replaced by a router
  // plus num_experts experts of expert_ffn_hidden_size; each token visits top_k of them and
  // all num_shared_experts shared experts.
  std::int64_t num_experts = 0;
  std::int64_t top_k = 0;
  std::int64_t expert_ffn_hidden_size = 0;
  std::int64_t num_shared_experts = 0;

  [[nodiscard]] bool is_moe() const { return num_experts > 0; }
};

enum class Precision { fp32, bf16_mixed, fp16_mixed, bf16 };
enum class Recompute { none, selective, full };
enum class AttentionImpl { flash, naive };
enum class Optimizer { adamw, sgd };

struct ParallelPlan {
  std::int64_t tp = 1; // tensor parallel
  std::int64_t pp = 1; // pipeline parallel
  std::int64_t dp = 1; // data parallel
  std::int64_t cp = 1; // context parallel
  std::int64_t ep = 1; // expert parallel (MoE: experts split over ep ranks of the dp group)
  std::int64_t zero_stage = 0;
  bool sequence_parallel = false;
  std::int64_t interleave = 1; // virtual pipeline chunks per stage (1 = plain 1F1B)
  Recompute recompute = Recompute::none;
  [[nodiscard]] std::int64_t num_gpus() const { return tp * pp * dp * cp; }
};

struct TrainingSetup {
  std::int64_t micro_batch_size = 1;  // sequences per micro-batch per data-parallel rank
  std::int64_t global_batch_size = 0; // sequences per optimizer step (0 = micro x dp)
  std::int64_t seq_len = 2048;
  Precision precision = Precision::bf16_mixed;
  AttentionImpl attention = AttentionImpl::flash;
  Optimizer optimizer = Optimizer::adamw;
};

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
  tp_expert_ffn,        // MoE: tp divides expert_ffn_hidden_size
  cp_seq,               // cp divides seq_len
  sp_seq,               // sequence parallel: tp divides seq_len / cp
  ep_experts,           // MoE: ep divides num_experts
  ep_dp,                // MoE: ep divides dp
  ep_dense,             // dense model: ep == 1
  seq_positions,        // learned positions: seq_len <= max_seq_len
  pp_layers,            // pp <= num_layers
  pp_interleave_layers, // pp x interleave divides num_layers
  interleave_needs_pp,  // interleave > 1 needs pp > 1
  batch_multiple,       // global batch a multiple of micro-batch x dp
  interleave_batch,     // interleaved: micro-batches per step a multiple of pp
  num_gpus,             // tp x pp x dp x cp == num_gpus (when num_gpus > 0)
  count_
};

/// Which rules to evaluate, by the plan fields they read, so a search can check each group
/// in the loop that fixes those fields (plan.cpp): layout = tp, cp, sequence parallel, ep, dp
/// with the model and seq_len; pipeline = pp, interleave; batch = micro-batch, dp, pp,
/// interleave and the global batch; degrees = ranges and num_gpus.
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

} // namespace trainsim::model
