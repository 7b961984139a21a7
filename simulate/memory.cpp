// Per-GPU memory accounting (memory.hpp).
#include "simulate/memory.hpp"

#include <algorithm>

#include "model/count.hpp"

namespace trainsim::sim {

using model::Optimizer;
using model::Precision;
using model::Recompute;

StateBytesPerParam state_bytes_per_param(Precision p, Optimizer o) {
  const double moments = o == Optimizer::adamw ? 8.0 : 4.0;  // fp32 m, v (or momentum)
  switch (p) {
    case Precision::fp32: return {4, 4, moments};
    case Precision::bf16_mixed:
    case Precision::fp16_mixed: return {2, 2, 4 + moments};  // + fp32 master weights
    case Precision::bf16: return {2, 2, moments};
  }
  return {4, 4, moments};
}

MemoryBreakdown model_state_bytes(double params, Precision precision, Optimizer optimizer,
                                  std::int64_t dp, std::int64_t zero_stage) {
  const auto per = state_bytes_per_param(precision, optimizer);
  const double n = static_cast<double>(std::max<std::int64_t>(dp, 1));
  MemoryBreakdown m;
  m.params_on_gpu = params;
  m.optimizer = per.optimizer * params / (zero_stage >= 1 ? n : 1.0);
  m.gradients = per.gradients * params / (zero_stage >= 2 ? n : 1.0);
  m.weights = per.weights * params / (zero_stage >= 3 ? n : 1.0);
  m.total = m.weights + m.gradients + m.optimizer;
  return m;
}

double layer_activation_bytes(const model::OpList& ops, Recompute r) {
  switch (r) {
    case Recompute::none: return model::saved_bytes(ops.layer, true);
    case Recompute::selective: return model::saved_bytes(ops.layer, false);
    case Recompute::full:
      // Only the layer input is kept (the first saved tensor of the first norm).
      for (const auto& op : ops.layer)
        for (const auto& t : op.saved)
          if (t.id == "layer.in") return t.bytes;
      return 0;
  }
  return 0;
}

namespace {

struct StageShape {
  double layers = 0;
  bool first = false, last = false;
};

MemoryBreakdown stage_memory(const model::ModelSpec& model, const model::ParallelPlan& plan,
                             const model::TrainingSetup& setup, const hw::HardwareProfile& profile,
                             const MemoryOptions& options, const model::OpList& ops,
                             const StageShape& stage) {
  // Parameters on this GPU: its layers (tp-sharded in the op list; experts split over ep),
  // plus the embedding on the first stage and the head on the last. With tied embeddings
  // and pp > 1 the last stage keeps its own copy of the table for the LM head (Megatron).
  double expert_params = 0, layer_params = 0;
  for (const auto& op : ops.layer) {
    if (op.name.starts_with("moe.experts.")) expert_params += op.params;
    else layer_params += op.params;
  }
  layer_params += expert_params / static_cast<double>(plan.ep);
  double params = stage.layers * layer_params;
  if (stage.first) params += model::sum_params(ops.embedding);
  if (stage.last) {
    params += model::sum_params(ops.head);
    if (model.tied_embeddings && !stage.first)
      params += static_cast<double>(model.vocab_size * model.hidden_size) / static_cast<double>(plan.tp);
  }
  MemoryBreakdown m = model_state_bytes(params, setup.precision, setup.optimizer, plan.dp,
                                        plan.zero_stage);

  // Activations: micro-batches in flight on this stage (1F1B: the first stage holds pp of
  // them, i.e. all layers' worth; Narayanan et al. 2021), times saved bytes per layer.
  const std::int64_t micro_batches = model::grad_accumulation_steps(plan, setup);
  double in_flight = static_cast<double>(std::min(plan.pp, std::max<std::int64_t>(micro_batches, 1)));
  if (!stage.first) in_flight = std::max(1.0, in_flight - static_cast<double>(plan.pp - 1));
  if (plan.interleave > 1 && plan.pp > 1 && stage.first)  // Korthikanti et al. 2022 Sec. 4.2.3
    in_flight *= 1.0 + static_cast<double>(plan.pp - 1) /
                           static_cast<double>(plan.pp * plan.interleave);
  const double per_layer = layer_activation_bytes(ops, plan.recompute);
  double act = in_flight * stage.layers * per_layer;
  if (plan.recompute == Recompute::full)  // one layer re-materialised during its backward
    act += model::saved_bytes(ops.layer, true);
  if (stage.first) act += in_flight * model::saved_bytes(ops.embedding, true);
  if (stage.last) {
    act += model::saved_bytes(ops.head, true);
    // The 16-bit logits exist next to their fp32 copy while the loss runs.
    for (const auto& op : ops.head)
      if (op.name == "head.lm") act += static_cast<double>(op.m) * static_cast<double>(op.n) *
                                       dtype_bytes(op.dtype);
  }
  m.activations = act;
  m.in_flight_micro_batches = in_flight;

  // Buffers: gradient buckets (double-buffered) when gradients are communicated, ZeRO-3's
  // gathered parameters of the current and the prefetched layer (16-bit), and pipeline
  // send/receive buffers of one activation each way.
  double buffers = 0;
  if (plan.dp > 1) buffers += 2 * options.bucket_bytes;
  if (plan.zero_stage == 3 && plan.dp > 1)
    buffers += 2 * layer_params * state_bytes_per_param(setup.precision, setup.optimizer).weights;
  if (plan.pp > 1) {
    const double act_bytes = static_cast<double>(setup.micro_batch_size * setup.seq_len /
                                                 plan.cp * model.hidden_size) *
                             dtype_bytes(model::compute_dtype(setup.precision)) /
                             (plan.sequence_parallel ? static_cast<double>(plan.tp) : 1.0);
    buffers += 2 * act_bytes;
  }
  m.buffers = buffers;
  m.overhead = profile.context_overhead_bytes;
  m.total = m.weights + m.gradients + m.optimizer + m.activations + m.buffers + m.overhead;
  return m;
}

}  // namespace

MemoryBreakdown estimate_memory(const model::ModelSpec& model, const model::ParallelPlan& plan,
                                const model::TrainingSetup& setup,
                                const hw::HardwareProfile& profile, const MemoryOptions& options) {
  const model::OpList ops = model::build_ops(model, model::make_op_context(plan, setup));
  const double layers_per_stage =
      static_cast<double>(model.num_layers) / static_cast<double>(plan.pp);
  if (plan.pp == 1)
    return stage_memory(model, plan, setup, profile, options, ops, {layers_per_stage, true, true});
  MemoryBreakdown first =
      stage_memory(model, plan, setup, profile, options, ops, {layers_per_stage, true, false});
  MemoryBreakdown last =
      stage_memory(model, plan, setup, profile, options, ops, {layers_per_stage, false, true});
  last.stage = plan.pp - 1;
  return first.total >= last.total ? first : last;
}

std::int64_t max_micro_batch(const model::ModelSpec& model, const model::ParallelPlan& plan,
                             model::TrainingSetup setup, const hw::HardwareProfile& profile,
                             double memory_bytes, const MemoryOptions& options) {
  auto fits = [&](std::int64_t b) {
    setup.micro_batch_size = b;
    setup.global_batch_size = 0;  // the batch constraint is the caller's business
    return estimate_memory(model, plan, setup, profile, options).total <= memory_bytes;
  };
  if (!fits(1)) return 0;
  std::int64_t lo = 1, hi = 2;
  while (hi <= (1 << 20) && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi > (1 << 20)) return lo;
  while (hi - lo > 1) {  // invariant: fits(lo), !fits(hi)
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

double max_params(double memory_bytes, std::int64_t num_gpus, Precision precision,
                  Optimizer optimizer, std::int64_t zero_stage) {
  // States per GPU are linear in params: bytes = params * per_param_bytes_after_sharding.
  const MemoryBreakdown one = model_state_bytes(1.0, precision, optimizer, num_gpus, zero_stage);
  return memory_bytes / one.total;
}

}  // namespace trainsim::sim
