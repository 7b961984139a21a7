// The operator list: the single source of truth for parameters, FLOPs, bytes moved and
// activation memory (STYLE.md section 2). build_ops() lists, for ONE micro-batch on ONE
// GPU (after tensor/context/sequence-parallel sharding), every operator of the embedding,
// one transformer layer (all layers are identical) and the head, with its shapes, dtype,
// forward/backward FLOPs and bytes, parameters, tensor-parallel traffic and the tensors it
// saves for backward. Closed-form formulas from ../shared/DOMAIN.md are tests of this list.
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
};

enum class CommKind { none, all_reduce, all_gather, reduce_scatter, all_to_all };

/// What an op is for, set where the op is built. Accounting (recompute, MoE active parameters,
/// context-parallel traffic) and framework profiles key on roles, never on op names.
enum class OpRole : std::uint8_t {
  other,             // not part of a model (benchmark kernels)
  embedding,         // token-embedding gather (scatter-add backward)
  position,          // learned position-embedding add
  norm,              // LayerNorm / RMSNorm (pre-attention, pre-FFN, final)
  qkv_proj,          // attention input projection(s)
  rope,              // rotary position embedding
  attention_core,    // fused (flash) attention
  attention_scores,  // naive attention: Q K^T batched GEMM
  attention_softmax, // naive attention: softmax over the scores
  attention_dropout, // naive attention: dropout on the probabilities
  attention_pv,      // naive attention: P V batched GEMM
  out_proj,          // attention output projection
  dropout,           // hidden-state dropout (embedding, attention and FFN outputs)
  residual,          // residual add
  ffn_up,            // dense FFN first matrix (fc1 / gate+up), also shared experts
  ffn_act,           // dense FFN activation (GELU, SwiGLU)
  ffn_down,          // dense FFN second matrix (fc2 / down)
  router,            // MoE router GEMM
  expert_up,         // routed experts' fc1
  expert_act,        // routed experts' activation
  expert_down,       // routed experts' fc2
  expert_combine,    // weighting and summing the experts' outputs
  lm_head,           // output projection to the vocabulary
  loss,              // cross-entropy
  quantize,          // FP8 cast (and transposed copy) of a linear layer's input or gradient
  tp_comm,           // tensor-parallel collective
  count_
};
[[nodiscard]] std::string_view to_string(OpRole r);

/// Attention proper: the fused core, or naive attention's pieces.
[[nodiscard]] bool is_attention_part(OpRole r);
/// Naive attention's pieces (scores, softmax, dropout, P V): their [b, heads, s, s] tensors are
/// what selective recompute drops and re-runs (Korthikanti et al. 2022, Sec. 5).
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
};

/// A tensor kept from forward to backward. Tensors with the same `id` in one layer are one
/// allocation (e.g. the attention output saved by flash and the output projection's input).
struct SavedTensor {
  std::string id;
  double bytes = 0;
  bool quadratic = false; // [b, heads, s, s]-sized (dropped by selective recompute)
  TensorRole role = TensorRole::other;
};

struct Op {
  std::string name; // "attn.qkv", "mlp.fc1", "loss" (for printing only)
  OpKind kind = OpKind::elementwise;
  OpRole role = OpRole::other;
  Dtype dtype = Dtype::bf16;
  // GEMM shape: [m,k] x [k,n], `count` independent GEMMs (experts).
  std::int64_t m = 0, n = 0, k = 0;
  double count = 1;
  // Attention shape (attention_core): batch, heads on this GPU, query and key lengths.
  std::int64_t batch = 0, heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  bool causal = false;

  double params = 0; // parameters held by this op on this GPU
  // Model FLOPs (MFU convention: attention counts the full s x s product; backward of a
  // GEMM is 2x forward). Executed FLOPs may differ (causal tiles skipped, flash recompute).
  double fwd_flops = 0, bwd_flops = 0;
  double fwd_exec_flops = 0, bwd_exec_flops = 0;
  double fwd_bytes = 0, bwd_bytes = 0;                 // HBM traffic (read + written)
  double fwd_bytes_written = 0, bwd_bytes_written = 0; // the written part of it
  // Tensor-parallel traffic of a tp_comm op, per direction.
  CommKind fwd_comm = CommKind::none, bwd_comm = CommKind::none;
  double comm_bytes = 0; // payload bytes of each collective (full tensor size)
  std::vector<SavedTensor> saved;
};

/// Where an op sits: the embedding runs on the first pipeline stage, the head (final norm,
/// LM head, loss) on the last, layer ops once per transformer layer.
struct OpList {
  std::vector<Op> embedding;
  std::vector<Op> layer;
  std::vector<Op> head;
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
  bool sequence_parallel = false;
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
/// FlashAttention core over [b, heads, seq, head_dim] (kv_heads for K and V).
[[nodiscard]] Op flash_attention_op(std::string name, Dtype dtype, double b, double heads,
                                    double seq_q, double seq_kv, double head_dim, double kv_heads,
                                    bool causal);

/// Bytes of distinct saved tensors in `ops` (deduplicated by id); quadratic ones optional.
[[nodiscard]] double saved_bytes(const std::vector<Op>& ops, bool include_quadratic = true);

/// Sum of a field over a list.
[[nodiscard]] double sum_params(const std::vector<Op>& ops);
[[nodiscard]] double sum_fwd_flops(const std::vector<Op>& ops);
[[nodiscard]] double sum_bwd_flops(const std::vector<Op>& ops);

} // namespace trainsim::model
