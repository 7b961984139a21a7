// Parts of the training-step API that need no GPU: option validation, statistics and the
// prediction through sim::estimate_step.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "common/errors.hpp"
#include "hardware/load.hpp"
#include "validate/train/train.hpp"

namespace trainsim::val::train {

std::string_view to_string(DdpMode m) {
  switch (m) {
  case DdpMode::none: return "none";
  case DdpMode::naive: return "naive";
  case DdpMode::flat: return "flat";
  case DdpMode::overlapped: return "overlapped";
  case DdpMode::bucketed: return "bucketed";
  }
  return "?";
}

DdpMode parse_ddp(const std::string& s) {
  for (DdpMode m :
       {DdpMode::none, DdpMode::naive, DdpMode::flat, DdpMode::overlapped, DdpMode::bucketed})
    if (to_string(m) == s)
      return m;
  throw ConfigError(
      fmt::format("--ddp = '{}': must be none, naive, flat, overlapped or bucketed", s));
}

void validate(const TrainOptions& o) {
  Problems p(o.source);
  try {
    static_cast<void>(make_layout(o.model, o.model.name));
  } catch (const ConfigError& e) {
    p.add(e.what());
  }
  if (o.batch_size <= 0)
    p.add(fmt::format("batch_size = {}: must be positive", o.batch_size));
  if (o.seq_len <= 0)
    p.add(fmt::format("seq_len = {}: must be positive", o.seq_len));
  if (o.precision != model::Precision::fp32 && o.precision != model::Precision::bf16_mixed)
    p.add(fmt::format("precision = {}: must be fp32 or bf16-mixed", model::to_string(o.precision)));
  if (o.attention == model::AttentionImpl::flash) {
    if (o.precision == model::Precision::fp32)
      p.add("attention = flash with precision = fp32: our FlashAttention-2 kernel is bf16/fp16 "
            "only; use --attention naive or --precision bf16-mixed");
    if (o.model.head_dim != 64 && o.model.head_dim != 128)
      p.add(fmt::format("attention = flash with head_dim = {}: the kernel supports 64 or 128; "
                        "use --attention naive",
                        o.model.head_dim));
  }
  if (o.num_gpus <= 0)
    p.add(fmt::format("num_gpus = {}: must be positive", o.num_gpus));
  if (o.num_gpus > 1 && o.ddp == DdpMode::none && o.zero_stage == 0)
    p.add(fmt::format("num_gpus = {} with ddp = none: pick a gradient sync (--ddp) or --zero 1",
                      o.num_gpus));
  if (o.zero_stage == 1 && o.ddp != DdpMode::none)
    p.add(fmt::format("zero_stage = 1 with ddp = {}: ZeRO-1 synchronises gradients by one "
                      "reduce-scatter after backward; leave --ddp at none",
                      to_string(o.ddp)));
  if (o.zero_stage != 0 && o.zero_stage != 1)
    p.add(fmt::format("zero_stage = {}: must be 0 or 1", o.zero_stage));
  if (o.bucket_bytes <= 0)
    p.add(fmt::format("bucket_bytes = {}: must be positive", o.bucket_bytes));
  if (o.grad_accumulation <= 0)
    p.add(fmt::format("grad_accumulation = {}: must be positive", o.grad_accumulation));
  if (o.steps <= 0)
    p.add(fmt::format("steps = {}: must be positive", o.steps));
  if (o.warmup < 0)
    p.add(fmt::format("warmup = {}: must be >= 0", o.warmup));
  if (o.data_period <= 0)
    p.add(fmt::format("data_period = {}: must be positive", o.data_period));
  p.throw_if_any();
}

PhaseStats phase_stats(std::vector<double> s) {
  PhaseStats r;
  r.samples = static_cast<std::int64_t>(s.size());
  if (s.empty())
    return r;
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  r.median_s = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  r.min_s = s.front();
  r.mean_s = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double x : s)
    var += (x - r.mean_s) * (x - r.mean_s);
  r.stdev_s = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
  return r;
}

model::ParallelPlan train_plan(const TrainOptions& o) {
  model::ParallelPlan p;
  p.dp = o.num_gpus;
  p.zero_stage = o.zero_stage;
  p.recompute = o.recompute;
  return p;
}

model::TrainingSetup train_setup(const TrainOptions& o) {
  model::TrainingSetup s;
  s.micro_batch_size = o.batch_size;
  s.global_batch_size = o.batch_size * o.grad_accumulation * o.num_gpus;
  s.seq_len = o.seq_len;
  s.precision = o.precision;
  s.attention = o.attention;
  s.optimizer = model::Optimizer::adamw;
  return s;
}

sim::StepEstimate predict_train_step(const TrainOptions& o, const hw::GpuSpec& gpu,
                                     const hw::HardwareProfile& profile) {
  validate(o);
  const model::ParallelPlan plan = train_plan(o);
  const model::TrainingSetup setup = train_setup(o);
  model::validate(plan, o.model, setup, o.num_gpus, o.source);
  sim::StepOptions so;
  so.bucket_bytes = o.bucket_bytes;
  so.dp_overlap = o.ddp == DdpMode::overlapped || o.ddp == DdpMode::bucketed;
  return sim::estimate_step(o.model, hw::single_node_cluster(gpu, o.num_gpus), gpu, profile, plan,
                            setup, so);
}

} // namespace trainsim::val::train
