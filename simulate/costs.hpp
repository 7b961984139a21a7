// The two-phase cost model shared by `estimate`, `memory` and the plan search:
//  1. per micro-batch (depends on the op list, i.e. model, micro-batch, seq, tp, cp, SP,
//     attention): bytes and parameters (MicroBatchAccounting) and times (MicroBatchTimes);
//  2. composition with the rest of the plan (pp, dp, ZeRO, recompute, interleave, number of
//     micro-batches): pure arithmetic, no allocation, so the planner can evaluate millions
//     of plans per second from a few cached phase-1 results.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hardware/gpu.hpp"
#include "hardware/profile.hpp"
#include "model/ops.hpp"
#include "model/spec.hpp"
#include "simulate/collectives.hpp"
#include "simulate/framework.hpp"
#include "simulate/roofline.hpp"

namespace trainsim::sim {

/// Bytes and parameters of one micro-batch on one GPU (tp/cp-sharded), from the op list.
/// Per-layer fields are means over the model's layers (layer kinds weighted by their counts),
/// so x num_layers they are exact totals.
struct MicroBatchAccounting {
  double layer_act[model::kRecomputePolicies] = {}; // saved bytes per layer, by model::Recompute
  double layer_saved_all = 0;     // everything a layer saves (re-materialised by full recompute)
  double layer_bwd_transient = 0; // alive only during one layer's backward (framework's scores)
  double layer_bwd_transient_block = 0; // the transient is blocks of this size (0: one block)
  double emb_act = 0;                   // embedding saved bytes
  double head_act = 0;                  // head saved bytes + the transient 16-bit logits
  double pp_send_bytes = 0;             // activation crossing a stage boundary (scattered over tp)
  double layer_dense_params = 0, layer_expert_params = 0;
  double emb_params = 0, head_params = 0, tied_copy_params = 0;
  double layer_recompute_flops[model::kRecomputePolicies] = {}; // model FLOPs re-run per layer
  // Parameter tensors (weights; biases ride along): the optimizer's per-tensor host cost.
  double layer_param_tensors = 0, emb_param_tensors = 0, head_param_tensors = 0;
  // Parameters of the layer's FP8 GEMMs (dense part, and routed experts apart): FP8 training
  // keeps FP8 copies of these weights beside the 16-bit ones.
  double layer_fp8_dense_params = 0, layer_fp8_expert_params = 0;
  // Tensor by tensor, for frameworks that simulate their caching allocator (filled only then;
  // sizes in bytes after the framework's factors, parameters in counts): the most common
  // layer kind's saved tensors by recompute policy and all of them (re-made by full
  // recompute), the embedding's and the head's (with the logits chain at the loss), each
  // op's parameters, and the activation gradient handed from layer to layer.
  struct Tensors {
    std::vector<double> layer_saved[model::kRecomputePolicies], layer_saved_all, emb_saved,
        head_saved;
    std::vector<double> layer_params, emb_params, head_params;
    double activation_grad_bytes = 0;
  } tensors;
};

/// Megatron-Core's selective recompute by module (model::RecomputeModule) over one layer's
/// ops, as its Transformer Engine layer spec builds the layer: which ops re-run their forward in
/// backward, and which saved tensors are not kept. A checkpointed module (core_attn, mlp, moe,
/// shared_experts) keeps its input and drops what it saved inside; layernorm drops the norm's
/// output and moe_act the activation's (what the next GEMM saved). Where Transformer Engine
/// fuses a norm into the following GEMM (the input norm before QKV, a dense layer's pre-MLP
/// norm) layernorm has nothing to re-make; mlp applies to dense layers, moe, moe_act and
/// shared_experts to MoE layers.
struct ModuleRecompute {
  std::vector<char> rerun;          // by op of the layer
  std::vector<std::string> dropped; // saved-tensor ids
};
[[nodiscard]] ModuleRecompute module_recompute(const std::vector<model::Op>& layer,
                                               std::uint32_t modules);

/// Seconds of one micro-batch on one GPU.
struct MicroBatchTimes {
  double layer_fwd = 0, layer_bwd = 0;                    // roofline compute
  double layer_tp_fwd = 0, layer_tp_bwd = 0;              // tensor-parallel collectives
  double layer_recompute[model::kRecomputePolicies] = {}; // by model::Recompute
  double layer_cp = 0, layer_ep = 0;                      // exposed context/expert-parallel traffic
  double layer_cp_recompute = 0; // what a re-run forward exposes again (full recompute)
  // Of layer_ep, the expert-parallel all-to-alls of the forward (dispatch, combine) and of the
  // backward, which Megatron-Core's combined 1F1B can hide (StepOptions::ep_overlap).
  double layer_ep_a2a_fwd = 0, layer_ep_a2a_bwd = 0;
  double emb_fwd = 0, emb_bwd = 0, emb_tp = 0;
  // The head and the multi-token-prediction modules (last stage); head_tp also holds the MTP
  // modules' expert-parallel all-to-alls.
  double head_fwd = 0, head_bwd = 0, head_tp = 0;
  // Host issue time of the same work (frameworks with HostModel::queue; 0 otherwise).
  double layer_fwd_host = 0, layer_bwd_host = 0,
         layer_recompute_host[model::kRecomputePolicies] = {};
  // The per-op checkpointing policy's dispatch mode, one pass over a layer's forward kernels
  // (FrameworkProfile::host_s_per_sac_kernel): paid in the forward and in the re-run forward.
  double layer_sac_dispatch_host = 0;
  // Selective recompute of Megatron-Core modules with collectives inside them
  // (TrainingSetup::recompute_modules): the tensor-parallel collectives of a re-run MLP or MoE
  // block, and the MoE block's forward all-to-alls, run again in backward.
  double layer_tp_rerun_selective = 0, layer_ep_rerun_selective = 0;
  double emb_fwd_host = 0, emb_bwd_host = 0, head_fwd_host = 0, head_bwd_host = 0;
};

/// Group sizes and how many members share a node, with Megatron's rank order
/// (tp innermost, then cp, then dp, then pp).
struct Placement {
  Group tp, cp, dp, ep; // dp: the gradient group, dp x cp (ParallelPlan::dp_cp)
  Group edp;            // the experts' gradient group, dp x cp / ep (MoE)
  bool pp_inter_node = false;
};
[[nodiscard]] Placement place_groups(const model::ParallelPlan& plan,
                                     const hw::ClusterSpec& cluster);

/// `fw` scales what each role saves (RoleCost::saved_bytes_factor, activation_bytes_factor) and
/// sets the logits' transient bytes at the loss.
[[nodiscard]] MicroBatchAccounting
account_micro_batch(const model::ModelSpec& m, const model::OpList& ops,
                    const model::ParallelPlan& plan, const model::TrainingSetup& setup,
                    const FrameworkProfile& fw = trainsim_framework());

/// `fw` sets kernels and bytes per role and the host model (identity: our own trainer).
[[nodiscard]] MicroBatchTimes
time_micro_batch(const model::ModelSpec& m, const model::OpList& ops,
                 const model::ParallelPlan& plan, const model::TrainingSetup& setup,
                 const hw::GpuSpec& gpu, const hw::HardwareProfile& profile,
                 const hw::ClusterSpec& cluster, const FrameworkProfile& fw = trainsim_framework());

/// One op in one pass under a framework: GPU seconds (body with the role's bytes factor, plus
/// the GPU gap of each launch) and host issue seconds (queue model), or the per-op launch model.
struct FrameworkOpTime {
  double gpu_s = 0, host_s = 0, kernels = 0;
  double cast_s = 0; // the part of gpu_s that is autocast's casts around a GEMM (elementwise)
};
[[nodiscard]] FrameworkOpTime framework_op_time(const model::Op& op, Pass pass,
                                                const hw::GpuSpec& gpu,
                                                const hw::HardwareProfile& profile,
                                                const FrameworkProfile& fw);

/// One GPU's kernel time for one micro-batch under a framework, by kind of kernel (to set
/// against a profiler's kernels): GEMMs (without autocast's casts), the attention core, and
/// every other op (elementwise, norms, casts, embedding, loss). Forward and backward of every
/// layer on the GPU (pp 1), plus the forward again under full recompute; communication and
/// the optimizer are not in it.
struct GpuTimeByKind {
  double gemm_s = 0, attention_s = 0, other_s = 0;
};
[[nodiscard]] GpuTimeByKind
gpu_time_by_kind(const model::OpList& ops, const model::ParallelPlan& plan, const hw::GpuSpec& gpu,
                 const hw::HardwareProfile& profile, const FrameworkProfile& fw);

/// Closed form of bucketed, overlapped reduction: nb buckets of time c become ready evenly
/// during a window w; the last finishes at max(w/nb + nb c, w + c). Returns the part past w
/// (all nb c without overlap).
[[nodiscard]] double exposed_bucketed_s(double nb, double bucket_s, double window_s, bool overlap);

/// Gradient buckets reduced during a backward window, in the order they become ready.
struct BucketOverlap {
  double exposed_s = 0;    // communication still running when the window ends (on the path)
  double overlapped_s = 0; // wall time during which communication ran beside compute
  double slowdown_s = 0;   // compute time lost to that sharing: (1 - compute_rate) x overlapped
};

/// Bucket i (standalone time bucket_s[i], bytes[i]) becomes ready when the window has covered
/// the share of bytes up to and including it (gradients are produced at a steady rate); buckets
/// are reduced one after another on one communication stream. While compute runs beside them
/// they progress at comm_rate of their standalone speed and compute at compute_rate of its own
/// (both measured by validate/comm/overlap_probe); past the window's end they run alone. With
/// both rates 1 and equal buckets this is exposed_bucketed_s. overlap = false: all exposed.
[[nodiscard]] BucketOverlap overlap_buckets(const std::vector<double>& bucket_s,
                                            const std::vector<double>& bytes, double window_s,
                                            bool overlap, double compute_rate, double comm_rate);

/// The same for num_buckets equal buckets of bucket_s each, in closed form (no allocation;
/// what the plan search uses). Bucket i is ready at w i / nb (delta = w / nb apart); inside the
/// window one takes c' = bucket_s / comm_rate of wall time.
///  - c' <= delta: each finishes before the next is ready; the last, ready at w, runs alone:
///    exposed = bucket_s, overlapped = (nb - 1) c'.
///  - c' > delta: the queue never empties from delta on, so the window does (w - delta) comm_rate
///    of the nb bucket_s of work: exposed = nb bucket_s - (w - delta) comm_rate,
///    overlapped = w - delta.
/// Equal to overlap_buckets() on nb equal buckets up to rounding (tested to 1e-9 relative).
[[nodiscard]] BucketOverlap overlap_equal_buckets(double num_buckets, double bucket_s,
                                                  double window_s, bool overlap,
                                                  double compute_rate, double comm_rate);

} // namespace trainsim::sim
