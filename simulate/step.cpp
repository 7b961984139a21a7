// Bottom-up step time (step.hpp).
#include "simulate/step.hpp"

#include <algorithm>
#include <cmath>

#include "model/count.hpp"
#include "model/ops.hpp"

namespace trainsim::sim {

using model::Recompute;

Placement place_groups(const model::ParallelPlan& plan, const hw::ClusterSpec& cluster) {
  const std::int64_t G = cluster.gpus_per_node;
  auto members_per_node = [&](std::int64_t size, std::int64_t stride) {
    if (stride >= G) return std::int64_t{1};
    return std::clamp<std::int64_t>(G / stride, 1, size);
  };
  Placement p;
  p.tp = {plan.tp, std::min(plan.tp, G)};
  p.cp = {plan.cp, members_per_node(plan.cp, plan.tp)};
  p.dp = {plan.dp, members_per_node(plan.dp, plan.tp * plan.cp)};
  p.ep = {plan.ep, members_per_node(plan.ep, plan.tp * plan.cp)};
  p.pp_inter_node = plan.tp * plan.cp * plan.dp >= G && cluster.num_nodes > 1;
  return p;
}

namespace {

model::CommKind comm_of(const model::Op& op, Pass pass) {
  return pass == Pass::forward ? op.fwd_comm : op.bwd_comm;
}

Collective to_collective(model::CommKind k) {
  switch (k) {
    case model::CommKind::all_reduce: return Collective::all_reduce;
    case model::CommKind::all_gather: return Collective::all_gather;
    case model::CommKind::reduce_scatter: return Collective::reduce_scatter;
    case model::CommKind::all_to_all: return Collective::all_to_all;
    case model::CommKind::none: break;
  }
  return Collective::all_reduce;
}

// Time of one pass over a list of ops: compute (roofline) and TP communication apart.
struct PassTime {
  double compute = 0, tp = 0;
};

PassTime pass_time(const std::vector<model::Op>& ops, Pass pass, const hw::GpuSpec& gpu,
                   const hw::HardwareProfile& profile, const hw::ClusterSpec& cluster,
                   const Group& tp, std::vector<OpCost>* keep = nullptr) {
  PassTime t;
  for (const auto& op : ops) {
    if (op.kind == model::OpKind::tp_comm) {
      const auto kind = comm_of(op, pass);
      if (kind != model::CommKind::none)
        t.tp += collective_cost(to_collective(kind), op.comm_bytes, tp, cluster, profile).time_s;
      continue;
    }
    const OpCost c = op_cost(op, pass, gpu, profile);
    t.compute += c.time_s;
    if (keep) keep->push_back(c);
  }
  return t;
}

double recompute_time(const std::vector<model::Op>& layer, Recompute r, const hw::GpuSpec& gpu,
                      const hw::HardwareProfile& profile) {
  double t = 0;
  for (const auto& op : layer) {
    if (op.kind == model::OpKind::tp_comm) continue;
    const bool attention_part = op.name == "attn.scores" || op.name == "attn.softmax" ||
                                op.name == "attn.probs_dropout" || op.name == "attn.pv";
    if (r == Recompute::full || (r == Recompute::selective && attention_part))
      t += op_cost(op, Pass::forward, gpu, profile).time_s;
  }
  return t;
}

double recompute_flops(const std::vector<model::Op>& layer, Recompute r) {
  double f = 0;
  for (const auto& op : layer) {
    const bool attention_part = op.name == "attn.scores" || op.name == "attn.pv";
    if (r == Recompute::full || (r == Recompute::selective && attention_part)) f += op.fwd_flops;
  }
  return f;
}

// Gradient (or parameter) reduction in buckets that become ready uniformly through a
// backward pass of `window_s`; returns the time the reduction runs past the window end.
double exposed_bucketed(double bytes, double bucket_bytes, double window_s, bool overlap,
                        Collective op, const Group& g, const hw::ClusterSpec& cluster,
                        const hw::HardwareProfile& profile, Algorithm algo) {
  if (bytes <= 0 || g.size <= 1) return 0;
  const double nb = bucket_bytes > 0 ? std::ceil(bytes / bucket_bytes) : 1.0;
  const double per = collective_cost(op, bytes / nb, g, cluster, profile, algo).time_s;
  if (!overlap) return nb * per;
  double finish = 0;
  const auto n = static_cast<std::int64_t>(nb);
  for (std::int64_t i = 1; i <= n; ++i) {
    const double ready = window_s * static_cast<double>(i) / nb;
    finish = std::max(finish, ready) + per;
  }
  return std::max(0.0, finish - window_s);
}

}  // namespace

StepEstimate estimate_step(const model::ModelSpec& m, const hw::ClusterSpec& cluster,
                           const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                           const model::ParallelPlan& plan, const model::TrainingSetup& setup,
                           const StepOptions& options) {
  StepEstimate est;
  est.placement = place_groups(plan, cluster);
  const Placement& pl = est.placement;
  const model::OpList ops = model::build_ops(m, model::make_op_context(plan, setup));
  const Dtype dt = model::compute_dtype(setup.precision);
  const double e = dtype_bytes(dt);

  // ---- one layer, one micro-batch ----
  const PassTime lf = pass_time(ops.layer, Pass::forward, gpu, profile, cluster, pl.tp, &est.layer_forward);
  const PassTime lb = pass_time(ops.layer, Pass::backward, gpu, profile, cluster, pl.tp, &est.layer_backward);
  double layer_recompute = recompute_time(ops.layer, plan.recompute, gpu, profile);
  double layer_recompute_tp = plan.recompute == Recompute::full ? lf.tp : 0;
  double tp_layer = lf.tp + lb.tp + layer_recompute_tp;
  if (options.tp_overlap) tp_layer = std::max(0.0, tp_layer - (lf.compute + lb.compute));

  // Context parallel (ring attention): each layer passes K and V chunks around the ring
  // c-1 times in forward and K, V, dK, dV in backward, overlapped with the attention core.
  double cp_layer = 0;
  if (plan.cp > 1) {
    double kv_bytes = 0, attn_s = 0;
    for (const auto& op : ops.layer) {
      for (const auto& t : op.saved)
        if (t.id == "attn.k" || t.id == "attn.v") kv_bytes += t.bytes;
      if (op.kind == model::OpKind::attention_core || op.name == "attn.scores" || op.name == "attn.pv")
        attn_s += op_cost(op, Pass::forward, gpu, profile).time_s + op_cost(op, Pass::backward, gpu, profile).time_s;
    }
    const double steps = static_cast<double>(plan.cp - 1);
    const double comm = 3 * steps *
                        collective_cost(Collective::send_recv, kv_bytes, pl.cp, cluster, profile).time_s;
    cp_layer = std::max(0.0, comm - attn_s);
  }
  // Expert parallel: dispatch and combine all-to-alls of the routed tokens, forward and
  // backward (exposed).
  double ep_layer = 0;
  if (m.is_moe() && plan.ep > 1) {
    const double routed = static_cast<double>(setup.micro_batch_size * setup.seq_len / plan.cp) *
                          static_cast<double>(m.top_k) * static_cast<double>(m.hidden_size) * e;
    ep_layer = 4 * collective_cost(Collective::all_to_all, routed, pl.ep, cluster, profile).time_s;
  }

  // ---- stages: the slowest one sets the pace ----
  const double layers_per_stage = static_cast<double>(m.num_layers) / static_cast<double>(plan.pp);
  const PassTime ef = pass_time(ops.embedding, Pass::forward, gpu, profile, cluster, pl.tp);
  const PassTime eb = pass_time(ops.embedding, Pass::backward, gpu, profile, cluster, pl.tp);
  const PassTime hf = pass_time(ops.head, Pass::forward, gpu, profile, cluster, pl.tp);
  const PassTime hb = pass_time(ops.head, Pass::backward, gpu, profile, cluster, pl.tp);
  struct Stage {
    double fwd = 0, bwd = 0, rc = 0, tp = 0, cp = 0, ep = 0;
    [[nodiscard]] double total() const { return fwd + bwd + rc + tp + cp + ep; }
  };
  auto make_stage = [&](bool first, bool last) {
    Stage s;
    s.fwd = layers_per_stage * lf.compute + (first ? ef.compute : 0) + (last ? hf.compute : 0);
    s.bwd = layers_per_stage * lb.compute + (first ? eb.compute : 0) + (last ? hb.compute : 0);
    s.rc = layers_per_stage * layer_recompute;
    s.tp = layers_per_stage * tp_layer + (first ? ef.tp + eb.tp : 0) + (last ? hf.tp + hb.tp : 0);
    s.cp = layers_per_stage * cp_layer;
    s.ep = layers_per_stage * ep_layer;
    return s;
  };
  Stage stage = make_stage(true, plan.pp == 1);
  if (plan.pp > 1) {
    const Stage last = make_stage(false, true);
    if (last.total() > stage.total()) stage = last;
  }
  est.micro_batch_stage_s = stage.total();

  // ---- schedule ----
  const std::int64_t micro_batches = model::grad_accumulation_steps(plan, setup);
  est.micro_batches = std::max<std::int64_t>(micro_batches, 1);
  est.global_batch_size = est.micro_batches * setup.micro_batch_size * plan.dp;
  const double mb = static_cast<double>(est.micro_batches);
  StepBreakdown& b = est.breakdown_s;
  b.forward = mb * stage.fwd;
  b.backward = mb * stage.bwd;
  b.recompute = mb * stage.rc;
  b.tp_comm = mb * stage.tp;
  b.cp_comm = mb * stage.cp;
  b.ep_comm = mb * stage.ep;
  const double v = static_cast<double>(plan.interleave);
  b.bubble = static_cast<double>(plan.pp - 1) / v * stage.total();
  if (plan.pp > 1) {
    // Activations (forward) and their gradients (backward) cross each stage boundary once
    // per micro-batch per model chunk; Megatron scatters them over the tp ranks (Narayanan
    // et al. 2021 Sec. 4.1).
    const double act = static_cast<double>(setup.micro_batch_size * setup.seq_len / plan.cp *
                                           m.hidden_size) *
                       e / static_cast<double>(plan.tp);
    const Group pair{2, pl.pp_inter_node ? 1 : 2};
    b.pp_comm = mb * 2 * v * collective_cost(Collective::send_recv, act, pair, cluster, profile).time_s;
  }

  // ---- data parallel gradient reduction + ZeRO traffic ----
  est.memory = estimate_memory(m, plan, setup, profile, MemoryOptions{options.bucket_bytes});
  const double stage_params = est.memory.params_on_gpu;
  const auto per_param = state_bytes_per_param(setup.precision, setup.optimizer);
  const double grad_bytes = stage_params * per_param.gradients;
  est.dp_bytes = grad_bytes;
  const double window = stage.bwd + stage.rc;  // the last micro-batch's backward
  if (plan.dp > 1) {
    const double ar = busbw_factor(Collective::all_reduce, plan.dp);
    const double half = busbw_factor(Collective::all_gather, plan.dp);
    const double weight_bytes_all = stage_params * per_param.weights;
    est.dp_volume_bytes = plan.zero_stage == 0   ? ar * grad_bytes
                          : plan.zero_stage < 3 ? half * (grad_bytes + weight_bytes_all)
                                                : half * (grad_bytes + 2 * mb * weight_bytes_all);
    if (plan.zero_stage == 0) {
      b.dp_comm = exposed_bucketed(grad_bytes, options.bucket_bytes, window, options.dp_overlap,
                                   Collective::all_reduce, pl.dp, cluster, profile,
                                   options.dp_algorithm);
    } else {
      // Reduce-scatter the gradients (bucketed), all-gather the updated 16-bit weights.
      b.dp_comm = exposed_bucketed(grad_bytes, options.bucket_bytes, window, options.dp_overlap,
                                   Collective::reduce_scatter, pl.dp, cluster, profile,
                                   options.dp_algorithm);
      const double weight_bytes = stage_params * per_param.weights;
      if (plan.zero_stage < 3)
        b.dp_comm += collective_cost(Collective::all_gather, weight_bytes, pl.dp, cluster, profile).time_s;
      else  // ZeRO-3: gather weights before each forward and each backward, prefetched.
        b.dp_comm += mb * std::max(0.0, 2 * collective_cost(Collective::all_gather, weight_bytes,
                                                            pl.dp, cluster, profile)
                                                    .time_s -
                                           (stage.fwd + stage.bwd));
    }
  }

  // ---- optimizer: memory-bound update of this GPU's (ZeRO-sharded) parameters ----
  {
    const double shard = plan.zero_stage >= 1 ? static_cast<double>(plan.dp) : 1.0;
    const bool mixed = setup.precision == model::Precision::bf16_mixed ||
                       setup.precision == model::Precision::fp16_mixed;
    // Read gradient (twice: norm for clipping, then update), read+write optimizer states
    // (and master weights), write (mixed: the 16-bit copy; else read+write) weights.
    const double bytes_per_param = 2 * per_param.gradients + 2 * per_param.optimizer +
                                   (mixed ? per_param.weights : 2 * per_param.weights);
    b.optimizer = stage_params / shard * bytes_per_param /
                      (gpu.hbm_bandwidth_bytes_per_s * profile.optimizer_bw_fraction) +
                  4 * profile.launch_overhead_s;
  }

  est.step_time_s = b.total();

  // ---- rates ----
  est.tokens_per_step = static_cast<double>(est.global_batch_size * setup.seq_len);
  est.tokens_per_s = est.tokens_per_step / est.step_time_s;
  const auto f = model::flops_per_token(m, setup.seq_len);
  est.model_flops_per_step = f.total * est.tokens_per_step;
  // Recomputed FLOPs: per layer, per token of the full model.
  model::OpContext full_ctx;
  full_ctx.seq_len = setup.seq_len;
  const auto full_ops = model::build_ops(m, [&] {
    auto c = model::make_op_context(plan, setup);
    c.tp = 1;
    c.cp = 1;
    c.sequence_parallel = false;
    c.micro_batch_size = 1;
    return c;
  }());
  const double rc_per_token = recompute_flops(full_ops.layer, plan.recompute) *
                              static_cast<double>(m.num_layers) / static_cast<double>(setup.seq_len);
  est.hardware_flops_per_step = est.model_flops_per_step + rc_per_token * est.tokens_per_step;
  const double n = static_cast<double>(plan.num_gpus());
  est.peak_flops_per_s = effective_peak_flops_per_s(gpu, dt);
  est.achieved_flops_per_s_per_gpu = est.model_flops_per_step / (est.step_time_s * n);
  est.mfu = est.achieved_flops_per_s_per_gpu / est.peak_flops_per_s;
  est.hfu = est.hardware_flops_per_step / (est.step_time_s * n * est.peak_flops_per_s);
  return est;
}

}  // namespace trainsim::sim
