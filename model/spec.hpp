// The inputs that describe a training job, one struct per concept (STYLE.md section 3):
// ModelSpec (decoder-only transformer, dense or MoE), ParallelPlan (how it is split over
// GPUs), TrainingSetup (batch, sequence, precision). They never embed each other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  // Transformer layers on each pipeline stage, first to last; empty: num_layers / pp on every
  // stage. An uneven split lightens the stages that also hold the embedding (first) or the LM
  // head and loss (last): Llama 3 405B trains 126 layers on 16 stages as 7, 8 x 14, 7
  // (Dubey et al. 2024, Sec. 3.3.2). Every stage holds at least one layer.
  std::vector<std::int64_t> stage_layers;
  [[nodiscard]] std::int64_t num_gpus() const { return tp * pp * dp * cp; }
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
/// The stage_layers part of the above alone: one count per stage (pp), each at least
/// min_layers_on_stage(), summing to num_layers.
void validate_stage_layers(const ParallelPlan& plan, std::int64_t num_layers,
                           const std::string& source);

} // namespace trainsim::model
