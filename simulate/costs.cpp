// Phase 1 of the cost model: per-micro-batch accounting and times (costs.hpp).
#include "simulate/costs.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <string_view>

#include "simulate/roofline.hpp"

namespace trainsim::sim {

using model::Recompute;

Placement place_groups(const model::ParallelPlan& plan, const hw::ClusterSpec& cluster) {
  const std::int64_t G = cluster.gpus_per_node;
  auto members_per_node = [&](std::int64_t size, std::int64_t stride) {
    if (cluster.num_nodes <= 1)
      return size; // one node holds every group
    if (stride >= G)
      return std::int64_t{1};
    return std::clamp<std::int64_t>(G / stride, 1, size);
  };
  Placement p;
  p.tp = {plan.tp, std::min(plan.tp, G)};
  p.cp = {plan.cp, members_per_node(plan.cp, plan.tp)};
  p.dp = {plan.dp_cp(), members_per_node(plan.dp_cp(), plan.tp)}; // dp x cp: ParallelPlan::dp_cp
  // ep ranks step over tp x cp within the dp group; folded (etp = 1 < tp), over consecutive
  // ranks: Megatron-Core's expert grid is etp, ep, then the experts' dp (cp folded in).
  const std::int64_t ep_stride = plan.experts_folded() ? plan.expert_tp() : plan.tp * plan.cp;
  p.ep = {plan.ep, members_per_node(plan.ep, ep_stride)};
  p.edp = {plan.expert_dp_cp(), members_per_node(plan.expert_dp_cp(), plan.expert_tp() * plan.ep)};
  p.pp_inter_node = plan.tp * plan.cp * plan.dp >= G && cluster.num_nodes > 1;
  return p;
}

double exposed_bucketed_s(double nb, double c, double w, bool overlap) {
  if (nb <= 0 || c <= 0)
    return 0;
  if (!overlap)
    return nb * c;
  return std::max(0.0, std::max(w / nb + nb * c, w + c) - w);
}

BucketOverlap overlap_buckets(const std::vector<double>& bucket_s, const std::vector<double>& bytes,
                              double window_s, bool overlap, double compute_rate,
                              double comm_rate) {
  BucketOverlap r;
  double total = 0;
  for (double b : bytes)
    total += b;
  if (bucket_s.empty() || total <= 0)
    return r;
  if (!overlap) {
    for (double c : bucket_s)
      r.exposed_s += c;
    return r;
  }
  double t = 0, cum = 0;
  for (std::size_t i = 0; i < bucket_s.size(); ++i) {
    cum += bytes[i];
    const double start = std::max(window_s * cum / total, t);
    const double work = bucket_s[i]; // seconds of standalone communication
    if (start >= window_s) {
      t = start + work;
      continue;
    }
    const double doable = (window_s - start) * comm_rate; // work finished before the window ends
    if (work <= doable) {
      t = start + work / comm_rate;
      r.overlapped_s += work / comm_rate;
    } else {
      r.overlapped_s += window_s - start;
      t = window_s + (work - doable);
    }
  }
  r.exposed_s = std::max(0.0, t - window_s);
  r.slowdown_s = (1 - compute_rate) * r.overlapped_s;
  return r;
}

BucketOverlap overlap_equal_buckets(double nb, double c, double w, bool overlap,
                                    double compute_rate, double comm_rate) {
  BucketOverlap r;
  if (nb <= 0 || c <= 0)
    return r;
  if (!overlap) {
    r.exposed_s = nb * c;
    return r;
  }
  const double delta = std::max(w, 0.0) / nb;
  const double wall = c / comm_rate; // one bucket's wall time beside compute
  if (wall <= delta) {
    r.exposed_s = c;
    r.overlapped_s = (nb - 1) * wall;
  } else {
    r.overlapped_s = std::max(w, 0.0) - delta;
    r.exposed_s = std::max(0.0, nb * c - r.overlapped_s * comm_rate);
  }
  r.slowdown_s = (1 - compute_rate) * r.overlapped_s;
  return r;
}

namespace {

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

struct PassTime {
  double compute = 0, tp = 0, host = 0;
};

PassTime pass_time(const std::vector<model::Op>& ops, Pass pass, const hw::GpuSpec& gpu,
                   const hw::HardwareProfile& profile, const hw::ClusterSpec& cluster,
                   const Group& tp, const FrameworkProfile& fw) {
  PassTime t;
  for (const auto& op : ops) {
    if (model::is_communication(op.kind)) { // expert-parallel traffic is priced on its own
      const auto kind = pass == Pass::forward ? op.fwd_comm : op.bwd_comm;
      if (op.kind == model::OpKind::tp_comm && kind != model::CommKind::none)
        t.tp += collective_cost(to_collective(kind), op.comm_bytes, tp, cluster, profile).time_s;
      continue;
    }
    const FrameworkOpTime f = framework_op_time(op, pass, gpu, profile, fw);
    t.compute += f.gpu_s;
    t.host += f.host_s;
  }
  return t;
}

// Calls f(bytes, quadratic, tensor role) for each distinct saved tensor of `ops` in order
// (deduplicated by id; the first op saving an id sets its role's factor), bytes scaled by the
// framework's per-role factor.
template <class F>
void for_each_saved(const std::vector<model::Op>& ops, bool include_quadratic,
                    const FrameworkProfile& fw, bool fp32, F f) {
  std::vector<const std::string*> seen;
  for (const auto& op : ops)
    for (const auto& t : op.saved) {
      if (t.quadratic && !include_quadratic)
        continue;
      bool dup = false;
      for (const std::string* id : seen)
        dup = dup || *id == t.id;
      if (dup)
        continue;
      seen.push_back(&t.id);
      const bool kv =
          t.role == model::TensorRole::attention_k || t.role == model::TensorRole::attention_v;
      const double expand = fw.expand_kv_heads && kv ? t.kv_group : 1.0;
      f(t.bytes * expand * fw.role(op.role).saved_factor(fp32), t.quadratic, t.role);
    }
}

// Bytes of distinct saved tensors under the framework's per-role factors; the global
// activation factor (copies and casts of per-token tensors) scales the per-token ones, not the
// [b, heads, s, s] scores and probabilities, whose copies the roles state.
double framework_saved_bytes(const std::vector<model::Op>& ops, bool include_quadratic,
                             const FrameworkProfile& fw, bool fp32) {
  double linear = 0, quadratic = 0;
  for_each_saved(ops, include_quadratic, fw, fp32, [&](double bytes, bool q, model::TensorRole) {
    (q ? quadratic : linear) += bytes;
  });
  return linear * (fp32 && fw.activation_bytes_factor_fp32 > 0 ? fw.activation_bytes_factor_fp32
                                                               : fw.activation_bytes_factor) +
         quadratic;
}

// Expert-parallel all-to-alls of one layer (dispatch and combine) in the forward and in the
// backward pass.
struct EpTime {
  double fwd = 0, bwd = 0;
  [[nodiscard]] double total() const { return fwd + bwd; }
};
EpTime ep_time(const std::vector<model::Op>& ops, const hw::HardwareProfile& profile,
               const hw::ClusterSpec& cluster, const Group& ep) {
  EpTime s;
  auto cost = [&](model::CommKind kind, double bytes) {
    return kind == model::CommKind::none
               ? 0.0
               : collective_cost(to_collective(kind), bytes, ep, cluster, profile).time_s;
  };
  for (const auto& op : ops) {
    if (op.kind != model::OpKind::ep_comm)
      continue;
    s.fwd += cost(op.fwd_comm, op.comm_bytes);
    s.bwd += cost(op.bwd_comm, op.comm_bytes);
  }
  return s;
}

// The distinct saved tensors of `ops` in order, as framework_saved_bytes counts them (scores
// into `quadratic_out` when given); `only_layer_input`: what full recompute keeps.
void saved_tensor_list(const std::vector<model::Op>& ops, bool include_quadratic,
                       bool only_layer_input, const FrameworkProfile& fw, bool fp32,
                       std::vector<double>& out, std::vector<double>* quadratic_out = nullptr) {
  for_each_saved(ops, include_quadratic, fw, fp32,
                 [&](double bytes, bool q, model::TensorRole role) {
                   if (bytes <= 0 || (only_layer_input && role != model::TensorRole::layer_input))
                     return;
                   (q && quadratic_out != nullptr ? *quadratic_out : out).push_back(bytes);
                 });
}

// The framework's global activation factor applied to a tensor list while keeping the op
// list's tensor sizes (the allocator's segments depend on them): a factor above 1 adds copies
// of `piece` bytes (one token-by-hidden tensor: casts and upcasts the op list does not hold),
// below 1 scales every tensor.
void apply_activation_factor(std::vector<double>& tensors, std::size_t from, double act_factor,
                             double piece) {
  double total = 0;
  for (std::size_t i = from; i < tensors.size(); ++i)
    total += tensors[i];
  if (act_factor <= 1 || piece <= 0) {
    for (std::size_t i = from; i < tensors.size(); ++i)
      tensors[i] *= act_factor;
    return;
  }
  for (double extra = (act_factor - 1) * total; extra > 0; extra -= piece)
    tensors.push_back(std::min(extra, piece));
}

// The 16-bit copies of a layer's linear weights that autocast over fp32 weights saves for
// backward (FrameworkProfile::autocast_fp32_weights), one entry per weight, in bytes.
std::vector<double> autocast_weight_copies(const std::vector<model::Op>& l, std::int64_t ep) {
  std::vector<double> out;
  for (const auto& op : l)
    if (op.kind == model::OpKind::gemm && op.params > 0)
      out.push_back(2.0 * (model::is_routed_expert(op.role)
                               ? op.params / static_cast<double>(std::max<std::int64_t>(ep, 1))
                               : op.params));
  return out;
}

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return s;
}

// Activation gradients of [tokens, ffn] shape alive beside the saved tensors during one
// layer's feed-forward backward (FrameworkProfile::ffn_bwd_transient_tensors), in bytes: the
// down projection's input is [tokens, ffn].
double ffn_bwd_transient(const std::vector<model::Op>& l, const FrameworkProfile& fw, bool fp32) {
  double elems = 0;
  for (const auto& op : l)
    if (op.role == model::OpRole::ffn_down)
      elems = std::max(elems, static_cast<double>(op.m) * static_cast<double>(op.k) * op.count);
  return fw.ffn_bwd_transient_tensors * elems * (fp32 ? 4.0 : 2.0);
}

// torchtitan's per-op selective checkpointing (Recompute::selective_op; parallelize_llama.py,
// `_apply_ac_to_transformer_block` with selective_ac_option = "op"): inside each checkpointed
// layer the outputs of aten.mm and of scaled-dot-product attention are kept, except every second
// aten.mm (counted per layer in execution order); everything else is recomputed in backward.
// The op list fuses what the model runs as separate matmuls, so the count walks Q, K, V of the
// QKV projection (Llama's wq, wk, wv) and the gate and up halves of a gated FFN (w1, w3). FP8
// linears count as aten.mm too: torchao's Float8Linear calls torch.mm on its float8 tensor
// subclass, and the checkpoint's dispatch mode sees aten.mm before the subclass turns it into
// _scaled_mm (measured, eager and compiled: validate/results/runs-2026-12-03/sac-float8/);
// their kept output is in the 16-bit activation dtype. Grouped expert GEMMs are not aten.mm:
// recomputed, and not counted.
struct OpSac {
  std::vector<double> recompute_fraction; // of each op's forward, by op
  std::vector<double> saved;              // tensors kept beyond the layer's input (bytes)
};

OpSac op_sac(const std::vector<model::Op>& l) {
  OpSac r;
  r.recompute_fraction.assign(l.size(), 1.0);
  double q_width = 0, ffn_down_k = 0;
  for (const auto& op : l) {
    if (op.role == model::OpRole::attention_core)
      q_width = static_cast<double>(op.heads * op.head_dim);
    if (op.role == model::OpRole::ffn_down)
      ffn_down_k = static_cast<double>(op.k);
  }
  int mm = 0;
  for (std::size_t i = 0; i < l.size(); ++i) {
    const model::Op& op = l[i];
    if (model::is_communication(op.kind)) {
      r.recompute_fraction[i] = 0; // the tensor-parallel collectives: stage_costs
      continue;
    }
    if (op.role == model::OpRole::attention_core) {
      r.recompute_fraction[i] = 0; // output and logsumexp kept
      const double rows = static_cast<double>(op.batch * op.heads * op.seq_q);
      r.saved.push_back(rows * static_cast<double>(op.v_head_dim) * dtype_bytes(op.dtype));
      r.saved.push_back(rows * 4.0);
      continue;
    }
    if (op.kind != model::OpKind::gemm || model::is_routed_expert(op.role) || op.n <= 0)
      continue;
    const double out_bytes = op.dtype == Dtype::fp8 ? 2.0 : dtype_bytes(op.dtype);
    const double n = static_cast<double>(op.n);
    std::array<double, 3> widths{n, 0, 0};
    if (op.role == model::OpRole::qkv_proj && q_width > 0 && q_width < n)
      widths = {q_width, (n - q_width) / 2, (n - q_width) / 2};
    else if (op.role == model::OpRole::ffn_up && ffn_down_k > 0 && n == 2 * ffn_down_k)
      widths = {n / 2, n / 2, 0};
    double recomputed = 0;
    for (double wdt : widths) {
      if (wdt <= 0)
        break;
      if (++mm % 2 == 0)
        recomputed += wdt;
      else
        r.saved.push_back(static_cast<double>(op.m) * wdt * op.count * out_bytes);
    }
    r.recompute_fraction[i] = recomputed / n;
  }
  return r;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}
bool is_ffn_role(model::OpRole r) {
  return r == model::OpRole::ffn_up || r == model::OpRole::ffn_act || r == model::OpRole::ffn_down;
}
bool is_moe_block_role(model::OpRole r) {
  using model::OpRole;
  return r == OpRole::router || r == OpRole::router_topk || r == OpRole::router_aux_loss ||
         r == OpRole::expert_permute || r == OpRole::ep_dispatch || r == OpRole::expert_up ||
         r == OpRole::expert_act || r == OpRole::expert_down || r == OpRole::ep_combine ||
         r == OpRole::expert_combine;
}
// The tensor-parallel collectives around a layer's MLP or MoE block (inside Megatron-Core's
// MLP and MoELayer modules: TE's column-parallel fc1 gathers, the row-parallel fc2 scatters).
bool is_ffn_tp_comm(const model::Op& op) {
  return op.role == model::OpRole::tp_comm &&
         (ends_with(op.name, "mlp.tp_in") || ends_with(op.name, "mlp.tp_out"));
}
} // namespace

ModuleRecompute module_recompute(const std::vector<model::Op>& l, std::uint32_t modules) {
  using model::OpRole;
  ModuleRecompute r;
  r.rerun.assign(l.size(), 0);
  const auto has = [&](OpRole role) {
    return std::any_of(l.begin(), l.end(), [&](const model::Op& op) { return op.role == role; });
  };
  const bool moe_layer = has(OpRole::router);
  // Under MLA the input norm is a module of its own (TENorm before the down-projections);
  // elsewhere Transformer Engine fuses it into the QKV projection (TELayerNormColumnParallel-
  // Linear: an IdentityOp that recompute skips), and the pre-MLP norm into fc1 in dense layers.
  const bool mla = has(OpRole::kv_down_proj);
  const auto member = [&](const model::Op& op, std::uint32_t module) {
    switch (module) {
    case model::kRecomputeCoreAttn: return model::is_attention_part(op.role);
    case model::kRecomputeLayernorm:
      return op.role == OpRole::norm && ((moe_layer && ends_with(op.name, "mlp.norm")) ||
                                         (mla && ends_with(op.name, "attn.norm")));
    case model::kRecomputeMoeAct: return op.role == OpRole::expert_act;
    case model::kRecomputeSharedExperts:
      return moe_layer && (is_ffn_role(op.role) ||
                           (op.role == OpRole::quantize && contains(op.name, "moe.shared.")));
    case model::kRecomputeMlp: // the pre-MLP norm is inside (fused into fc1)
      return !moe_layer && (is_ffn_role(op.role) || is_ffn_tp_comm(op) ||
                            (op.role == OpRole::quantize && contains(op.name, "mlp.fc2")) ||
                            (op.role == OpRole::norm && ends_with(op.name, "mlp.norm")));
    case model::kRecomputeMoe: // the pre-MLP norm is outside (its output is the input)
      return moe_layer &&
             (is_moe_block_role(op.role) || is_ffn_role(op.role) || is_ffn_tp_comm(op) ||
              (op.role == OpRole::quantize && contains(op.name, "moe.shared.")));
    default: return false;
    }
  };
  auto drop = [&](const std::string& id) {
    if (std::find(r.dropped.begin(), r.dropped.end(), id) == r.dropped.end())
      r.dropped.push_back(id);
  };
  for (std::uint32_t module = 1; module <= model::kRecomputeModulesAll; module <<= 1) {
    if ((modules & module) == 0)
      continue;
    std::vector<char> in(l.size(), 0);
    for (std::size_t i = 0; i < l.size(); ++i)
      in[i] = member(l[i], module) ? 1 : 0;
    for (std::size_t i = 0; i < l.size(); ++i)
      r.rerun[i] = r.rerun[i] || in[i];
    if (module == model::kRecomputeCoreAttn) {
      // The scores and probabilities of naive attention; flash keeps only its inputs and the
      // output the projection saves anyway (Korthikanti et al. 2022, Sec. 4.2).
      for (std::size_t i = 0; i < l.size(); ++i)
        for (const auto& t : l[i].saved)
          if (in[i] && t.quadratic)
            drop(t.id);
      continue;
    }
    if (module == model::kRecomputeLayernorm) {
      // Output-discarding: the norm's output, which the next GEMMs saved as their input.
      for (const auto& op : l)
        if (op.role == OpRole::router || op.role == OpRole::q_down_proj ||
            op.role == OpRole::kv_down_proj)
          for (const auto& t : op.saved)
            if (t.role != model::TensorRole::mla_latent)
              drop(t.id);
      continue;
    }
    if (module == model::kRecomputeMoeAct) {
      // Output-discarding: the activation's output, saved by the experts' fc2.
      for (const auto& op : l)
        if (op.role == OpRole::expert_down)
          for (const auto& t : op.saved)
            drop(t.id);
      continue;
    }
    // A checkpointed module keeps its input: the router's (the pre-MLP norm's output) for the
    // MoE block and the shared experts, the norm's input for a dense MLP.
    std::vector<std::string> kept;
    for (std::size_t i = 0; i < l.size(); ++i) {
      const model::Op& op = l[i];
      if (op.role == OpRole::router && !op.saved.empty())
        kept.push_back(op.saved.front().id);
      if (in[i] && op.role == OpRole::norm && !op.saved.empty())
        kept.push_back(op.saved.front().id);
      if (!in[i]) // saved outside the module as well: not the module's to drop
        for (const auto& t : op.saved)
          kept.push_back(t.id);
    }
    for (std::size_t i = 0; i < l.size(); ++i)
      if (in[i])
        for (const auto& t : l[i].saved)
          if (std::find(kept.begin(), kept.end(), t.id) == kept.end())
            drop(t.id);
  }
  return r;
}

namespace {
// The layer's ops without the saved tensors `dropped` names.
std::vector<model::Op> without_saved(const std::vector<model::Op>& l,
                                     const std::vector<std::string>& dropped) {
  std::vector<model::Op> out = l;
  for (auto& op : out)
    op.saved.erase(std::remove_if(op.saved.begin(), op.saved.end(),
                                  [&](const model::SavedTensor& t) {
                                    return std::find(dropped.begin(), dropped.end(), t.id) !=
                                           dropped.end();
                                  }),
                   op.saved.end());
  return out;
}
// Model FLOPs an op's forward re-runs: attention counts its GEMM-like parts only (the scores,
// P V, or the fused core), as the model FLOPs do.
double rerun_flops(const model::Op& op) {
  if (model::is_communication(op.kind))
    return 0;
  if (model::is_attention_part(op.role) && op.role != model::OpRole::attention_scores &&
      op.role != model::OpRole::attention_pv && op.role != model::OpRole::attention_core)
    return 0;
  return op.fwd_flops;
}

// Tensor-by-tensor lists for the caching-allocator model (MicroBatchAccounting::Tensors).
void list_tensors(MicroBatchAccounting& a, const model::OpList& ops,
                  const model::ParallelPlan& plan, const FrameworkProfile& fw, bool fp32,
                  double act_factor, bool autocast) {
  auto& t = a.tensors;
  const model::LayerKind* common = nullptr;
  for (const auto& k : ops.layers)
    if (common == nullptr || k.num_layers > common->num_layers)
      common = &k;
  auto params = [&](const std::vector<model::Op>& l, std::vector<double>& out) {
    for (const auto& op : l)
      if (op.params > 0)
        out.push_back(model::is_routed_expert(op.role) ? op.params / static_cast<double>(plan.ep)
                                                       : op.params);
  };
  if (common != nullptr) {
    const auto& l = common->ops;
    for (const auto& op : l)
      for (const auto& s : op.saved)
        if (s.role == model::TensorRole::layer_input)
          t.activation_grad_bytes = s.bytes;
    const double piece = t.activation_grad_bytes;
    auto list = [&](bool quadratic, bool only_input, std::vector<double>& out) {
      std::vector<double> scores; // not scaled by the global factor (framework_saved_bytes)
      saved_tensor_list(l, quadratic, only_input, fw, fp32, out, &scores);
      apply_activation_factor(out, 0, act_factor, piece);
      out.insert(out.end(), scores.begin(), scores.end());
    };
    list(true, false, t.layer_saved[static_cast<int>(Recompute::none)]);
    list(false, false, t.layer_saved[static_cast<int>(Recompute::selective)]);
    list(true, false, t.layer_saved_all);
    auto& full = t.layer_saved[static_cast<int>(Recompute::full)];
    if (autocast) {
      // The weights' 16-bit copies, kept by every layer until its backward (re-made with the
      // layer under full recompute); the checkpointed input is the fp32 residual stream.
      const auto copies = autocast_weight_copies(l, plan.ep);
      for (auto* v : {&t.layer_saved[static_cast<int>(Recompute::none)],
                      &t.layer_saved[static_cast<int>(Recompute::selective)], &t.layer_saved_all})
        v->insert(v->end(), copies.begin(), copies.end());
      full.push_back(2 * piece);
    } else {
      // torch.utils.checkpoint keeps the layer's input as it is: not scaled by the activation
      // factor (allocator traces at the loss's peak, validate/results/fixtures/allocator-traces/
      // fsdp-cs336-medium-*-full-*.peak.txt: 24 checkpoints of exactly the bf16 input each).
      saved_tensor_list(l, true, true, fw, fp32, full);
    }
    // Per-op checkpointing keeps the checkpointed input and the kept outputs: exactly those
    // op outputs (the policy's cache), not scaled by the activation factor, which stands for
    // what eager code's autograd saves beyond the op list; inside a checkpointed layer the
    // checkpoint's hooks drop all of that and re-make it in backward.
    auto& sac = t.layer_saved[static_cast<int>(Recompute::selective_op)];
    sac = full;
    for (double b : op_sac(l).saved)
      sac.push_back(b);
    params(l, t.layer_params);
  }
  saved_tensor_list(ops.embedding, true, false, fw, fp32, t.emb_saved);
  apply_activation_factor(t.emb_saved, 0, act_factor, t.activation_grad_bytes);
  params(ops.embedding, t.emb_params);
  params(ops.head, t.head_params);
  for (const auto& op : ops.head) {
    if (op.role == model::OpRole::loss && fw.logits_peak_bytes(fp32, plan.tp) > 0)
      continue; // replaced by the framework's chain at the loss, below
    const std::size_t from = t.head_saved.size();
    saved_tensor_list({op}, true, false, fw, fp32, t.head_saved);
    apply_activation_factor(t.head_saved, from, act_factor, t.activation_grad_bytes);
    if (op.role != model::OpRole::lm_head)
      continue;
    if (autocast) {
      const auto copy = autocast_weight_copies({op}, plan.ep);
      t.head_saved.insert(t.head_saved.end(), copy.begin(), copy.end());
    }
    // The chain at the loss in pieces of at most 4 B per logit (16-bit logits, fp32 copies,
    // log-probabilities and their gradients), or the op list's 16-bit logits.
    const double logits = static_cast<double>(op.m) * static_cast<double>(op.n);
    double per = fw.logits_peak_bytes(fp32, plan.tp) > 0
                     ? fw.logits_peak_bytes(fp32, plan.tp)
                     : static_cast<double>(dtype_bytes(op.dtype));
    for (; per > 0; per -= 4)
      t.head_saved.push_back(logits * std::min(per, 4.0));
  }
  for (std::int64_t i = 0; i < ops.num_mtp_modules; ++i) {
    const std::size_t from = t.head_saved.size();
    saved_tensor_list(ops.mtp, true, false, fw, fp32, t.head_saved);
    apply_activation_factor(t.head_saved, from, act_factor, t.activation_grad_bytes);
  }
  if (autocast)
    t.activation_grad_bytes *= 2; // the gradient of the fp32 residual stream is fp32
}

// The mean over a model's layers of f(kind's ops): layer kinds (dense / MoE FFN, full /
// sliding attention) weighted by their layer counts. Uniform models have one kind, so this is
// that layer's value; per-layer quantities times num_layers stay exact totals.
template <class F> double layer_mean(const model::OpList& ops, F f) {
  if (ops.layers.size() == 1)
    return f(ops.layers.front().ops);
  if (ops.num_layers <= 0)
    return 0;
  return model::sum_over_layers(ops, f) / static_cast<double>(ops.num_layers);
}

} // namespace

FrameworkOpTime framework_op_time(const model::Op& op, Pass pass, const hw::GpuSpec& gpu,
                                  const hw::HardwareProfile& profile, const FrameworkProfile& fw) {
  FrameworkOpTime f;
  const OpCost c = op_cost(op, pass, gpu, profile);
  const bool bwd = pass == Pass::backward;
  const RoleCost& rc = fw.role(op.role);
  const double k = bwd ? rc.bwd_kernels : rc.fwd_kernels;
  f.kernels = k >= 0 ? k : default_kernels(op.kind, bwd);
  if (fw.host_model == HostModel::per_op && fw.is_identity()) {
    f.gpu_s = c.queued_s; // inside a step: queued launches (our own trainer)
    return f;
  }
  const double gemm_scale = op.kind != model::OpKind::gemm ? 1.0
                            : model::is_routed_expert(op.role)
                                ? fw.gemm_scale_on(gpu.name) * fw.expert_gemm_efficiency_scale
                                : fw.gemm_scale_on(gpu.name);
  const bool fp32 = op.dtype == Dtype::fp32;
  // PyTorch's SDPA backend on this GPU against the hardware profile's attention (framework.hpp).
  const double sdpa = op.role == model::OpRole::attention_core && !fp32
                          ? fw.sdpa_factor_on(gpu.name, op.head_dim, bwd)
                          : 1.0;
  const double compute = c.compute_s / gemm_scale * rc.compute_factor(bwd, fp32) * sdpa;
  const double memory = c.memory_s * rc.bytes_factor(bwd, fp32);
  double body = std::max(compute, memory);
  if (fw.autocast_cast_passes && op.kind == model::OpKind::gemm && op.params > 0 &&
      (op.dtype == Dtype::bf16 || op.dtype == Dtype::fp16)) {
    // Autocast's casts around the GEMM, in series with it (framework.hpp).
    const double params = op.params; // the weights this op multiplies by
    const double input = static_cast<double>(op.m) * static_cast<double>(op.k) * op.count;
    const double casts = rc.autocast_input_casts;
    const double bytes =
        6 * params + 6 * casts * input + (bwd ? 12 * std::max(casts - 1, 0.0) * input : 0.0);
    f.cast_s = bytes / (gpu.hbm_bandwidth_bytes_per_s * profile.elementwise_bw_fraction);
    body += f.cast_s;
  }
  if (fw.host_model == HostModel::per_op) {
    const double host =
        op.kind == model::OpKind::gemm ? profile.host_gemm_launch_s : profile.host_launch_s;
    f.gpu_s = host > 0 ? std::max(body + f.kernels * profile.gpu_launch_gap_s, f.kernels * host)
                       : body + f.kernels * profile.launch_overhead_s;
    return f;
  }
  f.gpu_s = body + f.kernels * profile.gpu_launch_gap_s;
  f.host_s = f.kernels * fw.host_s_per_kernel * (bwd ? fw.host_bwd_kernel_factor : 1.0);
  return f;
}

GpuTimeByKind gpu_time_by_kind(const model::OpList& ops, const model::ParallelPlan& plan,
                               const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                               const FrameworkProfile& fw) {
  GpuTimeByKind t;
  auto add = [&](const model::Op& op, Pass pass, double times) {
    if (model::is_communication(op.kind))
      return;
    const FrameworkOpTime f = framework_op_time(op, pass, gpu, profile, fw);
    if (op.kind == model::OpKind::gemm) {
      t.gemm_s += times * (f.gpu_s - f.cast_s);
      t.other_s += times * f.cast_s;
    } else if (op.role == model::OpRole::attention_core) {
      t.attention_s += times * f.gpu_s;
    } else {
      t.other_s += times * f.gpu_s;
    }
  };
  const bool full = plan.recompute == Recompute::full;
  for (const auto& kind : ops.layers)
    for (const auto& op : kind.ops) {
      const auto n = static_cast<double>(kind.num_layers);
      add(op, Pass::forward, full ? 2 * n : n);
      add(op, Pass::backward, n);
    }
  for (const auto* part : {&ops.embedding, &ops.head})
    for (const auto& op : *part) {
      add(op, Pass::forward, 1);
      add(op, Pass::backward, 1);
    }
  return t;
}

MicroBatchAccounting account_micro_batch(const model::ModelSpec& m, const model::OpList& ops,
                                         const model::ParallelPlan& plan,
                                         const model::TrainingSetup& setup,
                                         const FrameworkProfile& fw) {
  MicroBatchAccounting a;
  const bool fp32 = setup.precision == model::Precision::fp32;
  const double act_factor = fp32 && fw.activation_bytes_factor_fp32 > 0
                                ? fw.activation_bytes_factor_fp32
                                : fw.activation_bytes_factor;
  a.layer_act[static_cast<int>(Recompute::none)] =
      layer_mean(ops, [&](const auto& l) { return framework_saved_bytes(l, true, fw, fp32); });
  a.layer_act[static_cast<int>(Recompute::selective)] =
      layer_mean(ops, [&](const auto& l) { return framework_saved_bytes(l, false, fw, fp32); });
  // Autocast over fp32 weights (framework.hpp): 16-bit weight copies saved per layer, and a
  // fp32 residual stream (what a checkpointed layer keeps).
  const bool autocast =
      fw.autocast_fp32_weights && (setup.precision == model::Precision::bf16_mixed ||
                                   setup.precision == model::Precision::fp16_mixed);
  const auto copies = [&](const std::vector<model::Op>& l) {
    return autocast ? sum_of(autocast_weight_copies(l, plan.ep)) : 0.0;
  };
  for (auto r : {Recompute::none, Recompute::selective})
    a.layer_act[static_cast<int>(r)] += layer_mean(ops, copies);
  for (const auto& kind : ops.layers) {
    for (const auto& op : kind.ops)
      for (const auto& t : op.saved)
        if (t.role == model::TensorRole::layer_input)
          a.layer_act[static_cast<int>(Recompute::full)] =
              autocast ? 2 * t.bytes : t.bytes * fw.role(op.role).saved_factor(fp32);
    // Full recompute re-materialises one layer at a time: the largest kind.
    a.layer_saved_all = std::max(
        a.layer_saved_all, framework_saved_bytes(kind.ops, true, fw, fp32) + copies(kind.ops));
    if (ffn_bwd_transient(kind.ops, fw, fp32) > a.layer_bwd_transient) {
      a.layer_bwd_transient = ffn_bwd_transient(kind.ops, fw, fp32);
      a.layer_bwd_transient_block = 0;
    }
    // The gradients of the attention probabilities while a layer's backward runs through the
    // softmax (framework: bytes per score), one layer at a time: the largest kind. By then the
    // backward has passed the ops after the softmax (P V, the output projection, the FFN) and
    // freed what only they saved (allocator traces of eager naive attention,
    // validate/results/fixtures/allocator-traces/: the peak is in the softmax's backward,
    // the FFN's saved tensors gone), so the moment's excess over the layer's saved set is the
    // transient less those.
    const double per_score =
        fp32 ? fw.score_bwd_transient_bytes_fp32 : fw.score_bwd_transient_bytes;
    if (per_score > 0) {
      std::vector<model::Op> upto;
      for (const auto& op : kind.ops) {
        upto.push_back(op);
        if (op.role == model::OpRole::attention_softmax)
          break;
      }
      const double freed = framework_saved_bytes(kind.ops, true, fw, fp32) + copies(kind.ops) -
                           (framework_saved_bytes(upto, true, fw, fp32) + copies(upto));
      for (const auto& op : kind.ops)
        if (op.role == model::OpRole::attention_softmax)
          for (const auto& t : op.saved)
            if (t.quadratic) {
              const double scores = t.bytes / (fp32 ? 4.0 : 2.0);
              if (scores * per_score - freed > a.layer_bwd_transient) {
                a.layer_bwd_transient = scores * per_score - freed;
                a.layer_bwd_transient_block = scores * 4.0; // fp32 gradients of the scores
              }
            }
    }
  }
  // Per-op checkpointing: the kept outputs beyond the checkpointed input, and the forward
  // FLOPs re-run, one walk of each layer kind (weighted by its layers).
  double sac_kept = 0, sac_flops = 0;
  for (const auto& kind : ops.layers) {
    if (ops.num_layers <= 0)
      break;
    const OpSac sac = op_sac(kind.ops);
    const double w = static_cast<double>(kind.num_layers) / static_cast<double>(ops.num_layers);
    sac_kept += w * sum_of(sac.saved);
    for (std::size_t i = 0; i < kind.ops.size(); ++i)
      sac_flops += w * kind.ops[i].fwd_flops * sac.recompute_fraction[i];
  }
  a.layer_act[static_cast<int>(Recompute::selective_op)] =
      a.layer_act[static_cast<int>(Recompute::full)] + sac_kept; // as listed above
  a.layer_recompute_flops[static_cast<int>(Recompute::selective_op)] = sac_flops;
  a.emb_act = framework_saved_bytes(ops.embedding, true, fw, fp32);
  a.head_act = framework_saved_bytes(ops.head, true, fw, fp32);
  for (const auto& op : ops.head) {
    if (op.role != model::OpRole::lm_head)
      continue;
    a.head_act += copies({op});
    const double logits = static_cast<double>(op.m) * static_cast<double>(op.n);
    if (fw.logits_peak_bytes(fp32, plan.tp) > 0) {
      // The framework's own chain at the loss (e.g. eager: the fp32 log-probabilities
      // log_softmax keeps, with the incoming gradient and the one it makes, at the start of
      // backward) replaces the op list's fused fp32 softmax.
      for (const auto& l : ops.head)
        if (l.role == model::OpRole::loss)
          a.head_act -= framework_saved_bytes({l}, true, fw, fp32);
      a.head_act += logits * fw.logits_peak_bytes(fp32, plan.tp);
    } else {
      a.head_act += logits * dtype_bytes(op.dtype); // the 16-bit logits beside their fp32 copy
    }
  }
  // MTP modules run after the head on the last stage and keep their tensors until backward.
  const double modules = static_cast<double>(ops.num_mtp_modules);
  a.head_act += modules * framework_saved_bytes(ops.mtp, true, fw, fp32);
  // Megatron scatters the boundary activation over the tp ranks (Narayanan et al. 2021, 4.1).
  a.pp_send_bytes =
      static_cast<double>(setup.micro_batch_size * setup.seq_len / plan.cp * m.hidden_size) *
      dtype_bytes(model::compute_dtype(setup.precision)) / static_cast<double>(plan.tp);
  auto expert = [](const std::vector<model::Op>& l) {
    double p = 0;
    for (const auto& op : l)
      if (model::is_routed_expert(op.role))
        p += op.params;
    return p;
  };
  a.layer_expert_params = layer_mean(ops, expert);
  a.layer_dense_params =
      layer_mean(ops, [&](const auto& l) { return model::sum_params(l) - expert(l); });
  auto tensors = [](const std::vector<model::Op>& list) {
    double n = 0;
    for (const auto& op : list)
      n += op.params > 0 ? 1 : 0;
    return n;
  };
  a.layer_param_tensors = layer_mean(ops, tensors);
  a.emb_param_tensors = tensors(ops.embedding);
  a.head_param_tensors = tensors(ops.head);
  auto fp8_params = [](const std::vector<model::Op>& l, bool experts) {
    double p = 0;
    for (const auto& op : l)
      if (op.kind == model::OpKind::gemm && op.dtype == Dtype::fp8 &&
          model::is_routed_expert(op.role) == experts)
        p += op.params;
    return p;
  };
  a.layer_fp8_dense_params = layer_mean(ops, [&](const auto& l) { return fp8_params(l, false); });
  a.layer_fp8_expert_params = layer_mean(ops, [&](const auto& l) { return fp8_params(l, true); });
  auto recompute = [](const std::vector<model::Op>& l, Recompute r) {
    double f = 0;
    for (const auto& op : l) {
      if (model::is_communication(op.kind))
        continue;
      if (r == Recompute::full || op.role == model::OpRole::attention_scores ||
          op.role == model::OpRole::attention_pv || op.role == model::OpRole::attention_core)
        f += op.fwd_flops;
    }
    return f;
  };
  for (auto r : {Recompute::full, Recompute::selective})
    a.layer_recompute_flops[static_cast<int>(r)] =
        layer_mean(ops, [&](const auto& l) { return recompute(l, r); });
  // Megatron-Core's recompute modules other than the attention core alone: what selective
  // recompute keeps and re-runs, one walk of each layer kind (weighted by its layers).
  if (setup.recompute_modules != model::kRecomputeCoreAttn && ops.num_layers > 0) {
    double kept = 0, flops = 0;
    for (const auto& kind : ops.layers) {
      const double w = static_cast<double>(kind.num_layers) / static_cast<double>(ops.num_layers);
      const ModuleRecompute mr = module_recompute(kind.ops, setup.recompute_modules);
      kept += w * (framework_saved_bytes(without_saved(kind.ops, mr.dropped), true, fw, fp32) +
                   copies(kind.ops));
      for (std::size_t i = 0; i < kind.ops.size(); ++i)
        flops += mr.rerun[i] ? w * rerun_flops(kind.ops[i]) : 0.0;
    }
    a.layer_act[static_cast<int>(Recompute::selective)] = kept;
    a.layer_recompute_flops[static_cast<int>(Recompute::selective)] = flops;
  }
  a.emb_params = model::sum_params(ops.embedding);
  // The MTP modules' weights sit with the head; their routed experts split over ep.
  a.head_params =
      model::sum_params(ops.head) + modules * (model::sum_params(ops.mtp) - expert(ops.mtp) +
                                               expert(ops.mtp) / static_cast<double>(plan.ep));
  // With tied embeddings and pp > 1 the last stage keeps its own copy of the table (Megatron).
  a.tied_copy_params = m.tied_embeddings ? static_cast<double>(m.vocab_size * m.hidden_size) /
                                               static_cast<double>(plan.tp)
                                         : 0;
  if (fw.caching_allocator)
    list_tensors(a, ops, plan, fw, fp32, act_factor, autocast);
  return a;
}

MicroBatchTimes time_micro_batch(const model::ModelSpec& /*m*/, const model::OpList& ops,
                                 const model::ParallelPlan& plan, const model::TrainingSetup& setup,
                                 const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                                 const hw::ClusterSpec& cluster, const FrameworkProfile& fw) {
  const Placement pl = place_groups(plan, cluster);
  MicroBatchTimes t;
  // Per layer kind, then the mean over layers (exact totals over the model).
  for (const auto& kind : ops.layers) {
    const double w = static_cast<double>(kind.num_layers) / static_cast<double>(ops.num_layers);
    const PassTime lf = pass_time(kind.ops, Pass::forward, gpu, profile, cluster, pl.tp, fw);
    const PassTime lb = pass_time(kind.ops, Pass::backward, gpu, profile, cluster, pl.tp, fw);
    t.layer_fwd += w * lf.compute;
    t.layer_bwd += w * lb.compute;
    t.layer_tp_fwd += w * lf.tp;
    t.layer_tp_bwd += w * lb.tp;
    t.layer_fwd_host += w * lf.host;
    t.layer_bwd_host += w * lb.host;
    const OpSac sac = op_sac(kind.ops);
    // Selective recompute: the attention core, or the modules Megatron-Core is told to re-run
    // (TrainingSetup::recompute_modules), with the collectives inside them.
    const bool default_modules = setup.recompute_modules == model::kRecomputeCoreAttn;
    const ModuleRecompute modules =
        default_modules ? ModuleRecompute{} : module_recompute(kind.ops, setup.recompute_modules);
    for (std::size_t i = 0; i < kind.ops.size(); ++i) {
      const model::Op& op = kind.ops[i];
      if (!default_modules && modules.rerun[i] && op.kind == model::OpKind::tp_comm &&
          op.fwd_comm != model::CommKind::none)
        t.layer_tp_rerun_selective +=
            w * collective_cost(to_collective(op.fwd_comm), op.comm_bytes, pl.tp, cluster, profile)
                    .time_s;
      if (model::is_communication(op.kind))
        continue;
      const FrameworkOpTime f = framework_op_time(op, Pass::forward, gpu, profile, fw);
      t.layer_sac_dispatch_host += w * f.kernels * fw.host_s_per_sac_kernel;
      t.layer_recompute[static_cast<int>(Recompute::full)] += w * f.gpu_s;
      t.layer_recompute_host[static_cast<int>(Recompute::full)] += w * f.host_s;
      const double part = sac.recompute_fraction[i];
      t.layer_recompute[static_cast<int>(Recompute::selective_op)] += w * part * f.gpu_s;
      t.layer_recompute_host[static_cast<int>(Recompute::selective_op)] +=
          part > 0 ? w * f.host_s : 0.0;
      // Selective recompute checkpoints the attention core and re-runs its forward in
      // backward: naive attention's pieces, or the fused (flash) core (Megatron-Core's
      // core_attn, torch.utils.checkpoint around SDPA, validate/train).
      if (default_modules ? model::is_attention_part(op.role) : modules.rerun[i] != 0) {
        t.layer_recompute[static_cast<int>(Recompute::selective)] += w * f.gpu_s;
        t.layer_recompute_host[static_cast<int>(Recompute::selective)] += w * f.host_s;
      }
    }
    // Context parallel (ring attention). The op list saves K and V over the whole sequence
    // (what attention reads across the ring); a rank holds and sends its 1/cp share.
    if (plan.cp > 1) {
      double kv_bytes = 0, kv_sent = 0;
      for (const auto& op : kind.ops)
        for (const auto& sv : op.saved)
          if (sv.role == model::TensorRole::attention_k ||
              sv.role == model::TensorRole::attention_v) {
            kv_bytes += sv.bytes;
            // As SDPA gets them: at every query head's width where the code repeats them.
            kv_sent += sv.bytes * (fw.expand_kv_heads ? sv.kv_group : 1.0);
          }
      const double c = static_cast<double>(plan.cp);
      auto attention = [&](auto&& time) {
        double sum = 0;
        for (const auto& op : kind.ops)
          if (op.role == model::OpRole::attention_core ||
              op.role == model::OpRole::attention_scores || op.role == model::OpRole::attention_pv)
            sum += time(op);
        return sum;
      };
      if (fw.cp_ring == FrameworkProfile::CpRing::torch_allgather) {
        // PyTorch's ring attention (FrameworkProfile::cp_ring): per pass the K/V of all ranks
        // are all-gathered once and waited for after the first of cp equal steps (the
        // load-balanced split); backward also sends dK/dV in fp32 to the next rank after each
        // step, waited for after the next step, the last at once.
        const double step_fwd =
            attention([&](const model::Op& op) {
              return framework_op_time(op, Pass::forward, gpu, profile, fw).gpu_s;
            }) /
            c;
        const double step_bwd =
            attention([&](const model::Op& op) {
              return framework_op_time(op, Pass::backward, gpu, profile, fw).gpu_s;
            }) /
            c;
        const double local_kv = kv_sent / c;
        const double gather =
            collective_cost(Collective::all_gather, c * local_kv, pl.cp, cluster, profile).time_s;
        const double dkv = // fp32 gradients of the 16-bit K and V
            collective_cost(Collective::send_recv, 2 * local_kv, pl.cp, cluster, profile).time_s;
        const double fwd = std::max(0.0, gather - step_fwd);
        const double bwd =
            std::max(0.0, gather - step_bwd) + (c - 1) * std::max(0.0, dkv - step_bwd) + dkv;
        t.layer_cp += w * (fwd + bwd);
        t.layer_cp_recompute += w * fwd; // the re-run forward rotates K/V again
      } else {
        // p2p (Transformer Engine's ring): K and V chunks go around the ring c-1 times in
        // forward, K, V, dK, dV in backward; overlapped with the attention core.
        const double attn_s = attention([&](const model::Op& op) {
          return op_cost(op, Pass::forward, gpu, profile).queued_s +
                 op_cost(op, Pass::backward, gpu, profile).queued_s;
        });
        const double comm =
            3 * (c - 1) *
            collective_cost(Collective::send_recv, kv_bytes / c, pl.cp, cluster, profile).time_s;
        t.layer_cp += w * std::max(0.0, comm - attn_s);
      }
    }
    // Expert parallel: the op list's dispatch and combine all-to-alls, forward and backward,
    // sized by the busiest rank's routed tokens (capacity or imbalance factor); exposed.
    if (plan.ep > 1) {
      const EpTime a2a = ep_time(kind.ops, profile, cluster, pl.ep);
      t.layer_ep += w * a2a.total();
      t.layer_ep_a2a_fwd += w * a2a.fwd;
      t.layer_ep_a2a_bwd += w * a2a.bwd;
      // The recomputed MoE block dispatches and combines its tokens again.
      if ((setup.recompute_modules & model::kRecomputeMoe) != 0)
        t.layer_ep_rerun_selective += w * a2a.fwd;
    }
    // The token dispatcher's fixed cost per MoE layer (the framework's, with or without ep).
    if (std::any_of(kind.ops.begin(), kind.ops.end(),
                    [](const model::Op& op) { return op.role == model::OpRole::router; }))
      t.layer_ep += w * fw.moe_dispatch_s_per_layer;
  }
  const PassTime ef = pass_time(ops.embedding, Pass::forward, gpu, profile, cluster, pl.tp, fw);
  const PassTime eb = pass_time(ops.embedding, Pass::backward, gpu, profile, cluster, pl.tp, fw);
  const PassTime hf = pass_time(ops.head, Pass::forward, gpu, profile, cluster, pl.tp, fw);
  const PassTime hb = pass_time(ops.head, Pass::backward, gpu, profile, cluster, pl.tp, fw);
  t.emb_fwd_host = ef.host;
  t.emb_bwd_host = eb.host;
  t.head_fwd_host = hf.host;
  t.head_bwd_host = hb.host;
  t.emb_fwd = ef.compute;
  t.emb_bwd = eb.compute;
  t.emb_tp = ef.tp + eb.tp;
  t.head_fwd = hf.compute;
  t.head_bwd = hb.compute;
  t.head_tp = hf.tp + hb.tp;
  if (ops.num_mtp_modules > 0) { // on the last stage, after the head
    const double n = static_cast<double>(ops.num_mtp_modules);
    const PassTime mf = pass_time(ops.mtp, Pass::forward, gpu, profile, cluster, pl.tp, fw);
    const PassTime mb = pass_time(ops.mtp, Pass::backward, gpu, profile, cluster, pl.tp, fw);
    t.head_fwd += n * mf.compute;
    t.head_bwd += n * mb.compute;
    t.head_tp += n * (mf.tp + mb.tp +
                      (plan.ep > 1 ? ep_time(ops.mtp, profile, cluster, pl.ep).total() : 0.0));
  }
  return t;
}

} // namespace trainsim::sim
