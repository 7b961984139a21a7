// build_ops(): the per-GPU operator list of a decoder-only transformer (see ops.hpp).
// Layer structure (pre-norm): norm -> QKV -> RoPE -> attention -> out-proj -> dropout ->
// residual; norm -> FFN (fc1 -> activation -> fc2, or router + experts) -> dropout ->
// residual. Tensor parallelism follows Megatron-LM (Shoeybi et al. 2019): QKV/fc1 split by
// columns, out-proj/fc2 by rows, an all-reduce after each block in forward and before each
// in backward; with sequence parallelism (Korthikanti et al. 2022) norms and dropout work on
// s/t tokens and the all-reduces become all-gather + reduce-scatter pairs. Saved tensors
// follow Korthikanti et al. 2022, Section 4.1 (what each op keeps for its backward).
#include "model/ops.hpp"

#include <set>

namespace trainsim::model {
namespace {

struct Dims {
  double b, s, tokens, tokens_norm, h, e; // e = bytes per activation element
  double heads, kv_heads, d, t;
  Dtype linear = Dtype::bf16; // the linear layers' GEMM dtype
  double e_saved_linear = 2;  // bytes per element a linear layer saves of its input (fp8: 1)
  [[nodiscard]] bool fp8() const { return linear == Dtype::fp8; }
};

} // namespace

std::string_view to_string(OpRole r) {
  switch (r) {
  case OpRole::other: return "other";
  case OpRole::embedding: return "embedding";
  case OpRole::position: return "position";
  case OpRole::norm: return "norm";
  case OpRole::qkv_proj: return "qkv_proj";
  case OpRole::rope: return "rope";
  case OpRole::attention_core: return "attention_core";
  case OpRole::attention_scores: return "attention_scores";
  case OpRole::attention_softmax: return "attention_softmax";
  case OpRole::attention_dropout: return "attention_dropout";
  case OpRole::attention_pv: return "attention_pv";
  case OpRole::out_proj: return "out_proj";
  case OpRole::dropout: return "dropout";
  case OpRole::residual: return "residual";
  case OpRole::ffn_up: return "ffn_up";
  case OpRole::ffn_act: return "ffn_act";
  case OpRole::ffn_down: return "ffn_down";
  case OpRole::router: return "router";
  case OpRole::expert_up: return "expert_up";
  case OpRole::expert_act: return "expert_act";
  case OpRole::expert_down: return "expert_down";
  case OpRole::expert_combine: return "expert_combine";
  case OpRole::lm_head: return "lm_head";
  case OpRole::loss: return "loss";
  case OpRole::quantize: return "quantize";
  case OpRole::tp_comm: return "tp_comm";
  case OpRole::count_: break;
  }
  return "?";
}

bool is_naive_attention_part(OpRole r) {
  return r == OpRole::attention_scores || r == OpRole::attention_softmax ||
         r == OpRole::attention_dropout || r == OpRole::attention_pv;
}

bool is_attention_part(OpRole r) {
  return r == OpRole::attention_core || is_naive_attention_part(r);
}

bool is_routed_expert(OpRole r) {
  return r == OpRole::expert_up || r == OpRole::expert_act || r == OpRole::expert_down;
}

Op gemm_op(std::string name, OpRole role, Dtype dtype, double m, double k, double n, double count,
           double params, double e) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::gemm;
  op.role = role;
  op.dtype = dtype;
  op.m = static_cast<std::int64_t>(m + 0.5);
  op.k = static_cast<std::int64_t>(k + 0.5);
  op.n = static_cast<std::int64_t>(n + 0.5);
  op.count = count;
  op.params = params;
  op.fwd_flops = 2.0 * m * n * k * count; // one multiply-add = 2 FLOPs
  op.bwd_flops = 2.0 * op.fwd_flops;      // dgrad + wgrad
  op.fwd_exec_flops = op.fwd_flops;
  op.bwd_exec_flops = op.bwd_flops;
  op.fwd_bytes = e * (m * k + k * n + m * n) * count; // read A, B; write C (beta = 0)
  op.fwd_bytes_written = e * m * n * count;
  // dgrad reads dy and W, writes dx; wgrad reads x and dy, writes dW.
  op.bwd_bytes = e * (2 * m * n + 2 * k * n + 2 * m * k) * count;
  op.bwd_bytes_written = e * (m * k + k * n) * count;
  return op;
}

Op memory_op(std::string name, OpKind kind, OpRole role, Dtype dtype, double elements_in,
             double elements_out, double e, double flops_per_element) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.role = role;
  op.dtype = dtype;
  op.fwd_bytes = e * (elements_in + elements_out);
  op.fwd_bytes_written = e * elements_out;
  // Backward reads the saved input(s) and the output gradient, writes the input gradient.
  op.bwd_bytes = e * (2 * elements_in + elements_out);
  op.bwd_bytes_written = e * elements_in;
  op.fwd_exec_flops = flops_per_element * elements_out;
  op.bwd_exec_flops = 2 * flops_per_element * elements_out;
  return op;
}

Op flash_attention_op(std::string name, Dtype dtype, double b, double heads, double seq_q,
                      double seq_kv, double head_dim, double kv_heads, bool causal) {
  const double e = dtype_bytes(dtype);
  Op core;
  core.name = std::move(name);
  core.kind = OpKind::attention_core;
  core.role = OpRole::attention_core;
  core.dtype = dtype;
  core.batch = static_cast<std::int64_t>(b);
  core.heads = static_cast<std::int64_t>(heads);
  core.seq_q = static_cast<std::int64_t>(seq_q);
  core.seq_kv = static_cast<std::int64_t>(seq_kv);
  core.head_dim = static_cast<std::int64_t>(head_dim);
  core.causal = causal;
  // Model FLOPs: Q K^T and P V over the full s x s (Narayanan et al. 2021 Eq. 3 convention);
  // a causal kernel skips the masked tiles (about half); the backward recomputes Q K^T
  // (2.5x the forward, Dao 2023).
  const double fwd = 4.0 * b * heads * seq_q * seq_kv * head_dim;
  core.fwd_flops = fwd;
  core.bwd_flops = 2 * fwd;
  core.fwd_exec_flops = causal ? fwd / 2 : fwd;
  core.bwd_exec_flops = 2.5 * core.fwd_exec_flops;
  const double q_bytes = b * seq_q * heads * head_dim * e;
  const double kv_bytes = b * seq_kv * kv_heads * head_dim * e;
  const double lse_bytes = b * heads * seq_q * 4;
  core.fwd_bytes = 2 * q_bytes + 2 * kv_bytes + lse_bytes; // read Q, K, V; write O, lse
  core.fwd_bytes_written = q_bytes + lse_bytes;
  // Backward reads Q, K, V, O, dO and lse, writes dQ, dK, dV.
  core.bwd_bytes_written = q_bytes + 2 * kv_bytes;
  core.bwd_bytes = 3 * q_bytes + 2 * kv_bytes + lse_bytes + core.bwd_bytes_written;
  core.saved = {{"attn.q", q_bytes, false},
                {"attn.k", kv_bytes, false, TensorRole::attention_k},
                {"attn.v", kv_bytes, false, TensorRole::attention_v},
                {"attn.o", q_bytes, false},
                {"attn.lse", b * heads * seq_q * 4.0, false}};
  return core;
}

namespace {

Op comm(std::string name, CommKind fwd, CommKind bwd, double bytes) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::tp_comm;
  op.role = OpRole::tp_comm;
  op.fwd_comm = fwd;
  op.bwd_comm = bwd;
  op.comm_bytes = bytes;
  return op;
}

double norm_params(const ModelSpec& m) {
  return m.norm == NormKind::layernorm ? 2.0 * m.hidden_size : 1.0 * m.hidden_size;
}

// A norm over `tokens` rows of width h: saves its input and per-row statistics (fp32 rstd,
// plus fp32 mean for LayerNorm).
Op norm_op(const std::string& prefix, const ModelSpec& m, const Dims& d, Dtype dtype,
           const std::string& input_id, TensorRole input_role = TensorRole::other) {
  Op op = memory_op(prefix + ".norm", OpKind::norm, OpRole::norm, dtype, d.tokens_norm * d.h,
                    d.tokens_norm * d.h, d.e, m.norm == NormKind::layernorm ? 8 : 5);
  op.params = norm_params(m);
  op.saved.push_back({input_id, d.tokens_norm * d.h * d.e, false, input_role});
  const double stats = m.norm == NormKind::layernorm ? 2.0 : 1.0;
  op.saved.push_back({prefix + ".norm.stats", d.tokens_norm * 4.0 * stats, false});
  return op;
}

void add_tp_in(std::vector<Op>& ops, const std::string& prefix, const Dims& d, bool sp) {
  if (d.t <= 1)
    return;
  const double bytes = d.tokens * d.h * d.e; // the full [b, s, h] activation
  ops.push_back(sp ? comm(prefix + ".tp_in", CommKind::all_gather, CommKind::reduce_scatter, bytes)
                   : comm(prefix + ".tp_in", CommKind::none, CommKind::all_reduce, bytes));
}

void add_tp_out(std::vector<Op>& ops, const std::string& prefix, const Dims& d, bool sp) {
  if (d.t <= 1)
    return;
  const double bytes = d.tokens * d.h * d.e;
  ops.push_back(sp ? comm(prefix + ".tp_out", CommKind::reduce_scatter, CommKind::all_gather, bytes)
                   : comm(prefix + ".tp_out", CommKind::all_reduce, CommKind::none, bytes));
}

void add_dropout_residual(std::vector<Op>& ops, const std::string& prefix, const ModelSpec& m,
                          const Dims& d, Dtype dtype) {
  const double n = d.tokens_norm * d.h;
  if (m.dropout) {
    Op drop =
        memory_op(prefix + ".dropout", OpKind::elementwise, OpRole::dropout, dtype, n, n, d.e, 2);
    drop.saved.push_back({prefix + ".dropout.mask", n * 1.0, false}); // 1-byte mask
    ops.push_back(drop);
  }
  ops.push_back(memory_op(prefix + ".residual", OpKind::elementwise, OpRole::residual, dtype, 2 * n,
                          n, d.e, 1));
}

// FP8 cast of a linear layer's input (Transformer Engine): read the 16-bit tensor, write its
// FP8 copy and the transposed FP8 copy the weight gradient needs (Hopper's FP8 GEMMs take only
// the TN layout); in backward the same for the output gradient. The casts before QKV and fc1
// are fused into the preceding norm (TE's LayerNormLinear), so only these two are separate.
Op quantize_op(const std::string& name, double elements, double e) {
  return memory_op(name, OpKind::elementwise, OpRole::quantize, Dtype::bf16, elements, elements, e,
                   2);
}

// A dense FFN on `tokens` rows (also used for shared experts): fc1 -> act -> fc2.
void add_dense_ffn(std::vector<Op>& ops, const std::string& prefix, const ModelSpec& m,
                   const Dims& d, Dtype dtype, double ffn, const std::string& input_id) {
  const bool gated = m.ffn == FfnKind::gated;
  const double f_local = ffn / d.t;
  const double fc1_n = (gated ? 2.0 : 1.0) * f_local;
  Op fc1 = gemm_op(prefix + ".fc1", OpRole::ffn_up, d.linear, d.tokens, d.h, fc1_n, 1,
                   d.h * fc1_n + (m.mlp_bias ? fc1_n : 0), d.e);
  fc1.saved.push_back({input_id, d.tokens_norm * d.h * d.e_saved_linear, false});
  ops.push_back(fc1);
  Op act = memory_op(prefix + (gated ? ".swiglu" : ".gelu"), OpKind::elementwise, OpRole::ffn_act,
                     dtype, d.tokens * fc1_n, d.tokens * f_local, d.e, gated ? 6 : 8);
  act.saved.push_back({prefix + ".fc1.out", d.tokens * fc1_n * d.e, false});
  ops.push_back(act);
  if (d.fp8())
    ops.push_back(quantize_op(prefix + ".fc2.quantize", d.tokens * f_local, d.e));
  Op fc2 = gemm_op(prefix + ".fc2", OpRole::ffn_down, d.linear, d.tokens, f_local, d.h, 1,
                   f_local * d.h + (m.mlp_bias ? d.h : 0), d.e);
  fc2.saved.push_back({prefix + ".act.out", d.tokens * f_local * d.e_saved_linear, false});
  ops.push_back(fc2);
}

} // namespace

OpContext make_op_context(const ParallelPlan& plan, const TrainingSetup& setup) {
  OpContext ctx;
  ctx.micro_batch_size = setup.micro_batch_size;
  ctx.seq_len = setup.seq_len;
  ctx.dtype = compute_dtype(setup.precision);
  ctx.linear_dtype = is_fp8(setup.precision) ? Dtype::fp8 : ctx.dtype;
  ctx.attention = setup.attention;
  ctx.tp = plan.tp;
  ctx.cp = plan.cp;
  ctx.sequence_parallel = plan.sequence_parallel && plan.tp > 1;
  return ctx;
}

OpList build_ops(const ModelSpec& m, const OpContext& ctx) {
  const Dtype dt = ctx.dtype;
  const bool sp = ctx.sequence_parallel && ctx.tp > 1;
  Dims d{};
  d.b = static_cast<double>(ctx.micro_batch_size);
  d.s = static_cast<double>(ctx.seq_len) / static_cast<double>(ctx.cp); // local sequence
  d.tokens = d.b * d.s;
  d.t = static_cast<double>(ctx.tp);
  d.tokens_norm = sp ? d.tokens / d.t : d.tokens;
  d.h = static_cast<double>(m.hidden_size);
  d.e = dtype_bytes(dt);
  d.heads = static_cast<double>(m.num_heads) / d.t;
  d.kv_heads = static_cast<double>(m.num_kv_heads) / d.t;
  d.d = static_cast<double>(m.head_dim);
  d.linear = ctx.linear_dtype;
  // Transformer Engine keeps the FP8 copy of a linear layer's input for its weight gradient
  // (one byte per element) instead of the 16-bit one.
  d.e_saved_linear = d.fp8() ? 1.0 : d.e;
  const double full_seq = static_cast<double>(ctx.seq_len);
  const double V = static_cast<double>(m.vocab_size);
  // With sequence parallelism a GEMM's input is all-gathered; the saved copy is the local
  // shard (Korthikanti et al. 2022, Sec. 4.2.2), hence the "_sp" suffix on those ids.
  const std::string in_suffix = sp ? ".in_sp" : ".in";

  OpList list;
  list.num_layers = m.num_layers;

  // ---- embedding (first pipeline stage) ----
  {
    Op embed;
    embed.name = "embed.tokens";
    embed.kind = OpKind::embedding;
    embed.role = OpRole::embedding;
    embed.dtype = dt;
    embed.params = V * d.h / d.t;               // vocab-parallel table
    embed.fwd_bytes = 2 * d.tokens * d.h * d.e; // gather rows, write output
    embed.bwd_bytes = 2 * d.tokens * d.h * d.e; // scatter-add into the table gradient
    list.embedding.push_back(embed);
    if (d.t > 1) {
      const double bytes = d.tokens * d.h * d.e;
      list.embedding.push_back(
          sp ? comm("embed.tp_out", CommKind::reduce_scatter, CommKind::all_gather, bytes)
             : comm("embed.tp_out", CommKind::all_reduce, CommKind::none, bytes));
    }
    if (m.position == PositionKind::learned) {
      const double n = d.tokens_norm * d.h;
      Op pos =
          memory_op("embed.positions", OpKind::elementwise, OpRole::position, dt, 2 * n, n, d.e, 1);
      pos.params = static_cast<double>(m.max_seq_len) * d.h; // replicated over tp
      list.embedding.push_back(pos);
    }
    if (m.dropout) {
      const double n = d.tokens_norm * d.h;
      Op drop = memory_op("embed.dropout", OpKind::elementwise, OpRole::dropout, dt, n, n, d.e, 2);
      drop.saved.push_back({"embed.dropout.mask", n, false});
      list.embedding.push_back(drop);
    }
  }

  // ---- one transformer layer ----
  auto& L = list.layer;
  L.push_back(norm_op("attn", m, d, dt, "layer.in", TensorRole::layer_input));
  add_tp_in(L, "attn", d, sp);
  {
    const double q_n = d.heads * d.d, kv_n = d.kv_heads * d.d;
    const double n = q_n + 2 * kv_n;
    Op qkv = gemm_op("attn.qkv", OpRole::qkv_proj, d.linear, d.tokens, d.h, n, 1,
                     d.h * n + (m.qkv_bias ? n : 0), d.e);
    qkv.saved.push_back({"attn.qkv" + in_suffix, d.tokens_norm * d.h * d.e_saved_linear, false});
    L.push_back(qkv);
    if (m.position == PositionKind::rotary) {
      const double elems = d.tokens * (q_n + kv_n);
      L.push_back(
          memory_op("attn.rope", OpKind::elementwise, OpRole::rope, dt, elems, elems, d.e, 3));
    }
    const double q_bytes = d.tokens * q_n * d.e, kv_bytes = d.tokens * kv_n * d.e;
    // Each query attends to seq_len keys (with context parallelism the local s/cp queries
    // see all keys as K/V chunks circulate).
    if (ctx.attention == AttentionImpl::flash) {
      L.push_back(
          flash_attention_op("attn.core", dt, d.b, d.heads, d.s, full_seq, d.d, d.kv_heads, true));
    } else {
      // Naive: a batched GEMM for the scores, softmax (+ dropout), a batched GEMM with V.
      // Scores and probabilities are [b, heads, s, s] tensors (Korthikanti's 5as^2b term).
      const double bh = d.b * d.heads;
      Op scores =
          gemm_op("attn.scores", OpRole::attention_scores, dt, d.s, d.d, full_seq, bh, 0, d.e);
      scores.saved = {{"attn.q", q_bytes, false},
                      {"attn.k", kv_bytes, false, TensorRole::attention_k}};
      L.push_back(scores);
      const double sq = bh * d.s * full_seq;
      Op softmax = memory_op("attn.softmax", OpKind::reduction, OpRole::attention_softmax, dt, sq,
                             sq, d.e, 5);
      softmax.saved.push_back({"attn.probs", sq * d.e, true});
      L.push_back(softmax);
      std::string probs_id = "attn.probs";
      if (m.dropout) {
        Op drop = memory_op("attn.probs_dropout", OpKind::elementwise, OpRole::attention_dropout,
                            dt, sq, sq, d.e, 2);
        drop.saved.push_back({"attn.probs.mask", sq, true});
        L.push_back(drop);
        probs_id = "attn.probs_dropped";
      }
      Op pv = gemm_op("attn.pv", OpRole::attention_pv, dt, d.s, full_seq, d.d, bh, 0, d.e);
      pv.saved = {{probs_id, sq * d.e, true}, {"attn.v", kv_bytes, false, TensorRole::attention_v}};
      L.push_back(pv);
    }
    if (d.fp8())
      L.push_back(quantize_op("attn.out.quantize", d.tokens * q_n, d.e));
    Op out = gemm_op("attn.out", OpRole::out_proj, d.linear, d.tokens, q_n, d.h, 1,
                     q_n * d.h + (m.out_bias ? d.h : 0), d.e);
    // Its input is the attention output (saved by flash attention too: one tensor), or its FP8
    // copy under FP8 training (a tensor of its own).
    if (d.fp8())
      out.saved.push_back({"attn.o.fp8", d.tokens * q_n * d.e_saved_linear, false});
    else
      out.saved.push_back({"attn.o", q_bytes, false});
    L.push_back(out);
  }
  add_tp_out(L, "attn", d, sp);
  add_dropout_residual(L, "attn", m, d, dt);

  L.push_back(norm_op("mlp", m, d, dt, "mlp.norm.in"));
  add_tp_in(L, "mlp", d, sp);
  const std::string ffn_in = "mlp.fc1" + in_suffix;
  if (!m.is_moe()) {
    add_dense_ffn(L, "mlp", m, d, dt, static_cast<double>(m.ffn_hidden_size), ffn_in);
  } else {
    const double E = static_cast<double>(m.num_experts);
    const double k = static_cast<double>(m.top_k);
    Op router = gemm_op("moe.router", OpRole::router, dt, d.tokens, d.h, E, 1, d.h * E, d.e);
    router.saved.push_back({ffn_in, d.tokens_norm * d.h * d.e, false});
    L.push_back(router);
    // Routed tokens: tokens x top_k rows spread over E experts (balanced routing assumed).
    const bool gated = m.ffn == FfnKind::gated;
    const double f_local = static_cast<double>(m.expert_ffn_hidden_size) / d.t;
    const double fc1_n = (gated ? 2.0 : 1.0) * f_local;
    const double routed = d.tokens * k;
    const double rows_per_expert = routed / E;
    Op fc1 = gemm_op("moe.experts.fc1", OpRole::expert_up, d.linear, rows_per_expert, d.h, fc1_n, E,
                     d.h * fc1_n + (m.mlp_bias ? fc1_n : 0), d.e);
    fc1.params *= E;
    fc1.saved.push_back({"moe.experts.in", routed * d.h * d.e_saved_linear, false});
    L.push_back(fc1);
    Op act =
        memory_op(gated ? "moe.experts.swiglu" : "moe.experts.gelu", OpKind::elementwise,
                  OpRole::expert_act, dt, routed * fc1_n, routed * f_local, d.e, gated ? 6 : 8);
    act.saved.push_back({"moe.experts.fc1.out", routed * fc1_n * d.e, false});
    L.push_back(act);
    Op fc2 = gemm_op("moe.experts.fc2", OpRole::expert_down, d.linear, rows_per_expert, f_local,
                     d.h, E, f_local * d.h + (m.mlp_bias ? d.h : 0), d.e);
    fc2.params *= E;
    fc2.saved.push_back({"moe.experts.act.out", routed * f_local * d.e_saved_linear, false});
    L.push_back(fc2);
    // Combining expert outputs weights each by its router probability.
    Op combine = memory_op("moe.combine", OpKind::elementwise, OpRole::expert_combine, dt,
                           routed * d.h, d.tokens * d.h, d.e, 2);
    combine.saved.push_back({"moe.router.probs", d.tokens * E * 4.0, false});
    L.push_back(combine);
    if (m.num_shared_experts > 0) {
      add_dense_ffn(L, "moe.shared", m, d, dt,
                    static_cast<double>(m.num_shared_experts * m.expert_ffn_hidden_size), ffn_in);
    }
  }
  add_tp_out(L, "mlp", d, sp);
  add_dropout_residual(L, "mlp", m, d, dt);

  // ---- head (last pipeline stage) ----
  list.head.push_back(norm_op("head", m, d, dt, "head.norm.in"));
  add_tp_in(list.head, "head", d, sp);
  {
    Op lm = gemm_op("head.lm", OpRole::lm_head, dt, d.tokens, d.h, V / d.t, 1,
                    m.tied_embeddings ? 0 : d.h * V / d.t, d.e);
    lm.saved.push_back({"head.lm" + in_suffix, d.tokens_norm * d.h * d.e, false});
    list.head.push_back(lm);
    // Cross-entropy in fp32 over the (vocab-parallel) logits: the fp32 softmax is saved.
    Op loss = memory_op("loss", OpKind::reduction, OpRole::loss, Dtype::fp32, d.tokens * V / d.t,
                        d.tokens * V / d.t, 4.0, 5);
    loss.fwd_bytes = d.tokens * V / d.t * (d.e + 4.0 + 4.0);
    loss.saved.push_back({"loss.softmax", d.tokens * V / d.t * 4.0, false});
    list.head.push_back(loss);
  }
  return list;
}

double saved_bytes(const std::vector<Op>& ops, bool include_quadratic) {
  std::set<std::string> seen;
  double total = 0;
  for (const auto& op : ops)
    for (const auto& t : op.saved) {
      if (t.quadratic && !include_quadratic)
        continue;
      if (seen.insert(t.id).second)
        total += t.bytes;
    }
  return total;
}

double sum_params(const std::vector<Op>& ops) {
  double s = 0;
  for (const auto& op : ops)
    s += op.params;
  return s;
}
double sum_fwd_flops(const std::vector<Op>& ops) {
  double s = 0;
  for (const auto& op : ops)
    s += op.fwd_flops;
  return s;
}
double sum_bwd_flops(const std::vector<Op>& ops) {
  double s = 0;
  for (const auto& op : ops)
    s += op.bwd_flops;
  return s;
}

} // namespace trainsim::model
