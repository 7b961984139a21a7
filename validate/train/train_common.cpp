// Parts of the training-step API that need no GPU: option validation, statistics and the
// prediction through sim::estimate_step.
#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "common/stats.hpp"
#include "hardware/load.hpp"
#include "model/load.hpp"
#include "model/ops.hpp"
#include "simulate/roofline.hpp"
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

std::string_view to_string(TraceCategory c) {
  switch (c) {
  case TraceCategory::gemm_fwd: return "GEMM fwd";
  case TraceCategory::gemm_bwd_dx: return "GEMM bwd dX";
  case TraceCategory::gemm_bwd_dw: return "GEMM bwd dW";
  case TraceCategory::attention_fwd: return "attention fwd";
  case TraceCategory::attention_bwd: return "attention bwd";
  case TraceCategory::norm: return "norms";
  case TraceCategory::elementwise: return "elementwise/casts";
  case TraceCategory::embedding_loss: return "embedding+loss";
  case TraceCategory::recompute: return "recompute";
  case TraceCategory::dp_comm: return "dp comm";
  case TraceCategory::optimizer: return "optimizer";
  case TraceCategory::other: return "other";
  }
  return "?";
}

void validate(const TrainOptions& o) {
  Problems p(o.source);
  try {
    static_cast<void>(make_layout(o.model, o.model.name));
  } catch (const ConfigError& e) {
    p.add(e.what());
  }
  // Sizes one GPU can train (as model::validate bounds a TrainingSetup) and counts of steps a
  // measurement can run.
  auto count = [&](const char* field, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < lo || v > hi)
      p.add(fmt::format("{} = {}: must be in {}..{}", field, v, lo, hi));
  };
  count("batch_size", o.batch_size, 1, 1 << 20);
  count("seq_len", o.seq_len, 1, 1 << 24);
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
  count("num_gpus", o.num_gpus, 1, 1024);
  if (o.num_gpus > 1 && o.ddp == DdpMode::none && o.zero_stage == 0)
    p.add(fmt::format("num_gpus = {} with ddp = none: pick a gradient sync (--ddp) or --zero 1",
                      o.num_gpus));
  if (o.zero_stage == 1 && o.ddp != DdpMode::none)
    p.add(fmt::format("zero_stage = 1 with ddp = {}: ZeRO-1 synchronises gradients by one "
                      "reduce-scatter after backward; leave --ddp at none",
                      to_string(o.ddp)));
  if (o.zero_stage != 0 && o.zero_stage != 1)
    p.add(fmt::format("zero_stage = {}: must be 0 or 1", o.zero_stage));
  if (!(o.bucket_bytes > 0 && o.bucket_bytes <= 0x1p40))
    p.add(fmt::format("bucket_bytes = {}: must be in (0, 2^40]", o.bucket_bytes));
  count("grad_accumulation", o.grad_accumulation, 1, 1 << 20);
  count("steps", o.steps, 1, 1000000);
  count("warmup", o.warmup, 0, 1000000);
  count("data_period", o.data_period, 1, 1 << 20);
  const AdamWConfig& a = o.adamw; // AdamW's own domain (Loshchilov and Hutter 2019)
  if (!(a.lr > 0 && a.lr <= 10))
    p.add(fmt::format("lr = {}: must be in (0, 10]", a.lr));
  if (!(a.beta1 >= 0 && a.beta1 < 1) || !(a.beta2 >= 0 && a.beta2 < 1))
    p.add(fmt::format("beta1 = {}, beta2 = {}: each must be in [0, 1)", a.beta1, a.beta2));
  if (!(a.eps > 0 && a.eps <= 1))
    p.add(fmt::format("eps = {}: must be in (0, 1]", a.eps));
  if (!(a.weight_decay >= 0 && a.weight_decay <= 10))
    p.add(fmt::format("weight_decay = {}: must be in [0, 10]", a.weight_decay));
  p.throw_if_any();
}

PhaseStats phase_stats(std::vector<double> s) {
  PhaseStats r;
  r.samples = static_cast<std::int64_t>(s.size());
  if (s.empty())
    return r;
  std::sort(s.begin(), s.end()); // the mean sums in ascending order
  const SampleSummary sum = summarize(s);
  r.median_s = sum.median;
  r.min_s = sum.min;
  r.mean_s = sum.mean;
  r.stdev_s = sum.stdev;
  return r;
}

std::vector<GradBucket> make_grad_buckets(const ParamLayout& layout, DdpMode ddp,
                                          double bucket_bytes, std::size_t elem_bytes) {
  std::vector<GradBucket> buckets;
  const double limit = ddp == DdpMode::overlapped ? 0.0 : bucket_bytes;
  GradBucket cur;
  for (std::size_t i = layout.tensors.size(); i-- > 0;) {
    const std::int64_t lo = layout.tensors[i].offset;
    const std::int64_t hi =
        i + 1 < layout.tensors.size() ? layout.tensors[i + 1].offset : layout.num_padded_params;
    if (cur.tensors.empty())
      cur.hi = hi;
    cur.lo = lo;
    cur.first = i;
    cur.tensors.push_back(i);
    if (static_cast<double>(cur.hi - cur.lo) * static_cast<double>(elem_bytes) >= limit || i == 0) {
      buckets.push_back(cur);
      cur = GradBucket{};
    }
  }
  return buckets;
}

namespace {

std::int64_t int_field(const nlohmann::json& j, const char* key, std::int64_t lo, std::int64_t hi,
                       const std::string& where) {
  if (!j.contains(key) || !j[key].is_number())
    throw ConfigError(fmt::format("{}: {}: missing (an integer in {}..{})", where, key, lo, hi));
  const double v = j[key].get<double>();
  if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)) || v != std::floor(v))
    throw ConfigError(fmt::format("{}: {} = {}: must be an integer in {}..{}", where, key,
                                  json_brief(j[key]), lo, hi));
  return static_cast<std::int64_t>(v);
}

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string())
    throw ConfigError(fmt::format("{}: {}: missing (a string)", where, key));
  return j[key].get<std::string>();
}

template <class E, std::size_t N>
E enum_field(const nlohmann::json& j, const char* key, const std::array<E, N>& values,
             const std::string& where) {
  const std::string s = string_field(j, key, where);
  std::string names;
  for (E v : values) {
    if (model::to_string(v) == s)
      return v;
    names += (names.empty() ? "" : ", ") + std::string(model::to_string(v));
  }
  throw ConfigError(fmt::format("{}: {} = '{}': must be one of {}", where, key, s, names));
}

} // namespace

TrainOptions options_from_inputs_json(const nlohmann::json& in, const std::string& where) {
  if (!in.is_object())
    throw ConfigError(fmt::format("{}: inputs: expected an object", where));
  TrainOptions o;
  o.source = where;
  const std::string name =
      require_data_preset_name(string_field(in, "model", where), "model", where);
  try {
    o.model = model::load_model(name);
  } catch (const ConfigError& e) { // the loader speaks of --model; here it is a file's field
    throw ConfigError(
        fmt::format("{}: model = '{}': not a model preset ({})", where, name, e.what()));
  }
  o.batch_size = int_field(in, "batch_size", 1, 1 << 20, where);
  o.seq_len = int_field(in, "seq_len", 1, 1 << 24, where);
  o.precision = enum_field(in, "precision",
                           std::array{model::Precision::fp32, model::Precision::bf16_mixed}, where);
  o.attention = enum_field(
      in, "attention", std::array{model::AttentionImpl::flash, model::AttentionImpl::naive}, where);
  o.recompute = enum_field(
      in, "recompute",
      std::array{model::Recompute::none, model::Recompute::selective, model::Recompute::full},
      where);
  o.num_gpus = int_field(in, "num_gpus", 1, 1 << 16, where);
  try {
    o.ddp = parse_ddp(string_field(in, "ddp", where));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", where, e.what()));
  }
  if (!in.contains("bucket_bytes") || !in["bucket_bytes"].is_number() ||
      !(in["bucket_bytes"].get<double>() > 0 && in["bucket_bytes"].get<double>() <= 1e15))
    throw ConfigError(fmt::format("{}: bucket_bytes: must be a number in (0, 1e15]", where));
  o.bucket_bytes = in["bucket_bytes"].get<double>();
  o.zero_stage = int_field(in, "zero_stage", 0, 1, where);
  o.grad_accumulation = int_field(in, "grad_accumulation", 1, 1 << 20, where);
  validate(o);
  return o;
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
  // The collectives this run issues, priced one by one: naive all-reduces every tensor after
  // backward, flat the whole padded buffer once, overlapped/bucketed the buckets of the GPU step,
  // ZeRO-1 reduce-scatters the whole padded buffer once.
  if (o.num_gpus > 1 && (o.zero_stage == 1 || o.ddp != DdpMode::none)) {
    const ParamLayout layout = make_layout(o.model, o.source);
    const double esz = o.precision == model::Precision::fp32 ? 4.0 : 2.0;
    if (o.zero_stage == 1) { // one reduce-scatter of the whole flat buffer after backward
      so.dp_bucket_list_bytes.push_back(static_cast<double>(layout.num_padded_params) * esz);
    } else if (o.ddp == DdpMode::naive) {
      for (const ParamTensor& t : layout.tensors)
        so.dp_bucket_list_bytes.push_back(static_cast<double>(t.num_elements()) * esz);
    } else if (o.ddp == DdpMode::flat) {
      so.dp_bucket_list_bytes.push_back(static_cast<double>(layout.num_padded_params) * esz);
    } else {
      for (const GradBucket& b :
           make_grad_buckets(layout, o.ddp, o.bucket_bytes, static_cast<std::size_t>(esz)))
        so.dp_bucket_list_bytes.push_back(static_cast<double>(b.hi - b.lo) * esz);
    }
  }
  return sim::estimate_step(o.model, hw::single_node_cluster(gpu, o.num_gpus), gpu, profile, plan,
                            setup, so);
}

TracePrediction predict_trace(const TrainOptions& o, const hw::GpuSpec& gpu,
                              const hw::HardwareProfile& profile) {
  const sim::StepEstimate est = predict_train_step(o, gpu, profile);
  const model::OpList ops =
      model::build_ops(o.model, model::make_op_context(train_plan(o), train_setup(o)));
  using C = TraceCategory;
  TracePrediction p;
  auto add = [&](C c, double s) { p.by_category_s[static_cast<std::size_t>(c)] += s; };
  auto add_list = [&](const std::vector<model::Op>& list, std::int64_t count) {
    for (const model::Op& op : list) {
      if (model::is_communication(op.kind))
        continue; // tp = ep = 1 here
      const double n = static_cast<double>(count);
      const double f = n * sim::op_cost(op, sim::Pass::forward, gpu, profile).queued_s;
      const double b = n * sim::op_cost(op, sim::Pass::backward, gpu, profile).queued_s;
      p.ops.push_back({op.name, count, f, b});
      // Naive attention's batched GEMMs, softmax and dropout are the attention core.
      const bool attention = model::is_attention_part(op.role);
      if (attention) {
        add(C::attention_fwd, f);
        add(C::attention_bwd, b);
      } else if (op.kind == model::OpKind::gemm) {
        add(C::gemm_fwd, f);
        add(C::gemm_bwd_dx, b / 2);
        add(C::gemm_bwd_dw, b / 2);
      } else {
        const C c = op.kind == model::OpKind::norm ? C::norm
                    : op.role == model::OpRole::embedding || op.role == model::OpRole::loss
                        ? C::embedding_loss
                    : op.kind == model::OpKind::elementwise ? C::elementwise
                                                            : C::other;
        add(c, f + b);
      }
    }
  };
  const std::int64_t K = est.micro_batches;
  add_list(ops.embedding, K);
  for (const auto& kind : ops.layers)
    add_list(kind.ops, kind.num_layers * K);
  add_list(ops.head, K);
  add_list(ops.mtp, ops.num_mtp_modules * K);
  const sim::StepBreakdown& b = est.breakdown_s;
  p.ops.push_back({"recompute", 0, 0, 0, b.recompute});
  add(C::recompute, b.recompute);
  if (est.dp_overlap_slowdown_s > 0) { // inside b.backward, not in any op's own time
    p.ops.push_back({"backward slowed by overlapped dp_comm", 0, 0, 0, est.dp_overlap_slowdown_s});
    add(C::dp_comm, est.dp_overlap_slowdown_s);
  }
  // ZeRO-1's all-gather runs after the update, timed with the optimizer in the GPU step.
  p.ops.push_back({"dp_comm", 0, 0, 0, b.dp_comm - est.zero_allgather_s});
  add(C::dp_comm, b.dp_comm - est.zero_allgather_s);
  p.ops.push_back({"optimizer", 0, 0, 0, b.optimizer + est.zero_allgather_s});
  add(C::optimizer, b.optimizer + est.zero_allgather_s);
  // Parts a single-node data-parallel run does not have (zero here; kept so parts sum).
  const double rest = b.tp_comm + b.cp_comm + b.ep_comm + b.pp_comm + b.bubble;
  if (rest > 0) {
    p.ops.push_back({"tp/cp/ep/pp comm + bubble", 0, 0, 0, rest});
    add(C::other, rest);
  }
  p.step_s = est.step_time_s;
  return p;
}

} // namespace trainsim::val::train
