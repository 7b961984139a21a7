// Parameter and FLOP counts as sums over the operator list (count.hpp).
#include "model/count.hpp"

namespace trainsim::model {

ParamCount count_params(const ModelSpec& model) {
  OpContext ctx; // tp = cp = 1, one sequence: parameter counts do not depend on shapes
  ctx.seq_len = 1;
  const OpList ops = build_ops(model, ctx);
  ParamCount c;
  c.embedding = sum_params(ops.embedding);
  c.per_layer = sum_params(ops.layer);
  c.layers = c.per_layer * static_cast<double>(ops.num_layers);
  c.head = sum_params(ops.head);
  c.total = c.embedding + c.layers + c.head;
  double inactive = 0;
  if (model.is_moe()) {
    const double used = static_cast<double>(model.top_k) / static_cast<double>(model.num_experts);
    for (const auto& op : ops.layer)
      if (is_routed_expert(op.role))
        inactive += op.params * (1.0 - used);
  }
  c.active = c.total - inactive * static_cast<double>(ops.num_layers);
  double lm = 0;
  for (const auto& op : ops.head)
    if (op.role == OpRole::lm_head)
      lm = op.params;
  c.non_embedding = c.total - c.embedding - lm;
  return c;
}

FlopsPerToken flops_per_token(const ModelSpec& model, std::int64_t seq_len) {
  OpContext ctx;
  ctx.seq_len = seq_len;
  const OpList ops = build_ops(model, ctx);
  const double tokens = static_cast<double>(seq_len);
  const double layers = static_cast<double>(ops.num_layers);
  FlopsPerToken f;
  f.forward =
      (sum_fwd_flops(ops.embedding) + layers * sum_fwd_flops(ops.layer) + sum_fwd_flops(ops.head)) /
      tokens;
  f.backward =
      (sum_bwd_flops(ops.embedding) + layers * sum_bwd_flops(ops.layer) + sum_bwd_flops(ops.head)) /
      tokens;
  f.total = f.forward + f.backward;
  f.six_n = 6.0 * count_params(model).active;
  return f;
}

} // namespace trainsim::model
