// The operator list: the single source of truth for parameters, FLOPs, bytes moved and
// activation memory. build_ops() lists, for ONE micro-batch on ONE
// GPU (after tensor/context/sequence-parallel sharding), every operator of the embedding,
// each distinct kind of transformer layer (dense or MoE FFN, full or sliding-window attention)
// with how many layers are of that kind, the head and the optional multi-token-prediction
// module, with shapes, dtype, forward/backward FLOPs and bytes, parameters, tensor- and
// expert-parallel traffic and the tensors saved for backward. Closed-form formulas from
// The closed forms of docs/model.md are tests of this list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"
#include "model/spec.hpp"

namespace trainsim::model {

enum class OpKind {
  gemm,           // [m,k] x [k,n] (times `count` for batched/expert GEMMs)
  attention_core, // softmax(Q K^T / sqrt(d)) V; flash (fused) or naive (GEMM+softmax+GEMM)
  elementwise,    // activation functions, residual adds, dropout, RoPE: memory-bound
  reduction,      // softmax, cross-entropy: memory-bound with a row reduction
  norm,           // LayerNorm / RMSNorm: row reduction, backward also reduces weight gradients
  embedding,      // table gather (forward) and scatter-add (backward)
  tp_comm,        // tensor-parallel collective on the activations (no compute)
  ep_comm,        // expert-parallel all-to-all of routed tokens (no compute)
};

/// Collectives carried in the list (tensor- and expert-parallel): no compute, priced by
/// simulate/ with the collective model of their group.
[[nodiscard]] bool is_communication(OpKind k);

enum class CommKind { none, all_reduce, all_gather, reduce_scatter, all_to_all };

/// What an op is for, set where the op is built. Accounting (recompute, MoE active parameters,
/// context-parallel traffic) and framework profiles key on roles, never on op names.
enum class OpRole : std::uint8_t {
  other,             // not part of a model (benchmark kernels)
  embedding,         // token-embedding gather (scatter-add backward)
  position,          // learned position-embedding add
  norm,              // LayerNorm / RMSNorm (pre-attention, pre-FFN, final)
  qkv_proj,          // attention input projection(s)
  q_down_proj,       // MLA: hidden -> q_lora_rank (W_dq)
  q_up_proj,         // MLA: q_lora_rank -> heads x (nope + rope) (W_uq; W_q when no q LoRA)
  kv_down_proj,      // MLA: hidden -> kv_lora_rank + rope key (W_dkv and W_kr, one GEMM)
  kv_up_proj,        // MLA: kv_lora_rank -> heads x (nope + v) (W_uk and W_uv, one GEMM)
  latent_norm,       // MLA: RMSNorm of the compressed q / kv latents
  qk_norm,           // RMSNorm of queries and keys (Qwen3, OLMo 2, Gemma 3)
  rope,              // rotary position embedding
  attention_core,    // fused (flash) attention
  attention_scores,  // naive attention: Q K^T batched GEMM
  attention_softmax, // naive attention: softmax over the scores
  attention_softcap, // naive attention: tanh soft-capping of the scores (Gemma 2)
  attention_dropout, // naive attention: dropout on the probabilities
  attention_pv,      // naive attention: P V batched GEMM
  out_proj,          // attention output projection
  dropout,           // hidden-state dropout (embedding, attention and FFN outputs)
  residual,          // residual add
  ffn_up,            // dense FFN first matrix (fc1 / gate+up), also shared experts
  ffn_act,           // dense FFN activation (GELU, SwiGLU)
  ffn_down,          // dense FFN second matrix (fc2 / down)
  router,            // MoE router GEMM
  router_topk,       // router scores (softmax / sigmoid) and top-k selection
  router_aux_loss,   // load-balancing auxiliary loss over the router probabilities
  expert_permute,    // gathering each token's top_k copies into per-expert order (on this GPU)
  ep_dispatch,       // all-to-all of routed tokens to their experts' ranks (bwd: gradients back)
  ep_combine,        // all-to-all of expert outputs back to their tokens' ranks
  expert_up,         // routed experts' fc1
  expert_act,        // routed experts' activation
  expert_down,       // routed experts' fc2
  expert_combine,    // weighting and summing the experts' outputs
  lm_head,           // output projection to the vocabulary
  logit_softcap,     // tanh soft-capping of the logits (Gemma 2)
  loss,              // cross-entropy
  mtp_proj,          // multi-token prediction: [h_prev; emb] 2h -> h projection
  quantize,          // FP8 cast (and transposed copy) of a linear layer's input or gradient
  tp_comm,           // tensor-parallel collective
  count_
};
[[nodiscard]] std::string_view to_string(OpRole r);

/// Attention proper: the fused core, or naive attention's pieces.
[[nodiscard]] bool is_attention_part(OpRole r);
/// Naive attention's pieces (scores, soft-cap, softmax, dropout, P V): their [b, heads, s, s]
/// tensors are what selective recompute drops and re-runs (Korthikanti et al. 2022, Sec. 5).
[[nodiscard]] bool is_naive_attention_part(OpRole r);
/// Routed-expert ops: their parameters are split over expert-parallel ranks and only top_k of
/// num_experts are active per token.
[[nodiscard]] bool is_routed_expert(OpRole r);

/// What a saved tensor is, where accounting needs to know.
enum class TensorRole : std::uint8_t {
  other,
  layer_input, // a layer's input: all that full recompute keeps (Korthikanti et al. 2022)
  attention_k, // keys (circulate in context-parallel ring attention)
  attention_v, // values (likewise)
  mla_latent,  // MLA's compressed q / kv latents (before and after their norm)
};

/// A tensor kept from forward to backward. Tensors with the same `id` in one layer are one
/// allocation (e.g. the attention output saved by flash and the output projection's input).
struct SavedTensor {
  std::string id;
  double bytes = 0;
  bool quadratic = false; // [b, heads, s, s]-sized (dropped by selective recompute)
  TensorRole role = TensorRole::other;
  // Keys and values: query heads per key/value head. Code that repeats K and V for every
  // query head before attention (Hugging Face's repeat_kv) keeps them this many times wider
  // (FrameworkProfile::expand_kv_heads).
  double kv_group = 1;
};

struct Op {
  std::string name; // "attn.qkv", "mlp.fc1", "loss" (for printing only)
  OpKind kind = OpKind::elementwise;
  OpRole role = OpRole::other;
  Dtype dtype = Dtype::bf16;
  // GEMM shape: [m,k] x [k,n], `count` independent GEMMs (experts).
  std::int64_t m = 0, n = 0, k = 0;
  double count = 1;
  // Attention shape (attention_core): batch, heads on this GPU, query and key lengths, Q/K head
  // width (head_dim) and V/O head width (v_head_dim; differs under MLA), keys each query sees
  // (window; 0 = all of seq_kv).
  std::int64_t batch = 0, heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0, v_head_dim = 0;
  std::int64_t window = 0;
  bool causal = false;

  double params = 0; // parameters held by this op on this GPU
  // Model FLOPs (MFU convention: attention counts the full s x s product; backward of a
  // GEMM is 2x forward). Executed FLOPs may differ (causal tiles skipped, flash recompute).
  double fwd_flops = 0, bwd_flops = 0;
  double fwd_exec_flops = 0, bwd_exec_flops = 0;
  double fwd_bytes = 0, bwd_bytes = 0;                 // HBM traffic (read + written)
  double fwd_bytes_written = 0, bwd_bytes_written = 0; // the written part of it
  // Traffic of a tp_comm / ep_comm op, per direction.
  CommKind fwd_comm = CommKind::none, bwd_comm = CommKind::none;
  double comm_bytes = 0; // payload bytes of each collective (tp: full tensor; ep: per rank)
  std::vector<SavedTensor> saved;
};

/// Layers whose op lists are identical (same FFN kind, same attention window).
struct LayerKind {
  std::string name;            // "layer" when all layers are alike, else e.g. "moe sliding layer"
  std::int64_t num_layers = 0; // layers of this kind
  std::vector<Op> ops;         // one layer's ops
};

/// Where an op sits: the embedding runs on the first pipeline stage, the head (final norm,
/// LM head, loss) and the multi-token-prediction modules on the last, layer ops once per
/// transformer layer of their kind.
struct OpList {
  std::vector<Op> embedding;
  std::vector<LayerKind> layers;       // distinct kinds, in order of first appearance
  std::vector<std::size_t> layer_kind; // index into `layers` of each layer, in model order
  std::vector<Op> head;
  std::vector<Op> mtp; // one multi-token-prediction module (empty: none)
  std::int64_t num_mtp_modules = 0;
  std::int64_t num_layers = 0;
};

/// What build_ops needs beyond the model: per-GPU sharding and the micro-batch.
struct OpContext {
  std::int64_t micro_batch_size = 1;
  std::int64_t seq_len = 2048;
  Dtype dtype = Dtype::bf16; // activation and compute dtype
  // Dtype of the linear layers' GEMMs (QKV, output projection, FFN and expert matrices): fp8
  // under FP8 training, else `dtype`. The LM head, router and attention stay in `dtype`.
  Dtype linear_dtype = Dtype::bf16;
  AttentionImpl attention = AttentionImpl::flash;
  std::int64_t tp = 1;
  std::int64_t cp = 1;
  std::int64_t ep = 1; // expert parallel: adds the all-to-all ops and the imbalance factor
  // The experts' tensor-parallel degree (ParallelPlan::expert_tp): tp, or 1 under MoE parallel
  // folding, where each rank runs whole experts over the tokens dispatched from its
  // sequence-parallel shard and the MoE block has no tp all-gather / reduce-scatter of its own.
  std::int64_t etp = 1;
  bool sequence_parallel = false;
  double moe_capacity_factor = 0;  // TrainingSetup::moe_capacity_factor
  double moe_imbalance_factor = 1; // TrainingSetup::moe_imbalance_factor
};

[[nodiscard]] OpContext make_op_context(const ParallelPlan& plan, const TrainingSetup& setup);

/// Builds the operator list (see the file comment). Requires a validated model and context.
[[nodiscard]] OpList build_ops(const ModelSpec& model, const OpContext& ctx);

/// Op factories, shared by build_ops() and the kernel benchmarks (validate/), so that predicted
/// and measured work come from one description. `e` = bytes per element.
/// GEMM [m,k] x [k,n], `count` copies: 2mnk FLOPs forward, 2x backward; e (mk + kn + mn) bytes.
[[nodiscard]] Op gemm_op(std::string name, OpRole role, Dtype dtype, double m, double k, double n,
                         double count, double params, double e);
/// Memory-bound op reading elements_in and writing elements_out (backward: reads the saved
/// input(s) and the output gradient, writes the input gradient).
[[nodiscard]] Op memory_op(std::string name, OpKind kind, OpRole role, Dtype dtype,
                           double elements_in, double elements_out, double e,
                           double flops_per_element);
/// Shape of one attention core on one GPU.
struct AttentionShape {
  double batch = 1, heads = 1, kv_heads = 1; // heads on this GPU
  double seq_q = 0, seq_kv = 0;              // local queries; keys they attend over
  double head_dim = 0;                       // Q and K width per head
  double v_head_dim = 0;                     // V and O width per head (0: = head_dim)
  double window = 0;                         // sliding window in keys (0: none)
  bool causal = true;
};
/// FlashAttention core (Dao 2023) of `shape`: Q K^T and P V, O and a per-row logsumexp saved.
[[nodiscard]] Op flash_attention_op(std::string name, Dtype dtype, const AttentionShape& shape);
/// FlashAttention core over [b, heads, seq, head_dim] (kv_heads for K and V), no window.
[[nodiscard]] Op flash_attention_op(std::string name, Dtype dtype, double b, double heads,
                                    double seq_q, double seq_kv, double head_dim, double kv_heads,
                                    bool causal);
/// Keys per query counted in model FLOPs: seq_kv for full attention (the causal mask is not
/// discounted, Narayanan et al. 2021), 2w - w^2 / seq_kv under a window w < seq_kv (twice the
/// causal average below, so both conventions agree at w = seq_kv).
[[nodiscard]] double model_keys_per_query(double seq_kv, double window);
/// Keys per query a kernel visits: causal, position p sees min(w, p + 1) keys; averaged over
/// the sequence: seq_kv / 2 full, w - w^2 / (2 seq_kv) under a window w < seq_kv (continuum
/// form); non-causal: seq_kv (or w).
[[nodiscard]] double executed_keys_per_query(double seq_kv, double window, bool causal);

/// Bytes of distinct saved tensors in `ops` (deduplicated by id); quadratic ones optional.
[[nodiscard]] double saved_bytes(const std::vector<Op>& ops, bool include_quadratic = true);

/// Ops of every layer kind weighted by its layer count, plus nothing else: sum over kinds of
/// num_layers x f(kind.ops).
template <class F> double sum_over_layers(const OpList& ops, F f) {
  double total = 0;
  for (const auto& kind : ops.layers)
    total += static_cast<double>(kind.num_layers) * f(kind.ops);
  return total;
}

/// Sum of a field over a list.
[[nodiscard]] double sum_params(const std::vector<Op>& ops);
[[nodiscard]] double sum_fwd_flops(const std::vector<Op>& ops);
[[nodiscard]] double sum_bwd_flops(const std::vector<Op>& ops);

} // namespace trainsim::model
