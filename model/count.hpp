// Parameter and FLOP accounting derived from the operator list (ops.hpp). Closed forms in
// ../shared/DOMAIN.md sections 1-2 and docs/model.md are the tests of these sums.
#pragma once

#include "model/ops.hpp"
#include "model/spec.hpp"

namespace trainsim::model {

struct ParamCount {
  double total = 0;     // every trained parameter (tied embeddings counted once, MTP included)
  double embedding = 0; // token (+ learned position) tables
  double per_layer = 0; // one transformer layer (the mean over layer kinds when they differ)
  double layers = 0;    // all layers
  double head = 0;      // final norm + untied LM head
  double mtp = 0;       // multi-token-prediction modules (their own weights; 0 without)
  // Parameters a token uses: all but the routed experts it is not sent to (MoE: router +
  // top_k experts + shared experts), embedding table included (Mixtral's and Qwen's "active").
  double active = 0;
  // The same without the input embedding table, which a token only indexes (GPT-OSS's and
  // DeepSeek-V3's published "active" figures count this way).
  double active_without_embedding = 0;
  double mtp_active = 0;    // the MTP modules' part of `active`
  double non_embedding = 0; // total - embedding - untied LM head (Kaplan et al. 2020's N)
};

[[nodiscard]] ParamCount count_params(const ModelSpec& model);

/// Model FLOPs per token of one training sequence of length seq_len (no recompute), MTP
/// modules included.
struct FlopsPerToken {
  double forward = 0;
  double backward = 0;
  double total = 0;
  // The total with attention counted over the keys a causal (or windowed) kernel visits:
  // each attention op's forward executed FLOPs, x 3 for forward + backward.
  double causal_total = 0;
  double six_n = 0; // the 6N approximation with N = active parameters, for comparison
};

[[nodiscard]] FlopsPerToken flops_per_token(const ModelSpec& model, std::int64_t seq_len);

} // namespace trainsim::model
