// Parameter and FLOP accounting derived from the operator list (ops.hpp). Closed forms in
// ../shared/DOMAIN.md sections 1-2 are the tests of these sums.
#pragma once

#include "model/ops.hpp"
#include "model/spec.hpp"

namespace trainsim::model {

struct ParamCount {
  double total = 0;         // every stored parameter (tied embeddings counted once)
  double embedding = 0;     // token (+ learned position) tables
  double per_layer = 0;     // one transformer layer
  double layers = 0;        // all layers
  double head = 0;          // final norm + untied LM head
  double active = 0;        // parameters a token uses (MoE: router + top_k experts + shared)
  double non_embedding = 0; // total - embedding - untied LM head (Kaplan et al. 2020's N)
};

[[nodiscard]] ParamCount count_params(const ModelSpec& model);

/// Model FLOPs per token of one training sequence of length seq_len (no recompute).
struct FlopsPerToken {
  double forward = 0;
  double backward = 0;
  double total = 0;
  double six_n = 0; // the 6N approximation with N = active parameters, for comparison
};

[[nodiscard]] FlopsPerToken flops_per_token(const ModelSpec& model, std::int64_t seq_len);

} // namespace trainsim::model
