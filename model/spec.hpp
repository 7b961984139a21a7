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

/// Training precision policies. The FP8 ones are Transformer Engine's (NVIDIA TE docs, "Using
/// FP8 with Transformer Engine"): the linear layers' GEMMs in FP8 (E4M3 forward, E5M2
/// gradients), everything else bf16, fp32 master weights; fp8-delayed scales from an amax
/// history (DelayedScaling), fp8-current from the tensor itself (Float8CurrentScaling); mxfp8 is
/// the OCP microscaling format (32-element blocks with E8M0 scales) of Blackwell GPUs.
enum class Precision { fp32, bf16_mixed, fp16_mixed, bf16, fp8_delayed, fp8_current, mxfp8 };
[[nodiscard]] inline bool is_fp8(Precision p) {
  return p == Precision::fp8_delayed || p == Precision::fp8_current || p == Precision::mxfp8;
}
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
/// Checks the plan against the model (tp divides heads, kv heads, ffn; pp <= layers; ...)
/// and, when num_gpus > 0, that tp*pp*dp*cp == num_gpus.
void validate(const ParallelPlan& plan, const ModelSpec& model, const TrainingSetup& setup,
              std::int64_t num_gpus, const std::string& source);

} // namespace trainsim::model
