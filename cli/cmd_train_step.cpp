// `trainsim train-step`: runs the CS336 Transformer LM training step on local GPUs
// (validate/train) and prints measured forward / backward / dp_comm / optimizer / step time,
// tokens/s, model TFLOP/s and peak memory per category next to sim::estimate_step's
// prediction for the same configuration, with the error in percent. --trace adds a per-op
// CUDA-event trace of one extra step next to the simulator's per-op prediction.
// Compiled only when val_train is linked (it exports TRAINSIM_HAVE_TRAIN_STEP), so the glob in
// cli/CMakeLists.txt cannot break a tree where validate/ does not build train/ yet.
#ifdef TRAINSIM_HAVE_TRAIN_STEP
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "cli/commands.hpp"
#include "cli/estimate_print.hpp"
#include "cli/output.hpp"
#include "cli/plot.hpp"
#include "cli/resolve.hpp"
#include "common/errors.hpp"
#include "hardware/load.hpp"
#include "validate/train/train.hpp"

namespace trainsim::cli {

void add_train_step(CLI::App& app); // declared in commands.hpp once wired into main

namespace {

namespace vt = val::train;

struct TrainStepOptions {
  ModelOptions model;
  std::int64_t batch = 4, seq_len = 512, steps = 10, warmup = 5, num_gpus = 1, zero = 0;
  std::int64_t grad_accum = 1;
  std::string precision = "bf16-mixed", attention = "flash", recompute = "none", ddp = "none";
  double bucket_mb = 25, lr = 1e-3;
  std::string gpu = "h200", calibration, plot;
  std::uint64_t seed = 1;
  bool trace = false, predict_only = false, check_params = false;
  OutputOptions out;
};

// --check-params: the run's final fp32 master parameters against single-GPU training of the
// same global batch (same seed, data and steps: ddp none, ZeRO-0, batch x num_gpus per step).
// Not bitwise (reduction order differs), so the rule is on the RMS difference as a fraction of
// the furthest Adam can move a parameter in N steps (about N x lr): at most 1% for fp32 and 5%
// for bf16-mixed, whose gradients are rounded to bf16 before the sum.
struct ParamCheck {
  std::int64_t steps = 0, compared = 0;
  double max_abs = 0, rms = 0, limit_rms = 0, lr = 0;
  bool pass = false;
};

ParamCheck check_params(const vt::TrainOptions& o, const vt::TrainResult& r) {
  vt::TrainOptions ref = o;
  ref.num_gpus = 1;
  ref.batch_size = o.batch_size * o.num_gpus;
  ref.ddp = vt::DdpMode::none;
  ref.zero_stage = 0;
  ref.trace = false;
  ref.capture_final = true;
  const vt::TrainResult single = vt::run_train_step(ref);
  ParamCheck c;
  c.steps = o.steps + o.warmup;
  c.lr = o.adamw.lr;
  // Over the common prefix: the flat buffers are padded to a multiple of 16 x ranks.
  const std::size_t n = std::min(r.final_params.size(), single.final_params.size());
  if (n == 0)
    throw DeviceError("--check-params: no parameters were captured");
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(r.final_params[i]) - single.final_params[i];
    s += d * d;
    c.max_abs = std::max(c.max_abs, std::abs(d));
  }
  c.compared = static_cast<std::int64_t>(n);
  c.rms = std::sqrt(s / static_cast<double>(n));
  const double fraction = o.precision == model::Precision::fp32 ? 0.01 : 0.05;
  c.limit_rms = fraction * static_cast<double>(c.steps) * c.lr;
  c.pass = std::isfinite(c.rms) && c.rms <= c.limit_rms;
  return c;
}

std::string describe(const ParamCheck& c, std::int64_t num_gpus) {
  return fmt::format("--check-params: final parameters after {} steps on {} GPU(s) vs one GPU "
                     "training the same global batch: rms difference {:.3g} (limit {:.3g} = {} x "
                     "steps x lr), max |difference| {:.3g}, {} parameters: {}",
                     c.steps, num_gpus, c.rms, c.limit_rms,
                     c.limit_rms / (static_cast<double>(c.steps) * c.lr), c.max_abs, c.compared,
                     c.pass ? "MATCH" : "DIFFERS");
}

constexpr double kMs = 1e3, kGiB = 1024.0 * 1024 * 1024;

double error_pct(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured * 100 : 0.0;
}

std::string ms(double s) { return fmt::format("{:.3f}", s * kMs); }
std::string pct(double part, double whole) {
  return fmt::format("{:.1f}%", whole > 0 ? part / whole * 100 : 0.0);
}

// --trace, measured side: the ops largest first and their sums per category.
struct TraceView {
  std::vector<vt::TraceEntry> ops;
  std::array<double, vt::kNumTraceCategories> measured_s{};
  double gaps_s = 0;
  explicit TraceView(const vt::StepTrace& tr) : ops(tr.ops), gaps_s(tr.step_s - tr.traced_s) {
    std::stable_sort(ops.begin(), ops.end(),
                     [](const auto& a, const auto& b) { return a.total_s > b.total_s; });
    for (const auto& e : ops)
      measured_s[static_cast<std::size_t>(e.category)] += e.total_s;
  }
};

std::string cat_name(std::size_t c) {
  return std::string(vt::to_string(static_cast<vt::TraceCategory>(c)));
}

void add_trace_json(nlohmann::json& j, const vt::StepTrace& tr, const vt::TracePrediction& pred,
                    double measured_median_s) {
  const TraceView v(tr);
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& e : v.ops)
    ops.push_back({{"name", e.name},
                   {"category", std::string(vt::to_string(e.category))},
                   {"count", e.count},
                   {"measured_s", e.total_s},
                   {"share_fraction", tr.step_s > 0 ? e.total_s / tr.step_s : 0.0}});
  j["trace"] = ops;
  j["trace_summary"] = {{"step_s", tr.step_s},
                        {"traced_s", tr.traced_s},
                        {"gaps_s", v.gaps_s},
                        {"num_launches", tr.num_launches},
                        {"measured_step_median_s", measured_median_s},
                        {"predicted_step_s", pred.step_s}};
  nlohmann::json cats = nlohmann::json::array();
  for (std::size_t i = 0; i < vt::kNumTraceCategories; ++i)
    cats.push_back({{"category", cat_name(i)},
                    {"measured_s", v.measured_s[i]},
                    {"predicted_s", pred.by_category_s[i]},
                    {"error_pct", error_pct(pred.by_category_s[i], v.measured_s[i])}});
  j["trace_categories"] = cats;
  nlohmann::json predicted = nlohmann::json::array();
  for (const auto& op : pred.ops)
    predicted.push_back({{"name", op.name},
                         {"count", op.count},
                         {"fwd_s", op.fwd_s},
                         {"bwd_s", op.bwd_s},
                         {"total_s", op.total_s()}});
  j["trace_predicted"] = predicted;
}

// --trace tables: the measured ops (largest first), measured vs predicted by category, and the
// simulator's op list over the step.
void print_trace(Sink& sink, const vt::StepTrace& tr, const vt::TracePrediction& pred,
                 double measured_median_s) {
  const TraceView v(tr);
  const double gaps_s = v.gaps_s;
  sink.write("\n");
  sink.comment("--trace: one extra step after the measured ones (rank 0, not in the statistics "
               "above); every launch on the compute stream between two CUDA events, summed over "
               "layers and micro-batches");
  sink.comment(fmt::format("traced step {} ms on the GPU (measured steps: median {} ms): ops {} "
                           "ms + gaps {} ms (GPU idle or untraced launches), {} launches",
                           ms(tr.step_s), ms(measured_median_s), ms(tr.traced_s), ms(gaps_s),
                           tr.num_launches));
  Table t({"op", "category", "count", "measured (ms)", "share"},
          {"op", "category", "count", "measured_s", "share_fraction"});
  for (const auto& e : v.ops)
    t.add_row({e.name, std::string(vt::to_string(e.category)), fmt::format("{}", e.count),
               ms(e.total_s), pct(e.total_s, tr.step_s)},
              {e.name, std::string(vt::to_string(e.category)), fmt::format("{}", e.count),
               fmt::format("{}", e.total_s), fmt::format("{}", e.total_s / tr.step_s)});
  t.add_row({"(gaps: GPU idle or untraced)", "", "", ms(gaps_s), pct(gaps_s, tr.step_s)},
            {"gaps", "", "", fmt::format("{}", gaps_s), fmt::format("{}", gaps_s / tr.step_s)});
  t.add_row({"traced step", "", fmt::format("{}", tr.num_launches), ms(tr.step_s), "100.0%"},
            {"step", "", fmt::format("{}", tr.num_launches), fmt::format("{}", tr.step_s), "1"});
  t.print(sink);

  sink.write("\n");
  sink.comment("by category: predicted = sim::op_cost per op (as trainsim roofline --model) x "
               "layers x micro-batches, plus the step's recompute, dp_comm and optimizer; a GEMM's "
               "predicted backward is split evenly into dX and dW");
  Table c({"category", "measured (ms)", "share", "predicted (ms)", "share", "error"},
          {"category", "measured_s", "measured_fraction", "predicted_s", "predicted_fraction",
           "error_pct"});
  for (std::size_t i = 0; i < vt::kNumTraceCategories; ++i) {
    const double m = v.measured_s[i], p = pred.by_category_s[i];
    c.add_row({cat_name(i), ms(m), pct(m, tr.step_s), ms(p), pct(p, pred.step_s),
               m > 0 ? fmt::format("{:+.1f}%", error_pct(p, m)) : "-"},
              {cat_name(i), fmt::format("{}", m), fmt::format("{}", m / tr.step_s),
               fmt::format("{}", p), fmt::format("{}", p / pred.step_s),
               fmt::format("{}", error_pct(p, m))});
  }
  c.add_row({"gaps (idle/untraced)", ms(gaps_s), pct(gaps_s, tr.step_s), "-", "", "-"},
            {"gaps", fmt::format("{}", gaps_s), fmt::format("{}", gaps_s / tr.step_s), "", "", ""});
  c.add_row({"step", ms(tr.step_s), "100.0%", ms(pred.step_s), "100.0%",
             fmt::format("{:+.1f}%", error_pct(pred.step_s, tr.step_s))},
            {"step", fmt::format("{}", tr.step_s), "1", fmt::format("{}", pred.step_s), "1",
             fmt::format("{}", error_pct(pred.step_s, tr.step_s))});
  c.print(sink);

  sink.write("\n");
  sink.comment("prediction per op-list entry over the step (count = layers x micro-batches)");
  Table p({"op-list op", "count", "fwd (ms)", "bwd (ms)", "total (ms)", "share"},
          {"op", "count", "fwd_s", "bwd_s", "total_s", "share_fraction"});
  double fwd_s = 0, bwd_s = 0;
  for (const auto& op : pred.ops) {
    fwd_s += op.fwd_s;
    bwd_s += op.bwd_s;
    const bool listed = op.count > 0; // an op-list entry, else a step-level part
    p.add_row({op.name, listed ? fmt::format("{}", op.count) : "", listed ? ms(op.fwd_s) : "",
               listed ? ms(op.bwd_s) : "", ms(op.total_s()), pct(op.total_s(), pred.step_s)},
              {op.name, fmt::format("{}", op.count), fmt::format("{}", op.fwd_s),
               fmt::format("{}", op.bwd_s), fmt::format("{}", op.total_s()),
               fmt::format("{}", op.total_s() / pred.step_s)});
  }
  p.add_row({"step", "", ms(fwd_s), ms(bwd_s), ms(pred.step_s), "100.0%"},
            {"step", "", fmt::format("{}", fwd_s), fmt::format("{}", bwd_s),
             fmt::format("{}", pred.step_s), "1"});
  p.print(sink);
}

void plot_memory(const std::string& file, const vt::TrainOptions& o, const vt::TrainResult& r) {
  std::vector<Series> series;
  for (std::size_t c = 0; c < vt::kNumMemCategories; ++c) {
    Series s{std::string(vt::to_string(static_cast<vt::MemCategory>(c))), {}, "lines", {}};
    for (const auto& p : r.timeline)
      s.points.emplace_back(static_cast<double>(p.event), p.bytes[c] / kGiB);
    series.push_back(std::move(s));
  }
  Series total{"total", {}, "lines", {}};
  for (const auto& p : r.timeline)
    total.points.emplace_back(static_cast<double>(p.event), p.total() / kGiB);
  series.push_back(std::move(total));
  PlotSpec spec;
  spec.file = file;
  spec.title = fmt::format("{} batch {} x {} {} {}: device memory over one step (rank 0)",
                           o.model.name, o.batch_size, o.seq_len, model::to_string(o.precision),
                           model::to_string(o.recompute));
  spec.xlabel = "allocation event";
  spec.ylabel = "in use (GiB)";
  std::string phase;
  for (const auto& p : r.timeline)
    if (p.phase != phase) {
      phase = p.phase;
      spec.markers.push_back({static_cast<double>(p.event), phase});
    }
  plot_xy(spec, series);
}

/// The configuration as JSON (both the measured and the --predict-only output start with it).
nlohmann::json inputs_json(const vt::TrainOptions& o, const std::string& gpu,
                           const std::string& profile) {
  return {{"model", o.model.name},
          {"batch_size", o.batch_size},
          {"seq_len", o.seq_len},
          {"precision", model::to_string(o.precision)},
          {"attention", model::to_string(o.attention)},
          {"recompute", model::to_string(o.recompute)},
          {"num_gpus", o.num_gpus},
          {"ddp", vt::to_string(o.ddp)},
          {"bucket_bytes", o.bucket_bytes},
          {"zero_stage", o.zero_stage},
          {"grad_accumulation", o.grad_accumulation},
          {"gpu", gpu},
          {"profile", profile}};
}

// --predict-only: trainsim's side of the comparison, without a GPU.
void print_prediction_only(const TrainStepOptions& a, const vt::TrainOptions& o,
                           const sim::StepEstimate& est, const hw::HardwareProfile& profile) {
  const auto& b = est.breakdown_s;
  const auto& mem = est.memory;
  const std::vector<std::pair<std::string, double>> parts = {
      {"forward", b.forward},
      {"backward", b.backward + b.recompute},
      {"dp_comm", b.dp_comm - est.zero_allgather_s},
      {"optimizer", b.optimizer + est.zero_allgather_s},
      {"step", est.step_time_s}};
  Sink sink(a.out);
  if (sink.format() == Format::json) {
    nlohmann::json j;
    j["inputs"] = inputs_json(o, a.gpu, profile.name);
    for (const auto& [name, s] : parts)
      j["time"][name] = {{"predicted_s", s}};
    j["memory"]["total"] = {{"predicted_bytes", mem.total - mem.overhead}};
    j["memory"]["overhead_not_compared_bytes"] = mem.overhead;
    sink.json(j);
    return;
  }
  sink.comment(fmt::format("prediction only (no GPU run): model {}, batch {} x seq {}, {}, {} "
                           "attention, recompute {}, {} GPU(s) of {}; profile: {}",
                           o.model.name, o.batch_size, o.seq_len, model::to_string(o.precision),
                           model::to_string(o.attention), model::to_string(o.recompute), o.num_gpus,
                           a.gpu, profile.name));
  Table t({"part", "predicted (ms)"}, {"part", "predicted_s"});
  for (const auto& [name, s] : parts)
    t.add_row({name, ms(s)}, {name, fmt::format("{}", s)});
  t.print(sink);
  sink.comment(fmt::format("peak memory (allocator-visible): {:.3f} GiB; outside the allocator "
                           "(context, libraries): {:.3f} GiB",
                           (mem.total - mem.overhead) / kGiB, mem.overhead / kGiB));
}

int run_train_step(const TrainStepOptions& a) {
  vt::TrainOptions o;
  o.model = resolve_model(a.model);
  o.source = "train-step flags";
  o.batch_size = a.batch;
  o.seq_len = a.seq_len;
  o.precision = parse_precision(a.precision);
  o.attention = parse_attention(a.attention);
  o.recompute = parse_recompute(a.recompute);
  if (o.recompute == model::Recompute::selective_op)
    throw ConfigError("--recompute selective-op: torchtitan's per-op checkpointing is not in our "
                      "trainer (none, selective or full)");
  o.num_gpus = a.num_gpus;
  o.ddp = vt::parse_ddp(a.ddp);
  o.bucket_bytes = require_range("--bucket-mb", a.bucket_mb, kBucketMb) * 1024 * 1024;
  o.zero_stage = a.zero;
  o.grad_accumulation = a.grad_accum;
  o.steps = a.steps;
  o.warmup = a.warmup;
  o.adamw.lr = a.lr;
  o.seed = a.seed;
  o.trace = a.trace;
  vt::validate(o);
  if (!a.plot.empty())
    check_plot_file(a.plot);
  const hw::GpuSpec gpu = hw::load_gpu(a.gpu);
  const hw::HardwareProfile profile =
      a.calibration.empty() ? hw::default_profile(gpu.name) : hw::load_profile(a.calibration);
  const sim::StepEstimate est = vt::predict_train_step(o, gpu, profile);
  if (a.predict_only) {
    print_prediction_only(a, o, est, profile);
    return 0;
  }
  o.capture_final = a.check_params;
  const vt::TrainResult r = vt::run_train_step(o);
  std::optional<ParamCheck> pcheck;
  if (a.check_params)
    pcheck = check_params(o, r);

  const double tokens =
      static_cast<double>(o.batch_size * o.seq_len * o.grad_accumulation * o.num_gpus);
  const double step_s = r.step.median_s;
  const double flops_per_gpu = est.model_flops_per_step / static_cast<double>(o.num_gpus);
  const auto& b = est.breakdown_s;
  struct Row {
    std::string name;
    vt::PhaseStats measured;
    double predicted_s;
  };
  const std::vector<Row> rows = {{"forward", r.forward, b.forward},
                                 {"backward", r.backward, b.backward + b.recompute},
                                 // ZeRO-1's weight all-gather follows the update: the run
                                 // times it in its optimizer phase, so it is compared there.
                                 {"dp_comm", r.dp_comm, b.dp_comm - est.zero_allgather_s},
                                 {"optimizer", r.optimizer, b.optimizer + est.zero_allgather_s},
                                 {"step", r.step, est.step_time_s}};
  const auto& mem = est.memory;
  auto cat = [&](vt::MemCategory c) { return r.at_peak_bytes[static_cast<std::size_t>(c)]; };
  auto cpeak = [&](vt::MemCategory c) { return r.peak_bytes[static_cast<std::size_t>(c)]; };
  struct MemRow {
    std::string name;
    double at_peak, peak, predicted;
  };
  using C = vt::MemCategory;
  const std::vector<MemRow> mrows = {
      {"weights", cat(C::weights), cpeak(C::weights), mem.weights},
      {"gradients", cat(C::gradients), cpeak(C::gradients), mem.gradients},
      {"optimizer", cat(C::optimizer), cpeak(C::optimizer), mem.optimizer},
      {"activations", cat(C::activations), cpeak(C::activations), mem.activations},
      {"workspace (vs buffers)", cat(C::workspace), cpeak(C::workspace), mem.buffers},
      // The allocator cannot see the CUDA context, cuBLAS and NCCL internals: the profile's
      // overhead is left out of the comparison and reported beside it.
      {"total (allocator)", r.peak_total_bytes, r.peak_total_bytes, mem.total - mem.overhead}};

  Sink sink(a.out);
  const std::string inputs = fmt::format(
      "model {} ({:.1f} M params), batch {} x seq {}, {}, {} attention, recompute {}, {} GPU(s) "
      "({}), ddp {}, ZeRO-{}, accumulation {}; {} steps after {} warm-up; profile: {}",
      o.model.name, static_cast<double>(vt::make_layout(o.model, o.model.name).num_params) / 1e6,
      o.batch_size, o.seq_len, model::to_string(o.precision), model::to_string(o.attention),
      model::to_string(o.recompute), o.num_gpus, r.gpu_name, vt::to_string(o.ddp), o.zero_stage,
      o.grad_accumulation, o.steps, o.warmup, profile.name);
  if (sink.format() == Format::json) {
    nlohmann::json j;
    j["inputs"] = inputs_json(o, gpu.name, profile.name);
    j["inputs"]["steps"] = o.steps;
    j["inputs"]["warmup"] = o.warmup;
    j["inputs"]["gpu_name"] = r.gpu_name;
    j["inputs"]["versions"] = r.versions;
    for (const Row& row : rows)
      j["time"][row.name] = {{"measured_median_s", row.measured.median_s},
                             {"measured_min_s", row.measured.min_s},
                             {"measured_stdev_s", row.measured.stdev_s},
                             {"samples", row.measured.samples},
                             {"predicted_s", row.predicted_s},
                             {"error_pct", error_pct(row.predicted_s, row.measured.median_s)}};
    j["tokens_per_s"] = {{"measured", tokens / step_s}, {"predicted", est.tokens_per_s}};
    j["model_flops_per_s_per_gpu"] = {{"measured", flops_per_gpu / step_s},
                                      {"predicted", est.achieved_flops_per_s_per_gpu}};
    for (const MemRow& m : mrows)
      j["memory"][m.name.substr(0, m.name.find(' '))] = {
          {"measured_at_peak_bytes", m.at_peak},
          {"measured_peak_bytes", m.peak},
          {"predicted_bytes", m.predicted},
          {"error_pct", error_pct(m.predicted, m.at_peak)}};
    j["memory"]["overhead_not_compared_bytes"] = mem.overhead;
    j["memory_reserved_bytes"] = r.reserved_bytes;
    j["losses"] = r.losses;
    nlohmann::json tl = nlohmann::json::array();
    for (const auto& p : r.timeline) {
      nlohmann::json q = {{"event", p.event}, {"phase", p.phase}};
      for (std::size_t c = 0; c < vt::kNumMemCategories; ++c)
        q[std::string(vt::to_string(static_cast<C>(c))) + "_bytes"] = p.bytes[c];
      tl.push_back(q);
    }
    j["memory_timeline"] = tl;
    if (o.trace)
      add_trace_json(j, r.trace, vt::predict_trace(o, gpu, profile), r.step.median_s);
    if (pcheck)
      j["param_check"] = {{"steps", pcheck->steps},         {"compared_params", pcheck->compared},
                          {"rms_difference", pcheck->rms},  {"max_abs_difference", pcheck->max_abs},
                          {"limit_rms", pcheck->limit_rms}, {"lr", pcheck->lr},
                          {"match", pcheck->pass}};
    sink.json(j);
  } else {
    sink.comment(inputs);
    sink.comment(r.versions);
    Table t({"part", "measured (ms)", "min (ms)", "stdev (ms)", "predicted (ms)", "error"},
            {"part", "measured_median_s", "measured_min_s", "measured_stdev_s", "predicted_s",
             "error_pct"});
    for (const Row& row : rows)
      t.add_row({row.name, fmt::format("{:.3f}", row.measured.median_s * kMs),
                 fmt::format("{:.3f}", row.measured.min_s * kMs),
                 fmt::format("{:.3f}", row.measured.stdev_s * kMs),
                 fmt::format("{:.3f}", row.predicted_s * kMs),
                 fmt::format("{:+.1f}%", error_pct(row.predicted_s, row.measured.median_s))},
                {row.name, fmt::format("{}", row.measured.median_s),
                 fmt::format("{}", row.measured.min_s), fmt::format("{}", row.measured.stdev_s),
                 fmt::format("{}", row.predicted_s),
                 fmt::format("{}", error_pct(row.predicted_s, row.measured.median_s))});
    t.add_row({"tokens/s", fmt::format("{:.4g}", tokens / step_s), "", "",
               fmt::format("{:.4g}", est.tokens_per_s),
               fmt::format("{:+.1f}%", error_pct(est.tokens_per_s, tokens / step_s))},
              {"tokens_per_s", fmt::format("{}", tokens / step_s), "", "",
               fmt::format("{}", est.tokens_per_s), ""});
    t.add_row({"model TFLOP/s per GPU", fmt::format("{:.1f}", flops_per_gpu / step_s / 1e12), "",
               "", fmt::format("{:.1f}", est.achieved_flops_per_s_per_gpu / 1e12),
               fmt::format("{:+.1f}%",
                           error_pct(est.achieved_flops_per_s_per_gpu, flops_per_gpu / step_s))},
              {"model_flops_per_s_per_gpu", fmt::format("{}", flops_per_gpu / step_s), "", "",
               fmt::format("{}", est.achieved_flops_per_s_per_gpu), ""});
    t.print(sink);
    sink.write("\n");
    Table m({"memory", "at peak (GiB)", "category peak (GiB)", "predicted (GiB)", "error"},
            {"memory", "measured_at_peak_bytes", "measured_peak_bytes", "predicted_bytes",
             "error_pct"});
    for (const MemRow& row : mrows)
      m.add_row({row.name, fmt::format("{:.3f}", row.at_peak / kGiB),
                 fmt::format("{:.3f}", row.peak / kGiB),
                 fmt::format("{:.3f}", row.predicted / kGiB),
                 fmt::format("{:+.1f}%", error_pct(row.predicted, row.at_peak))},
                {row.name, fmt::format("{}", row.at_peak), fmt::format("{}", row.peak),
                 fmt::format("{}", row.predicted),
                 fmt::format("{}", error_pct(row.predicted, row.at_peak))});
    m.print(sink);
    sink.comment(fmt::format("predicted overhead outside the allocator (CUDA context, libraries): "
                             "{:.3f} GiB, not compared",
                             mem.overhead / kGiB));
    sink.comment(fmt::format("allocator reserved {:.3f} GiB; loss {:.4f} (first step) -> {:.4f} "
                             "(last step)",
                             r.reserved_bytes / kGiB, r.losses.front(), r.losses.back()));
    if (o.trace)
      print_trace(sink, r.trace, vt::predict_trace(o, gpu, profile), r.step.median_s);
    if (pcheck)
      sink.comment(describe(*pcheck, o.num_gpus));
  }
  if (!a.plot.empty())
    plot_memory(a.plot, o, r);
  if (pcheck && !pcheck->pass) {
    fmt::print(stderr, "error: {}\n", describe(*pcheck, o.num_gpus));
    return 3;
  }
  return 0;
}

} // namespace

void add_train_step(CLI::App& app) {
  auto o = std::make_shared<TrainStepOptions>();
  auto* cmd = app.add_subcommand(
      "train-step",
      "Run a real CS336 Transformer LM training step on local GPUs: measured vs predicted time "
      "and memory");
  add_model_options(*cmd, o->model, true);
  cmd->add_option("--batch", o->batch, "Sequences per micro-batch per GPU")->capture_default_str();
  cmd->add_option("--seq-len", o->seq_len, "Sequence length (tokens)")->capture_default_str();
  cmd->add_option("--precision", o->precision, "fp32 or bf16-mixed")->capture_default_str();
  cmd->add_option("--attention", o->attention, "flash (bf16, head_dim 64/128) or naive")
      ->capture_default_str();
  cmd->add_option("--recompute", o->recompute, "Activation recomputation: none, selective, full")
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "Measured optimizer steps")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Warm-up steps (not measured)")->capture_default_str();
  cmd->add_option("--num-gpus", o->num_gpus, "Data-parallel GPUs (one thread each)")
      ->capture_default_str();
  cmd->add_option("--ddp", o->ddp, "Gradient sync: none, naive, flat, overlapped, bucketed")
      ->capture_default_str();
  cmd->add_option("--bucket-mb", o->bucket_mb, "Bucket size for --ddp bucketed (MiB)")
      ->capture_default_str();
  cmd->add_option("--zero", o->zero, "ZeRO stage: 0 or 1 (reduce-scatter + all-gather)")
      ->capture_default_str();
  cmd->add_option("--grad-accum", o->grad_accum, "Micro-batches per optimizer step")
      ->capture_default_str();
  cmd->add_option("--lr", o->lr, "AdamW learning rate")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Initialisation and data seed")->capture_default_str();
  cmd->add_option("--gpu", o->gpu, "GPU preset for the prediction")->capture_default_str();
  cmd->add_option("--calibration", o->calibration,
                  "Hardware profile for the prediction (default: the GPU's profile)");
  cmd->add_option("--plot", o->plot, "Write memory over the step by category (.png or .svg)");
  cmd->add_flag("--trace", o->trace,
                "Time every kernel of one extra step with CUDA events and print it next to the "
                "model's per-op prediction (rank 0, after the measured steps, not in their "
                "statistics)");
  cmd->add_flag("--check-params", o->check_params,
                "After the run, train the same global batch on one GPU (ddp none, ZeRO-0) and "
                "compare the final parameters: RMS difference <= 1% (fp32) or 5% (bf16-mixed) "
                "of steps x lr, else exit 3");
  cmd->add_flag("--predict-only", o->predict_only,
                "Print trainsim's prediction for this configuration and stop (no GPU needed)");
  add_output_options(*cmd, o->out);
  cmd->footer("Example: trainsim train-step --model cs336-xl --batch 4 --seq-len 512 "
              "--precision bf16-mixed --attention flash --recompute none --steps 10 --warmup 5");
  cmd->callback([o] { run_train_step(*o); });
}

} // namespace trainsim::cli

#endif // TRAINSIM_HAVE_TRAIN_STEP
