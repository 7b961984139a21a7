// `trainsim train-step`: runs the CS336 Transformer LM training step on local GPUs
// (validate/train) and prints measured forward / backward / dp_comm / optimizer / step time,
// tokens/s, model TFLOP/s and peak memory per category next to sim::estimate_step's
// prediction for the same configuration, with the error in percent.
// Compiled only when val_train is linked (it exports TRAINSIM_HAVE_TRAIN_STEP), so the glob in
// cli/CMakeLists.txt cannot break a tree where validate/ does not build train/ yet.
#ifdef TRAINSIM_HAVE_TRAIN_STEP
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli/commands.hpp"
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
  OutputOptions out;
};

constexpr double kMs = 1e3, kGiB = 1024.0 * 1024 * 1024;

double error_pct(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured * 100 : 0.0;
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
      spec.extra.push_back(
          fmt::format("set arrow from {0},graph 0 to {0},graph 1 nohead dt 2", p.event));
      spec.extra.push_back(
          fmt::format("set label '{}' at {},graph 0.97 rotate left font ',8'", phase, p.event));
    }
  plot_xy(spec, series);
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
  o.num_gpus = a.num_gpus;
  o.ddp = vt::parse_ddp(a.ddp);
  o.bucket_bytes = a.bucket_mb * 1024 * 1024;
  o.zero_stage = a.zero;
  o.grad_accumulation = a.grad_accum;
  o.steps = a.steps;
  o.warmup = a.warmup;
  o.adamw.lr = a.lr;
  o.seed = a.seed;
  vt::validate(o);
  if (!a.plot.empty())
    check_plot_file(a.plot);
  const hw::GpuSpec gpu = hw::load_gpu(a.gpu);
  const hw::HardwareProfile profile =
      a.calibration.empty() ? hw::default_profile(gpu.name) : hw::load_profile(a.calibration);
  const sim::StepEstimate est = vt::predict_train_step(o, gpu, profile);
  const vt::TrainResult r = vt::run_train_step(o);

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
                                 {"dp_comm", r.dp_comm, b.dp_comm},
                                 {"optimizer", r.optimizer, b.optimizer},
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
    j["inputs"] = {{"model", o.model.name},
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
                   {"steps", o.steps},
                   {"warmup", o.warmup},
                   {"gpu", gpu.name},
                   {"gpu_name", r.gpu_name},
                   {"versions", r.versions},
                   {"profile", profile.name}};
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
  }
  if (!a.plot.empty())
    plot_memory(a.plot, o, r);
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
  add_output_options(*cmd, o->out);
  cmd->footer("Example: trainsim train-step --model cs336-xl --batch 4 --seq-len 512 "
              "--precision bf16-mixed --attention flash --recompute none --steps 10 --warmup 5");
  cmd->callback([o] { run_train_step(*o); });
}

} // namespace trainsim::cli

#endif // TRAINSIM_HAVE_TRAIN_STEP
