// The CS336 Transformer LM (token embedding, RoPE, pre-norm RMSNorm, causal multi-head
// attention, SwiGLU FFN, final RMSNorm, untied LM head, mean cross-entropy) in float64 on the
// CPU: the specification the CUDA training step is checked against (llm.c's CPU reference).
// One flat parameter vector; ParamLayout says where each tensor lives, for CPU and GPU alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/spec.hpp"

namespace trainsim::val::train {

inline constexpr double kRmsNormEps = 1e-5;   // CS336 assignment 1 RMSNorm eps
inline constexpr double kRopeTheta = 10000.0; // Su et al. 2021, Eq. 34

/// One parameter tensor inside the flat vector: row-major [rows, cols] ([out, in] for
/// linear layers, as torch.nn.Linear stores them; [1, hidden] for RMSNorm gains).
struct ParamTensor {
  std::string name;        // "layer3.w13"
  std::int64_t offset = 0; // elements from the start of the flat vector
  std::int64_t rows = 0, cols = 0;
  bool is_norm = false; // RMSNorm gain (initialised to 1)
  [[nodiscard]] std::int64_t num_elements() const { return rows * cols; }
};

/// Parameters in forward order: embedding [vocab, hidden]; per layer ln1 [hidden],
/// wqkv [3 hidden, hidden] (q | k | v rows), wo [hidden, hidden], ln2 [hidden],
/// w13 [2 ffn, hidden] (w1 gate rows | w3 up rows), w2 [hidden, ffn]; final_norm [hidden];
/// lm_head [vocab, hidden]. Backward produces gradients in exactly the reverse order.
struct ParamLayout {
  std::int64_t num_layers = 0, hidden_size = 0, num_heads = 0, head_dim = 0, ffn_hidden_size = 0,
               vocab_size = 0;
  std::vector<ParamTensor> tensors;
  std::int64_t num_params = 0;        // real parameters
  std::int64_t num_padded_params = 0; // flat length (each tensor starts 16-element aligned)

  enum LayerTensor { kLn1 = 0, kWqkv, kWo, kLn2, kW13, kW2, kPerLayer };
  [[nodiscard]] const ParamTensor& embedding() const { return tensors.front(); }
  [[nodiscard]] const ParamTensor& layer(std::int64_t l, int which) const {
    return tensors[static_cast<std::size_t>(1 + l * kPerLayer + which)];
  }
  [[nodiscard]] const ParamTensor& final_norm() const { return tensors[tensors.size() - 2]; }
  [[nodiscard]] const ParamTensor& lm_head() const { return tensors.back(); }
};

/// Layout for a dense RMSNorm + RoPE + SwiGLU model; ConfigError (naming `source`) when the
/// model is not of that kind or num_heads * head_dim != hidden_size or head_dim is odd.
[[nodiscard]] ParamLayout make_layout(const model::ModelSpec& m, const std::string& source);

/// Token ids of one batch: inputs and next-token targets, both [batch_size, seq_len].
struct TokenBatch {
  std::int64_t batch_size = 0, seq_len = 0;
  std::vector<std::int32_t> inputs, targets;
};

/// Synthetic task: every sequence repeats one random pattern of `period` tokens (drawn from
/// seed), each starting at its own phase (drawn from seed and the global sample index), so the
/// next token is a function of the current one: a bigram the model learns in tens of steps.
[[nodiscard]] TokenBatch synthetic_batch(std::int64_t batch_size, std::int64_t seq_len,
                                         std::int64_t vocab_size, std::uint64_t seed,
                                         std::int64_t first_sample, std::int64_t period = 8);

/// Deterministic host initialisation: linear weights uniform with std 0.02, gains 1,
/// padding 0 (the GPU path initialises its own; tests copy its parameters instead).
[[nodiscard]] std::vector<double> reference_init(const ParamLayout& layout, std::uint64_t seed);

/// Mean cross-entropy (nats) of the batch; when `grads` is given it is resized to
/// num_padded_params and overwritten with d loss / d params.
[[nodiscard]] double reference_loss(const ParamLayout& layout, const std::vector<double>& params,
                                    const TokenBatch& batch, std::vector<double>* grads);

struct AdamWConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

/// One AdamW step (Loshchilov and Hutter 2019, Alg. 2, with bias correction) at step t >= 1.
void reference_adamw(const AdamWConfig& c, std::int64_t t, const std::vector<double>& grads,
                     std::vector<double>& params, std::vector<double>& m, std::vector<double>& v);

} // namespace trainsim::val::train
