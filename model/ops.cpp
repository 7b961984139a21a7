// build_ops(): the per-GPU operator list of a decoder-only transformer (see ops.hpp).
// Layer structure (pre-norm): norm -> QKV (or MLA's down/up projections) -> [QK-norm] -> RoPE
// -> attention -> out-proj -> [post-norm] -> dropout -> residual; norm -> FFN (fc1 ->
// activation -> fc2, or router + experts) -> [post-norm] -> dropout -> residual; a parallel
// block runs both branches from the layer input and adds them once. Tensor parallelism
// follows Megatron-LM (Shoeybi et al. 2019): QKV/fc1 split by columns, out-proj/fc2 by rows,
// an all-reduce after each block in forward and before each in backward; with sequence
// parallelism (Korthikanti et al. 2022) norms and dropout work on s/t tokens and the
// all-reduces become all-gather + reduce-scatter pairs. Saved tensors follow Korthikanti et
// al. 2022, Section 4.1 (what each op keeps for its backward).
#include "model/ops.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace trainsim::model {
namespace {

struct Dims {
  double b, s, tokens, tokens_norm, h, e; // e = bytes per activation element
  double heads, kv_heads, d, t;
};

} // namespace

bool is_communication(OpKind k) { return k == OpKind::tp_comm || k == OpKind::ep_comm; }

std::string_view to_string(OpRole r) {
  switch (r) {
  case OpRole::other: return "other";
  case OpRole::embedding: return "embedding";
  case OpRole::position: return "position";
  case OpRole::norm: return "norm";
  case OpRole::qkv_proj: return "qkv_proj";
  case OpRole::q_down_proj: return "q_down_proj";
  case OpRole::q_up_proj: return "q_up_proj";
  case OpRole::kv_down_proj: return "kv_down_proj";
  case OpRole::kv_up_proj: return "kv_up_proj";
  case OpRole::latent_norm: return "latent_norm";
  case OpRole::qk_norm: return "qk_norm";
  case OpRole::rope: return "rope";
  case OpRole::attention_core: return "attention_core";
  case OpRole::attention_scores: return "attention_scores";
  case OpRole::attention_softmax: return "attention_softmax";
  case OpRole::attention_softcap: return "attention_softcap";
  case OpRole::attention_dropout: return "attention_dropout";
  case OpRole::attention_pv: return "attention_pv";
  case OpRole::out_proj: return "out_proj";
  case OpRole::dropout: return "dropout";
  case OpRole::residual: return "residual";
  case OpRole::ffn_up: return "ffn_up";
  case OpRole::ffn_act: return "ffn_act";
  case OpRole::ffn_down: return "ffn_down";
  case OpRole::router: return "router";
  case OpRole::router_topk: return "router_topk";
  case OpRole::router_aux_loss: return "router_aux_loss";
  case OpRole::expert_permute: return "expert_permute";
  case OpRole::ep_dispatch: return "ep_dispatch";
  case OpRole::ep_combine: return "ep_combine";
  case OpRole::expert_up: return "expert_up";
  case OpRole::expert_act: return "expert_act";
  case OpRole::expert_down: return "expert_down";
  case OpRole::expert_combine: return "expert_combine";
  case OpRole::lm_head: return "lm_head";
  case OpRole::logit_softcap: return "logit_softcap";
  case OpRole::loss: return "loss";
  case OpRole::mtp_proj: return "mtp_proj";
  case OpRole::quantize: return "quantize";
  case OpRole::tp_comm: return "tp_comm";
  case OpRole::count_: break;
  }
  return "?";
}

bool is_naive_attention_part(OpRole r) {
  return r == OpRole::attention_scores || r == OpRole::attention_softcap ||
         r == OpRole::attention_softmax || r == OpRole::attention_dropout ||
         r == OpRole::attention_pv;
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

double model_keys_per_query(double seq_kv, double window) {
  if (window <= 0 || window >= seq_kv)
    return seq_kv;
  return 2 * window - window * window / seq_kv;
}

double executed_keys_per_query(double seq_kv, double window, bool causal) {
  const bool windowed = window > 0 && window < seq_kv;
  if (!causal)
    return windowed ? window : seq_kv;
  return windowed ? window - window * window / (2 * seq_kv) : seq_kv / 2;
}

Op flash_attention_op(std::string name, Dtype dtype, const AttentionShape& a) {
  const double e = dtype_bytes(dtype);
  const double dv = a.v_head_dim > 0 ? a.v_head_dim : a.head_dim;
  Op core;
  core.name = std::move(name);
  core.kind = OpKind::attention_core;
  core.role = OpRole::attention_core;
  core.dtype = dtype;
  core.batch = static_cast<std::int64_t>(a.batch);
  core.heads = static_cast<std::int64_t>(a.heads);
  core.seq_q = static_cast<std::int64_t>(a.seq_q);
  core.seq_kv = static_cast<std::int64_t>(a.seq_kv);
  core.head_dim = static_cast<std::int64_t>(a.head_dim);
  core.v_head_dim = static_cast<std::int64_t>(dv);
  core.window = static_cast<std::int64_t>(a.window);
  core.causal = a.causal;
  // Q K^T costs 2 d FLOPs per (query, key) pair and P V 2 dv. Model FLOPs count the full
  // s x s product (Narayanan et al. 2021 Eq. 3 convention), or 2w - w^2/s keys per query under
  // a window; a causal kernel skips the masked tiles (about half); the backward recomputes
  // Q K^T (2.5x the forward, Dao 2023).
  const double per_key = 2.0 * a.batch * a.heads * a.seq_q * (a.head_dim + dv);
  core.fwd_flops = per_key * model_keys_per_query(a.seq_kv, a.window);
  core.bwd_flops = 2 * core.fwd_flops;
  core.fwd_exec_flops = per_key * executed_keys_per_query(a.seq_kv, a.window, a.causal);
  core.bwd_exec_flops = 2.5 * core.fwd_exec_flops;
  const double q_bytes = a.batch * a.seq_q * a.heads * a.head_dim * e;
  const double k_bytes = a.batch * a.seq_kv * a.kv_heads * a.head_dim * e;
  const double v_bytes = a.batch * a.seq_kv * a.kv_heads * dv * e;
  const double o_bytes = a.batch * a.seq_q * a.heads * dv * e;
  const double lse_bytes = a.batch * a.heads * a.seq_q * 4;
  core.fwd_bytes = q_bytes + k_bytes + v_bytes + o_bytes + lse_bytes; // read Q, K, V; write O, lse
  core.fwd_bytes_written = o_bytes + lse_bytes;
  // Backward reads Q, K, V, O, dO and lse, writes dQ, dK, dV.
  core.bwd_bytes_written = q_bytes + k_bytes + v_bytes;
  core.bwd_bytes = q_bytes + k_bytes + v_bytes + 2 * o_bytes + lse_bytes + core.bwd_bytes_written;
  const double group = a.kv_heads > 0 ? a.heads / a.kv_heads : 1.0;
  core.saved = {{"attn.q", q_bytes, false},
                {"attn.k", k_bytes, false, TensorRole::attention_k, group},
                {"attn.v", v_bytes, false, TensorRole::attention_v, group},
                {"attn.o", o_bytes, false},
                {"attn.lse", lse_bytes, false}};
  return core;
}

Op flash_attention_op(std::string name, Dtype dtype, double b, double heads, double seq_q,
                      double seq_kv, double head_dim, double kv_heads, bool causal) {
  AttentionShape a;
  a.batch = b;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.seq_q = seq_q;
  a.seq_kv = seq_kv;
  a.head_dim = head_dim;
  a.causal = causal;
  return flash_attention_op(std::move(name), dtype, a);
}

namespace {

Op comm(std::string name, OpRole role, OpKind kind, CommKind fwd, CommKind bwd, double bytes) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.role = role;
  op.fwd_comm = fwd;
  op.bwd_comm = bwd;
  op.comm_bytes = bytes;
  return op;
}

Op tp_comm(std::string name, CommKind fwd, CommKind bwd, double bytes) {
  return comm(std::move(name), OpRole::tp_comm, OpKind::tp_comm, fwd, bwd, bytes);
}

// Builds the ops of one layer, the head and the MTP module for one model and context.
class Builder {
 public:
  Builder(const ModelSpec& m, const OpContext& ctx) : m_(m), ctx_(ctx) {
    dt_ = ctx.dtype;
    lin_ = ctx.linear_dtype;
    sp_ = ctx.sequence_parallel && ctx.tp > 1;
    d_.b = static_cast<double>(ctx.micro_batch_size);
    d_.s = static_cast<double>(ctx.seq_len) / static_cast<double>(ctx.cp); // local sequence
    d_.tokens = d_.b * d_.s;
    d_.t = static_cast<double>(ctx.tp);
    d_.tokens_norm = sp_ ? d_.tokens / d_.t : d_.tokens;
    d_.h = static_cast<double>(m.hidden_size);
    d_.e = dtype_bytes(dt_);
    d_.heads = static_cast<double>(m.num_heads) / d_.t;
    d_.kv_heads = static_cast<double>(m.num_kv_heads) / d_.t;
    d_.d = static_cast<double>(m.head_dim);
    full_seq_ = static_cast<double>(ctx.seq_len);
    // With sequence parallelism a GEMM's input is all-gathered; the saved copy is the local
    // shard (Korthikanti et al. 2022, Sec. 4.2.2), hence the "_sp" suffix on those ids.
    in_suffix_ = sp_ ? ".in_sp" : ".in";
  }

  std::vector<Op> embedding() const;
  // One transformer layer; `p` prefixes op names and saved ids (the MTP module's block).
  std::vector<Op> layer(bool moe, double window, const std::string& p = "") const;
  std::vector<Op> head() const;
  std::vector<Op> mtp_module() const;

 private:
  // A norm over `rows` rows of `width`: saves its input and per-row fp32 statistics (rstd,
  // plus the mean for LayerNorm kinds).
  Op norm(const std::string& name, OpRole role, double rows, double width, double params,
          const std::string& input_id, TensorRole input_role = TensorRole::other) const {
    const bool rms = m_.norm == NormKind::rmsnorm;
    Op op = memory_op(name, OpKind::norm, role, dt_, rows * width, rows * width, d_.e, rms ? 5 : 8);
    op.params = params;
    op.saved.push_back({input_id, rows * width * d_.e, false, input_role});
    op.saved.push_back({name + ".stats", rows * 4.0 * (rms ? 1.0 : 2.0), false});
    return op;
  }
  Op hidden_norm(const std::string& name, const std::string& input_id,
                 TensorRole input_role = TensorRole::other) const {
    return norm(name, OpRole::norm, d_.tokens_norm, d_.h, norm_params(m_.norm, d_.h), input_id,
                input_role);
  }
  void tp_in(std::vector<Op>& ops, const std::string& prefix) const {
    if (d_.t <= 1)
      return;
    const double bytes = d_.tokens * d_.h * d_.e; // the full [b, s, h] activation
    ops.push_back(
        sp_ ? tp_comm(prefix + ".tp_in", CommKind::all_gather, CommKind::reduce_scatter, bytes)
            : tp_comm(prefix + ".tp_in", CommKind::none, CommKind::all_reduce, bytes));
  }
  void tp_out(std::vector<Op>& ops, const std::string& prefix) const {
    if (d_.t <= 1)
      return;
    const double bytes = d_.tokens * d_.h * d_.e;
    ops.push_back(
        sp_ ? tp_comm(prefix + ".tp_out", CommKind::reduce_scatter, CommKind::all_gather, bytes)
            : tp_comm(prefix + ".tp_out", CommKind::all_reduce, CommKind::none, bytes));
  }
  void dropout(std::vector<Op>& ops, const std::string& prefix) const {
    if (!m_.dropout)
      return;
    const double n = d_.tokens_norm * d_.h;
    Op drop =
        memory_op(prefix + ".dropout", OpKind::elementwise, OpRole::dropout, dt_, n, n, d_.e, 2);
    drop.saved.push_back({prefix + ".dropout.mask", n * 1.0, false}); // 1-byte mask
    ops.push_back(drop);
  }
  void residual(std::vector<Op>& ops, const std::string& prefix, double inputs) const {
    const double n = d_.tokens_norm * d_.h;
    ops.push_back(memory_op(prefix + ".residual", OpKind::elementwise, OpRole::residual, dt_,
                            inputs * n, n, d_.e, inputs - 1));
  }
  [[nodiscard]] bool fp8() const { return lin_ == Dtype::fp8; }
  // MoE parallel folding: the experts' tensor-parallel degree is not attention's.
  [[nodiscard]] bool folded_moe() const { return ctx_.etp != ctx_.tp && d_.t > 1; }
  // What a linear layer keeps of its input for the weight gradient: the tensor itself, or
  // under FP8 training Transformer Engine's FP8 copy (one byte per element).
  [[nodiscard]] SavedTensor linear_saved(SavedTensor t) const {
    if (fp8()) {
      t.bytes /= d_.e;
      t.id += ".fp8";
    }
    return t;
  }
  // FP8 cast of a linear layer's input (Transformer Engine): read the 16-bit tensor, write its
  // FP8 copy and the transposed copy the weight gradient needs (Hopper's FP8 GEMMs take only
  // the TN layout); in backward the same for the output gradient. The casts before QKV and
  // fc1 are fused into the preceding norm (TE's LayerNormLinear), so only the casts before the
  // output projection and fc2 are ops of their own.
  void quantize(std::vector<Op>& L, const std::string& name, double elements) const {
    if (fp8())
      L.push_back(
          memory_op(name, OpKind::elementwise, OpRole::quantize, dt_, elements, elements, d_.e, 2));
  }
  // Saved copy of a GEMM's input of width h (the local shard under sequence parallelism).
  SavedTensor gemm_input(const std::string& id, TensorRole role = TensorRole::other) const {
    return {id, d_.tokens_norm * d_.h * d_.e, false, role};
  }
  void attention(std::vector<Op>& L, const std::string& p, double window,
                 const SavedTensor& in) const;
  void mla_projections(std::vector<Op>& L, const std::string& p, const SavedTensor& in) const;
  void attention_core(std::vector<Op>& L, const std::string& p, double window, double qk_dim,
                      double v_dim, double heads, double kv_heads) const;
  void dense_ffn(std::vector<Op>& L, const std::string& prefix, double ffn,
                 const SavedTensor& in) const;
  void moe_ffn(std::vector<Op>& L, const std::string& p, const SavedTensor& in) const;
  void lm_head_and_loss(std::vector<Op>& ops, const std::string& p, double lm_params) const;

  const ModelSpec& m_;
  const OpContext& ctx_;
  Dims d_{};
  Dtype dt_ = Dtype::bf16;
  Dtype lin_ = Dtype::bf16; // the linear layers' GEMMs (fp8 under FP8 training)
  bool sp_ = false;
  double full_seq_ = 0;
  std::string in_suffix_;
};

std::vector<Op> Builder::embedding() const {
  std::vector<Op> E;
  const double V = static_cast<double>(m_.vocab_size);
  Op embed;
  embed.name = "embed.tokens";
  embed.kind = OpKind::embedding;
  embed.role = OpRole::embedding;
  embed.dtype = dt_;
  embed.params = V * d_.h / d_.t;                // vocab-parallel table
  embed.fwd_bytes = 2 * d_.tokens * d_.h * d_.e; // gather rows, write output
  embed.bwd_bytes = 2 * d_.tokens * d_.h * d_.e; // scatter-add into the table gradient
  E.push_back(embed);
  if (d_.t > 1) {
    const double bytes = d_.tokens * d_.h * d_.e;
    E.push_back(sp_ ? tp_comm("embed.tp_out", CommKind::reduce_scatter, CommKind::all_gather, bytes)
                    : tp_comm("embed.tp_out", CommKind::all_reduce, CommKind::none, bytes));
  }
  if (m_.position == PositionKind::learned) {
    const double n = d_.tokens_norm * d_.h;
    Op pos =
        memory_op("embed.positions", OpKind::elementwise, OpRole::position, dt_, 2 * n, n, d_.e, 1);
    pos.params = static_cast<double>(m_.max_seq_len) * d_.h; // replicated over tp
    E.push_back(pos);
  }
  dropout(E, "embed");
  return E;
}

// Q/K/V projections of standard attention, or MLA's, then QK-norm, RoPE and the core.
void Builder::attention(std::vector<Op>& L, const std::string& p, double window,
                        const SavedTensor& in) const {
  if (m_.attention_kind == AttentionKind::mla) {
    mla_projections(L, p, in);
    const double qk = static_cast<double>(m_.qk_nope_head_dim + m_.qk_rope_head_dim);
    attention_core(L, p, window, qk, static_cast<double>(m_.v_head_dim), d_.heads, d_.heads);
    return;
  }
  const double q_n = d_.heads * d_.d, kv_n = d_.kv_heads * d_.d;
  const double n = q_n + 2 * kv_n;
  Op qkv = gemm_op(p + "attn.qkv", OpRole::qkv_proj, lin_, d_.tokens, d_.h, n, 1,
                   d_.h * n + (m_.qkv_bias ? n : 0), d_.e);
  qkv.saved.push_back(linear_saved(in));
  L.push_back(qkv);
  if (m_.qk_norm != QkNorm::none) {
    // Per-head: one head_dim-wide weight each for Q and K, normalising every head's vector
    // (replicated over tp); full: one weight over all Q heads and one over all K heads (split
    // over tp with the heads; the cross-rank sum of squares is left out, b s floats).
    const bool per_head = m_.qk_norm == QkNorm::per_head;
    const double params = per_head ? 2 * norm_params(m_.norm, d_.d)
                                   : norm_params(m_.norm, q_n) + norm_params(m_.norm, kv_n);
    const double rows = d_.tokens * (per_head ? d_.heads + d_.kv_heads : 2.0);
    Op qkn = norm(p + "attn.qk_norm", OpRole::qk_norm, rows, (q_n + kv_n) * d_.tokens / rows,
                  params, p + "attn.qk_norm.in");
    L.push_back(qkn);
  }
  if (m_.position == PositionKind::rotary) {
    const double elems = d_.tokens * (q_n + kv_n) * m_.rotary_fraction;
    L.push_back(
        memory_op(p + "attn.rope", OpKind::elementwise, OpRole::rope, dt_, elems, elems, d_.e, 3));
  }
  attention_core(L, p, window, d_.d, d_.d, d_.heads, d_.kv_heads);
}

// Multi-head latent attention (DeepSeek-V2 Sec. 2.1.2-2.1.3): the down-projections are small
// and replicated over tp (Megatron-Core's MLA), the up-projections split by heads. Saved for
// backward: the layer's normed input (both down-projections), each latent before its norm
// and after it (the up-projections' inputs), the RoPE key input; the core keeps per-head Q, K
// (nope + rope wide), V, O and the logsumexp.
void Builder::mla_projections(std::vector<Op>& L, const std::string& p,
                              const SavedTensor& in) const {
  const double H = d_.heads;
  const double nope = static_cast<double>(m_.qk_nope_head_dim);
  const double rope = static_cast<double>(m_.qk_rope_head_dim);
  const double dv = static_cast<double>(m_.v_head_dim);
  const double qk = nope + rope;
  const double q_rank = static_cast<double>(m_.q_lora_rank);
  const double kv_rank = static_cast<double>(m_.kv_lora_rank);
  const double rows = d_.tokens; // the down-projections see every token on every tp rank
  auto latent = [&](const std::string& id, double width) {
    return SavedTensor{id, rows * width * d_.e, false, TensorRole::mla_latent};
  };
  if (q_rank > 0) {
    Op down = gemm_op(p + "attn.q_down", OpRole::q_down_proj, lin_, rows, d_.h, q_rank, 1,
                      d_.h * q_rank, d_.e);
    down.saved.push_back(in);
    L.push_back(down);
    Op qn = norm(p + "attn.q_norm", OpRole::latent_norm, rows, q_rank, norm_params(m_.norm, q_rank),
                 p + "attn.q_latent");
    qn.saved.front().role = TensorRole::mla_latent;
    L.push_back(qn);
    Op up = gemm_op(p + "attn.q_up", OpRole::q_up_proj, lin_, rows, q_rank, H * qk, 1,
                    q_rank * H * qk, d_.e);
    up.saved.push_back(latent(p + "attn.q_latent_normed", q_rank));
    L.push_back(up);
  } else {
    Op q =
        gemm_op(p + "attn.q", OpRole::q_up_proj, lin_, rows, d_.h, H * qk, 1, d_.h * H * qk, d_.e);
    q.saved.push_back(in);
    L.push_back(q);
  }
  Op kv_down = gemm_op(p + "attn.kv_down", OpRole::kv_down_proj, lin_, rows, d_.h, kv_rank + rope,
                       1, d_.h * (kv_rank + rope), d_.e);
  kv_down.saved.push_back(in);
  L.push_back(kv_down);
  Op kvn = norm(p + "attn.kv_norm", OpRole::latent_norm, rows, kv_rank,
                norm_params(m_.norm, kv_rank), p + "attn.kv_latent");
  kvn.saved.front().role = TensorRole::mla_latent;
  L.push_back(kvn);
  Op kv_up = gemm_op(p + "attn.kv_up", OpRole::kv_up_proj, lin_, rows, kv_rank, H * (nope + dv), 1,
                     kv_rank * H * (nope + dv), d_.e);
  kv_up.saved.push_back(latent(p + "attn.kv_latent_normed", kv_rank));
  L.push_back(kv_up);
  // RoPE on each head's query rope part and on the one shared rope key.
  const double elems = rows * (H * rope + rope);
  L.push_back(
      memory_op(p + "attn.rope", OpKind::elementwise, OpRole::rope, dt_, elems, elems, d_.e, 3));
}

void Builder::attention_core(std::vector<Op>& L, const std::string& p, double window, double qk_dim,
                             double v_dim, double heads, double kv_heads) const {
  const double q_bytes = d_.tokens * heads * qk_dim * d_.e;
  const double k_bytes = d_.tokens * kv_heads * qk_dim * d_.e;
  const double v_bytes = d_.tokens * kv_heads * v_dim * d_.e;
  const double o_bytes = d_.tokens * heads * v_dim * d_.e;
  // Each query attends to seq_len keys (with context parallelism the local s/cp queries see
  // all keys as K/V chunks circulate), or to its window.
  const double model_keys = model_keys_per_query(full_seq_, window);
  if (ctx_.attention == AttentionImpl::flash) {
    AttentionShape a;
    a.batch = d_.b;
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.seq_q = d_.s;
    a.seq_kv = full_seq_;
    a.head_dim = qk_dim;
    a.v_head_dim = v_dim;
    a.window = window;
    a.causal = true;
    Op core = flash_attention_op(p + "attn.core", dt_, a);
    for (auto& t : core.saved)
      t.id = p + t.id;
    // Soft-capping of the scores is fused into the kernel (FlashAttention-2 >= 2.6): no op.
    if (m_.attention_sinks)
      core.params += heads; // one learned logit per head
    L.push_back(core);
  } else {
    // Naive: a batched GEMM for the scores, softmax (+ dropout), a batched GEMM with V. Scores
    // and probabilities are [b, heads, s, s] tensors (Korthikanti's 5as^2b term); a window
    // only masks them, so the GEMMs run the full square while model FLOPs count the window.
    const double bh = d_.b * heads;
    Op scores = gemm_op(p + "attn.scores", OpRole::attention_scores, dt_, d_.s, qk_dim, full_seq_,
                        bh, 0, d_.e);
    scores.fwd_flops = 2 * bh * d_.s * qk_dim * model_keys;
    scores.bwd_flops = 2 * scores.fwd_flops;
    const double group = kv_heads > 0 ? heads / kv_heads : 1.0;
    scores.saved = {{p + "attn.q", q_bytes, false},
                    {p + "attn.k", k_bytes, false, TensorRole::attention_k, group}};
    L.push_back(scores);
    const double sq = bh * d_.s * full_seq_;
    if (m_.attention_softcap) {
      // c tanh(x / c); its backward needs the capped scores (the softmax input).
      Op cap = memory_op(p + "attn.softcap", OpKind::elementwise, OpRole::attention_softcap, dt_,
                         sq, sq, d_.e, 3);
      cap.saved.push_back({p + "attn.scores_capped", sq * d_.e, true});
      L.push_back(cap);
    }
    Op softmax = memory_op(p + "attn.softmax", OpKind::reduction, OpRole::attention_softmax, dt_,
                           sq, sq, d_.e, 5);
    if (m_.attention_sinks)
      softmax.params += heads;
    softmax.saved.push_back({p + "attn.probs", sq * d_.e, true});
    L.push_back(softmax);
    std::string probs_id = p + "attn.probs";
    if (m_.dropout) {
      Op drop = memory_op(p + "attn.probs_dropout", OpKind::elementwise, OpRole::attention_dropout,
                          dt_, sq, sq, d_.e, 2);
      drop.saved.push_back({p + "attn.probs.mask", sq, true});
      L.push_back(drop);
      probs_id = p + "attn.probs_dropped";
    }
    Op pv = gemm_op(p + "attn.pv", OpRole::attention_pv, dt_, d_.s, full_seq_, v_dim, bh, 0, d_.e);
    pv.fwd_flops = 2 * bh * d_.s * v_dim * model_keys;
    pv.bwd_flops = 2 * pv.fwd_flops;
    pv.saved = {{probs_id, sq * d_.e, true},
                {p + "attn.v", v_bytes, false, TensorRole::attention_v, group}};
    L.push_back(pv);
  }
  const double o_n = heads * v_dim;
  quantize(L, p + "attn.out.quantize", d_.tokens * o_n);
  Op out = gemm_op(p + "attn.out", OpRole::out_proj, lin_, d_.tokens, o_n, d_.h, 1,
                   o_n * d_.h + (m_.out_bias ? d_.h : 0), d_.e);
  // Its input is the attention output (saved by the attention core too: one tensor), or its
  // FP8 copy under FP8 training (a tensor of its own).
  out.saved.push_back(linear_saved({p + "attn.o", o_bytes, false}));
  L.push_back(out);
}

// A dense FFN on `tokens` rows (also used for shared experts): fc1 -> act -> fc2.
void Builder::dense_ffn(std::vector<Op>& L, const std::string& prefix, double ffn,
                        const SavedTensor& in) const {
  const bool gated = m_.ffn == FfnKind::gated;
  const double f_local = ffn / d_.t;
  const double fc1_n = (gated ? 2.0 : 1.0) * f_local;
  Op fc1 = gemm_op(prefix + ".fc1", OpRole::ffn_up, lin_, d_.tokens, d_.h, fc1_n, 1,
                   d_.h * fc1_n + (m_.mlp_bias ? fc1_n : 0), d_.e);
  fc1.saved.push_back(linear_saved(in));
  L.push_back(fc1);
  Op act = memory_op(prefix + (gated ? ".swiglu" : ".gelu"), OpKind::elementwise, OpRole::ffn_act,
                     dt_, d_.tokens * fc1_n, d_.tokens * f_local, d_.e, gated ? 6 : 8);
  act.saved.push_back({prefix + ".fc1.out", d_.tokens * fc1_n * d_.e, false});
  L.push_back(act);
  quantize(L, prefix + ".fc2.quantize", d_.tokens * f_local);
  Op fc2 = gemm_op(prefix + ".fc2", OpRole::ffn_down, lin_, d_.tokens, f_local, d_.h, 1,
                   f_local * d_.h + (m_.mlp_bias ? d_.h : 0), d_.e);
  fc2.saved.push_back(linear_saved({prefix + ".act.out", d_.tokens * f_local * d_.e, false}));
  L.push_back(fc2);
}

// Router, top-k, auxiliary loss, token permutation, expert-parallel all-to-alls, the routed
// experts as grouped GEMMs, the weighted combine, and the shared experts. Routed rows are
// balanced for model FLOPs; the executed rows (and bytes, saved tensors, all-to-all volume)
// are scaled by the load of the busiest rank: the capacity factor when tokens are dropped
// and buffers padded (Lepikhin et al. 2020, GShard; Fedus et al. 2022, Switch), else the
// imbalance factor when experts are spread over ep ranks (dropless, Gale et al. 2023).
void Builder::moe_ffn(std::vector<Op>& L, const std::string& p, const SavedTensor& in) const {
  const double E = static_cast<double>(m_.num_experts);
  const double k = static_cast<double>(m_.top_k);
  const double ep = static_cast<double>(std::max<std::int64_t>(ctx_.ep, 1));
  const double load = ctx_.moe_capacity_factor > 0 ? ctx_.moe_capacity_factor
                      : ctx_.ep > 1                ? ctx_.moe_imbalance_factor
                                                   : 1.0;
  // Tokens this rank routes: all of the micro-batch's local sequence after the tp all-gather,
  // or under MoE parallel folding only its sequence-parallel shard (Liu et al. 2025, Sec. 3).
  const double etp = static_cast<double>(std::max<std::int64_t>(ctx_.etp, 1));
  const double tokens = folded_moe() ? d_.tokens_norm : d_.tokens;
  Op router = gemm_op(p + "moe.router", OpRole::router, dt_, tokens, d_.h, E, 1,
                      d_.h * E + (m_.router_bias ? E : 0), d_.e);
  router.saved.push_back(in);
  L.push_back(router);
  // Scores and top-k in fp32 over [tokens, E]; the probabilities are kept for the combine's
  // and the auxiliary loss's backward.
  Op topk = memory_op(p + "moe.router.topk", OpKind::reduction, OpRole::router_topk, Dtype::fp32,
                      tokens * E, tokens * E, 4.0, 5);
  topk.saved.push_back({p + "moe.router.probs", tokens * E * 4.0, false});
  L.push_back(topk);
  // Load-balancing loss (Fedus et al. 2022 Eq. 4): per-expert token fraction x mean probability.
  L.push_back(memory_op(p + "moe.aux_loss", OpKind::reduction, OpRole::router_aux_loss, Dtype::fp32,
                        tokens * E, E, 4.0, 2));
  // Rows this rank's experts run: the routed copies of the tokens of its ep group's ranks
  // (each dispatching 1/t of the local sequence), times etp for the expert tensor-parallel
  // ranks that share them (etp = t: every token of the local sequence, as without folding).
  const double routed = d_.tokens / d_.t * k * etp; // balanced (model) rows
  const double routed_exec = routed * load;
  L.push_back(memory_op(p + "moe.permute", OpKind::elementwise, OpRole::expert_permute, dt_,
                        tokens * d_.h, routed_exec * d_.h, d_.e, 0));
  // Dispatch and combine: each rank sends its routed token copies to the experts' ranks and
  // gets them back; the backward pass sends the gradients the same two ways. Under tensor
  // parallelism each tp rank dispatches its 1/t of the tokens (Megatron-Core's all-to-all
  // dispatcher with sequence parallelism); without folding the tp all-gather of the routed
  // tokens that follows is counted as the block's tp_in (of the unrouted [b, s, h]: a k-fold
  // underestimate).
  const double a2a_bytes = d_.tokens / d_.t * k * load * d_.h * d_.e;
  if (ctx_.ep > 1)
    L.push_back(comm(p + "moe.dispatch", OpRole::ep_dispatch, OpKind::ep_comm, CommKind::all_to_all,
                     CommKind::all_to_all, a2a_bytes));
  // Under expert parallelism a rank runs E/ep experts over the tokens of all ep ranks.
  const bool gated = m_.ffn == FfnKind::gated;
  const double f_local = static_cast<double>(m_.expert_ffn_hidden_size) / etp;
  const double fc1_n = (gated ? 2.0 : 1.0) * f_local;
  const double local_experts = E / ep;
  const double rows_per_expert = routed_exec * ep / E;
  auto balanced = [&](Op op) { // model FLOPs of the balanced, undropped routing
    op.fwd_flops /= load;
    op.bwd_flops /= load;
    return op;
  };
  Op fc1 = balanced(gemm_op(p + "moe.experts.fc1", OpRole::expert_up, lin_, rows_per_expert, d_.h,
                            fc1_n, local_experts, 0, d_.e));
  fc1.params = E * (d_.h * fc1_n + (m_.mlp_bias ? fc1_n : 0)); // all experts (split over ep)
  fc1.saved.push_back(linear_saved({p + "moe.experts.in", routed_exec * d_.h * d_.e, false}));
  L.push_back(fc1);
  Op act = memory_op(p + (gated ? "moe.experts.swiglu" : "moe.experts.gelu"), OpKind::elementwise,
                     OpRole::expert_act, dt_, routed_exec * fc1_n, routed_exec * f_local, d_.e,
                     gated ? 6 : 8);
  act.saved.push_back({p + "moe.experts.fc1.out", routed_exec * fc1_n * d_.e, false});
  L.push_back(act);
  Op fc2 = balanced(gemm_op(p + "moe.experts.fc2", OpRole::expert_down, lin_, rows_per_expert,
                            f_local, d_.h, local_experts, 0, d_.e));
  fc2.params = E * (f_local * d_.h + (m_.mlp_bias ? d_.h : 0));
  fc2.saved.push_back(
      linear_saved({p + "moe.experts.act.out", routed_exec * f_local * d_.e, false}));
  L.push_back(fc2);
  if (ctx_.ep > 1)
    L.push_back(comm(p + "moe.combine_a2a", OpRole::ep_combine, OpKind::ep_comm,
                     CommKind::all_to_all, CommKind::all_to_all, a2a_bytes));
  // Combining expert outputs weights each by its router probability and sums per token.
  L.push_back(memory_op(p + "moe.combine", OpKind::elementwise, OpRole::expert_combine, dt_,
                        routed_exec * d_.h, tokens * d_.h, d_.e, 2));
  if (m_.num_shared_experts > 0)
    dense_ffn(L, p + "moe.shared",
              static_cast<double>(m_.num_shared_experts * m_.expert_ffn_hidden_size), in);
}

std::vector<Op> Builder::layer(bool moe, double window, const std::string& p) const {
  std::vector<Op> L;
  const bool pre = m_.norm_placement != NormPlacement::post;
  const bool post = m_.norm_placement != NormPlacement::pre;
  const SavedTensor layer_in = gemm_input(p + "layer.in", TensorRole::layer_input);
  auto ffn = [&](const SavedTensor& in) {
    if (moe)
      moe_ffn(L, p, in);
    else
      dense_ffn(L, p + "mlp", static_cast<double>(m_.ffn_hidden_size), in);
  };
  if (m_.parallel_block) {
    // x + attn(norm_a(x)) + ffn(norm_f(x)): one residual add and, since the out-projection's
    // and fc2's partial sums can be added first, one tp reduction.
    L.push_back(hidden_norm(p + "attn.norm", layer_in.id, TensorRole::layer_input));
    tp_in(L, p + "attn");
    const SavedTensor attn_in = gemm_input(p + "attn.qkv" + in_suffix_);
    SavedTensor ffn_in = attn_in;
    if (!m_.shared_block_norm) {
      L.push_back(hidden_norm(p + "mlp.norm", layer_in.id, TensorRole::layer_input));
      tp_in(L, p + "mlp");
      ffn_in = gemm_input(p + "mlp.fc1" + in_suffix_);
    }
    attention(L, p, window, attn_in);
    ffn(ffn_in);
    tp_out(L, p + "block");
    dropout(L, p + "attn");
    dropout(L, p + "mlp");
    residual(L, p + "block", 3);
    return L;
  }
  // Attention sublayer.
  SavedTensor attn_in = layer_in;
  if (pre) {
    L.push_back(hidden_norm(p + "attn.norm", layer_in.id, TensorRole::layer_input));
    attn_in = gemm_input(p + "attn.qkv" + in_suffix_);
  }
  tp_in(L, p + "attn");
  attention(L, p, window, attn_in);
  tp_out(L, p + "attn");
  if (post)
    L.push_back(hidden_norm(p + "attn.post_norm", p + "attn.post_norm.in"));
  dropout(L, p + "attn");
  residual(L, p + "attn", 2);
  // FFN sublayer.
  SavedTensor ffn_in = gemm_input(p + "mlp.in");
  if (pre) {
    L.push_back(hidden_norm(p + "mlp.norm", p + "mlp.norm.in"));
    ffn_in = gemm_input(p + "mlp.fc1" + in_suffix_);
  }
  // Folded experts take the sequence-parallel shard as it is: no tp collective around the
  // block unless shared experts (tensor-parallel as a dense FFN) need one.
  const bool tp_block = !(moe && folded_moe() && m_.num_shared_experts == 0);
  if (tp_block)
    tp_in(L, p + "mlp");
  ffn(ffn_in);
  if (tp_block)
    tp_out(L, p + "mlp");
  if (post)
    L.push_back(hidden_norm(p + "mlp.post_norm", p + "mlp.post_norm.in"));
  dropout(L, p + "mlp");
  residual(L, p + "mlp", 2);
  return L;
}

void Builder::lm_head_and_loss(std::vector<Op>& ops, const std::string& p, double lm_params) const {
  const double V = static_cast<double>(m_.vocab_size);
  tp_in(ops, p + "head");
  Op lm =
      gemm_op(p + "head.lm", OpRole::lm_head, dt_, d_.tokens, d_.h, V / d_.t, 1, lm_params, d_.e);
  lm.saved.push_back(gemm_input(p + "head.lm" + in_suffix_));
  ops.push_back(lm);
  const double logits = d_.tokens * V / d_.t;
  if (m_.logit_softcap) {
    // c tanh(x / c) over the logits; its backward needs the capped logits.
    Op cap = memory_op(p + "head.softcap", OpKind::elementwise, OpRole::logit_softcap, dt_, logits,
                       logits, d_.e, 3);
    cap.saved.push_back({p + "head.logits_capped", logits * d_.e, false});
    ops.push_back(cap);
  }
  // Cross-entropy in fp32 over the (vocab-parallel) logits: the fp32 softmax is saved.
  Op loss =
      memory_op(p + "loss", OpKind::reduction, OpRole::loss, Dtype::fp32, logits, logits, 4.0, 5);
  loss.fwd_bytes = logits * (d_.e + 4.0 + 4.0);
  loss.saved.push_back({p + "loss.softmax", logits * 4.0, false});
  ops.push_back(loss);
}

std::vector<Op> Builder::head() const {
  std::vector<Op> H;
  H.push_back(hidden_norm("head.norm", "head.norm.in"));
  const double V = static_cast<double>(m_.vocab_size);
  const double lm_params =
      (m_.tied_embeddings ? 0 : d_.h * V / d_.t) + (m_.lm_head_bias ? V / d_.t : 0);
  lm_head_and_loss(H, "", lm_params);
  return H;
}

// DeepSeek-V3 Sec. 2.2: h' = M [RMSNorm(h); RMSNorm(Emb(t_{i+k}))], one transformer block,
// the shared output head. The embedding and LM head weights are the main model's (no
// parameters here); the block is the kind of layer num_layers would be.
std::vector<Op> Builder::mtp_module() const {
  const std::string p = "mtp.";
  std::vector<Op> T;
  T.push_back(hidden_norm(p + "hnorm", p + "hnorm.in"));
  Op embed;
  embed.name = p + "embed";
  embed.kind = OpKind::embedding;
  embed.role = OpRole::embedding;
  embed.dtype = dt_;
  embed.fwd_bytes = 2 * d_.tokens * d_.h * d_.e;
  embed.bwd_bytes = 2 * d_.tokens * d_.h * d_.e;
  T.push_back(embed);
  if (d_.t > 1) {
    const double bytes = d_.tokens * d_.h * d_.e;
    T.push_back(
        sp_ ? tp_comm(p + "embed.tp_out", CommKind::reduce_scatter, CommKind::all_gather, bytes)
            : tp_comm(p + "embed.tp_out", CommKind::all_reduce, CommKind::none, bytes));
  }
  T.push_back(hidden_norm(p + "enorm", p + "enorm.in"));
  // The projection is small (2 h^2) and kept whole on every tp rank, on this rank's tokens.
  Op proj = gemm_op(p + "proj", OpRole::mtp_proj, dt_, d_.tokens_norm, 2 * d_.h, d_.h, 1,
                    2 * d_.h * d_.h, d_.e);
  proj.saved.push_back({p + "proj.in", d_.tokens_norm * 2 * d_.h * d_.e, false});
  T.push_back(proj);
  const std::int64_t idx = m_.num_layers;
  for (auto& op : layer(m_.is_moe_layer(idx),
                        m_.is_sliding_layer(idx) ? static_cast<double>(m_.sliding_window) : 0, p))
    T.push_back(std::move(op));
  T.push_back(hidden_norm(p + "head.norm", p + "head.norm.in"));
  lm_head_and_loss(T, p, 0);
  return T;
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
  ctx.ep = plan.ep;
  ctx.etp = plan.expert_tp();
  ctx.sequence_parallel = plan.sequence_parallel && plan.tp > 1;
  ctx.moe_capacity_factor = setup.moe_capacity_factor;
  ctx.moe_imbalance_factor = setup.moe_imbalance_factor;
  return ctx;
}

OpList build_ops(const ModelSpec& m, const OpContext& ctx) {
  const Builder b(m, ctx);
  OpList list;
  list.num_layers = m.num_layers;
  list.embedding = b.embedding();
  // Group layers by (MoE FFN, sliding window): at most four kinds, in model order.
  std::map<std::pair<bool, bool>, std::size_t> index;
  bool any_dense = false, any_moe = false, any_sliding = false, any_full = false;
  for (std::int64_t i = 0; i < m.num_layers; ++i) {
    (m.is_moe_layer(i) ? any_moe : any_dense) = true;
    (m.is_sliding_layer(i) ? any_sliding : any_full) = true;
  }
  list.layer_kind.reserve(static_cast<std::size_t>(std::max<std::int64_t>(m.num_layers, 0)));
  for (std::int64_t i = 0; i < m.num_layers; ++i) {
    const bool moe = m.is_moe_layer(i), sliding = m.is_sliding_layer(i);
    auto [it, added] = index.try_emplace({moe, sliding}, list.layers.size());
    if (added) {
      LayerKind kind;
      std::string name;
      if (any_dense && any_moe)
        name += moe ? "moe " : "dense ";
      if (any_sliding && any_full)
        name += sliding ? "sliding " : "full ";
      kind.name = name + "layer";
      kind.ops = b.layer(moe, sliding ? static_cast<double>(m.sliding_window) : 0);
      list.layers.push_back(std::move(kind));
    }
    ++list.layers[it->second].num_layers;
    list.layer_kind.push_back(it->second);
  }
  list.head = b.head();
  if (m.num_mtp_modules > 0) {
    list.mtp = b.mtp_module();
    list.num_mtp_modules = m.num_mtp_modules;
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
