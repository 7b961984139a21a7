// Parameter and FLOP counts as sums over the operator list (count.hpp).
#include "model/count.hpp"

namespace trainsim::model {

namespace {

// Routed-expert parameters a token does not use: (1 - top_k / num_experts) of them.
double inactive_params(const ModelSpec& model, const std::vector<Op>& ops) {
  if (!model.is_moe())
    return 0;
  const double used = static_cast<double>(model.top_k) / static_cast<double>(model.num_experts);
  double inactive = 0;
  for (const auto& op : ops)
    if (is_routed_expert(op.role))
      inactive += op.params * (1.0 - used);
  return inactive;
}

double role_params(const std::vector<Op>& ops, OpRole role) {
  double p = 0;
  for (const auto& op : ops)
    if (op.role == role)
      p += op.params;
  return p;
}

} // namespace

ParamCount count_params(const ModelSpec& model) {
  OpContext ctx; // tp = cp = 1, one sequence: parameter counts do not depend on shapes
  ctx.seq_len = 1;
  const OpList ops = build_ops(model, ctx);
  ParamCount c;
  c.embedding = sum_params(ops.embedding);
  c.layers = sum_over_layers(ops, [](const std::vector<Op>& l) { return sum_params(l); });
  c.per_layer = ops.layers.size() == 1 ? sum_params(ops.layers.front().ops)
                : ops.num_layers > 0   ? c.layers / static_cast<double>(ops.num_layers)
                                       : 0;
  c.head = sum_params(ops.head);
  const double modules = static_cast<double>(ops.num_mtp_modules);
  c.mtp = modules * sum_params(ops.mtp);
  c.total = c.embedding + c.layers + c.head + c.mtp;
  const double inactive =
      sum_over_layers(ops, [&](const std::vector<Op>& l) { return inactive_params(model, l); });
  const double mtp_inactive = modules * inactive_params(model, ops.mtp);
  c.active = c.total - inactive - mtp_inactive;
  c.mtp_active = c.mtp - mtp_inactive;
  c.active_without_embedding = c.active - role_params(ops.embedding, OpRole::embedding);
  c.non_embedding = c.total - c.embedding - role_params(ops.head, OpRole::lm_head);
  return c;
}

FlopsPerToken flops_per_token(const ModelSpec& model, std::int64_t seq_len) {
  OpContext ctx;
  ctx.seq_len = seq_len;
  const OpList ops = build_ops(model, ctx);
  const double tokens = static_cast<double>(seq_len);
  const double modules = static_cast<double>(ops.num_mtp_modules);
  auto total = [&](double (*f)(const std::vector<Op>&)) {
    return f(ops.embedding) + sum_over_layers(ops, f) + f(ops.head) + modules * f(ops.mtp);
  };
  FlopsPerToken f;
  f.forward = total(sum_fwd_flops) / tokens;
  f.backward = total(sum_bwd_flops) / tokens;
  f.total = f.forward + f.backward;
  // Attention over the keys a kernel visits: forward executed FLOPs, backward twice that.
  auto causal = [](const std::vector<Op>& l) {
    double s = 0;
    for (const auto& op : l)
      s += is_attention_part(op.role) && op.fwd_flops > 0 ? 3 * op.fwd_exec_flops
                                                          : op.fwd_flops + op.bwd_flops;
    return s;
  };
  f.causal_total = (causal(ops.embedding) + sum_over_layers(ops, causal) + causal(ops.head) +
                    modules * causal(ops.mtp)) /
                   tokens;
  f.six_n = 6.0 * count_params(model).active;
  return f;
}

} // namespace trainsim::model
