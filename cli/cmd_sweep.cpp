// `trainsim sweep`: vary one input of `estimate` over a list of values; CSV/JSON/table and
// an optional plot (e.g. scaling efficiency against GPU count).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/estimate_print.hpp"
#include "cli/output.hpp"
#include "cli/plot.hpp"
#include "cli/resolve.hpp"
#include "common/checks.hpp"
#include "common/errors.hpp"
#include "simulate/roofline.hpp"
#include "simulate/step.hpp"

namespace trainsim::cli {
namespace {

struct SweepOptions {
  ModelOptions model;
  MachineOptions machine;
  PlanOptions plan;
  SetupOptions setup;
  StepFlags step;
  std::string vary;
  std::string values;
  std::string plot;
  std::string metric = "mfu";
  OutputOptions out;
};

const std::vector<std::string> kVaryable{"num-gpus", "micro-batch",  "seq-len",  "tp", "pp", "cp",
                                         "zero",     "global-batch", "bucket-mb"};

// Rows of one sweep: each is a full estimate, and more would be a typo, not a study.
constexpr std::size_t kMaxSweepValues = 1000;

std::vector<double> parse_values(const std::string& text) {
  std::vector<double> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    double x = 0;
    try {
      std::size_t used = 0;
      x = std::stod(item, &used);
      if (used != item.size())
        throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw ConfigError(
          fmt::format("--values: '{}' is not a number (expected e.g. 8,16,32)", item));
    }
    // Finite and below 2^53, so that integer values convert exactly (dimensions are
    // range-checked again where they are used).
    require_range("--values", x, Interval{0, 9e15, ""});
    v.push_back(x);
    if (v.size() > kMaxSweepValues)
      throw ConfigError(
          fmt::format("--values: more than {} values (one estimate each)", kMaxSweepValues));
  }
  if (v.empty())
    throw ConfigError("--values: at least one value is required (e.g. 8,16,32)");
  return v;
}

int run_sweep(const SweepOptions& o) {
  if (!o.plot.empty())
    check_plot_file(o.plot);
  if (std::find(kVaryable.begin(), kVaryable.end(), o.vary) == kVaryable.end()) {
    std::string all;
    for (const auto& k : kVaryable)
      all += (all.empty() ? "" : ", ") + k;
    throw ConfigError(fmt::format("--vary = {}: must be one of {}", o.vary, all));
  }
  if (o.metric != "mfu" && o.metric != "step_time_s" && o.metric != "tokens_per_s" &&
      o.metric != "scaling_efficiency" && o.metric != "memory_gb")
    throw ConfigError(fmt::format("--metric = {}: must be mfu, step_time_s, tokens_per_s, "
                                  "scaling_efficiency or memory_gb",
                                  o.metric));
  const auto values = parse_values(o.values);
  for (double v : values) {
    // Only the ZeRO stage may be 0 (0 GPUs would silently mean "the default").
    if (!(v > 0 || (o.vary == "zero" && v == 0)))
      throw ConfigError(fmt::format("--values: {} = {:g}: must be positive", o.vary, v));
    if (o.vary != "bucket-mb" && v != std::floor(v))
      throw ConfigError(fmt::format("--values: {} = {:g}: must be an integer", o.vary, v));
  }
  const model::ModelSpec m = resolve_model(o.model);
  Sink sink(o.out);
  Table t({o.vary, "step (s)", "MFU", "tokens/s", "tokens/s/GPU", "scaling eff.", "mem/GPU (GB)",
           "fits"},
          {"value", "step_time_s", "mfu", "tokens_per_s", "tokens_per_s_per_gpu",
           "scaling_efficiency", "per_gpu_bytes_total", "fits"});
  nlohmann::json rows = nlohmann::json::array();
  Series series{o.metric, {}, "linespoints", {}};
  double first_per_gpu = 0;
  std::string framework;            // every row's profile (the flags are shared)
  std::string zero_note;            // an unset --zero: the framework's stage (not varied)
  std::vector<std::string> caveats; // the profile's caveats that apply to any row
  bool mfu_above_peak = false;      // a row's MFU passes 100% (sim::kMfuAbovePeakNote)
  for (double v : values) {
    auto mo = o.machine;
    auto po = o.plan;
    auto so = o.setup;
    auto sf = o.step;
    const auto iv = static_cast<std::int64_t>(v);
    if (o.vary == "num-gpus")
      mo.num_gpus = iv;
    else if (o.vary == "micro-batch")
      so.micro_batch_size = iv;
    else if (o.vary == "seq-len")
      so.seq_len = iv;
    else if (o.vary == "tp")
      po.tp = iv;
    else if (o.vary == "pp")
      po.pp = iv;
    else if (o.vary == "cp")
      po.cp = iv;
    else if (o.vary == "zero")
      po.zero_stage = iv;
    else if (o.vary == "global-batch")
      so.global_batch_size = iv;
    else if (o.vary == "bucket-mb")
      sf.bucket_mb = v;
    const Machine mc = resolve_machine(mo, 8);
    const auto s = resolve_setup(so, m);
    const sim::StepOptions step = resolve_step_flags(sf);
    const auto p = resolve_plan(po, m, s, mc.num_gpus, step.fw().default_zero_stage);
    zero_note = zero_default_note(po, step.fw());
    require_recompute_supported(p.recompute, step.fw());
    require_zero_supported(p.zero_stage, step.fw());
    require_layout_supported(p, step.fw());
    require_ep_overlap_applies(step, p);
    require_setup_supported(s, step.fw());
    require_modules_recompute(p.recompute, s);
    const auto e = sim::estimate_step(m, mc.cluster, mc.gpu, mc.profile, p, s, step);
    const double per_gpu = e.tokens_per_s / static_cast<double>(p.num_gpus());
    if (first_per_gpu == 0)
      first_per_gpu = per_gpu;
    const double eff = per_gpu / first_per_gpu;
    const bool fits = e.memory.total <= mc.gpu.memory_bytes;
    rows.push_back({{"value", v},
                    {"step_time_s", e.step_time_s},
                    {"mfu", e.mfu},
                    {"tokens_per_s", e.tokens_per_s},
                    {"tokens_per_s_per_gpu", per_gpu},
                    {"scaling_efficiency", eff},
                    {"per_gpu_bytes_total", e.memory.total},
                    {"fits", fits},
                    {"breakdown_s", breakdown_json(e.breakdown_s)},
                    {"caveats", e.caveats}});
    framework = e.framework;
    mfu_above_peak = mfu_above_peak || e.mfu > 1;
    for (const auto& c : e.caveats)
      if (std::find(caveats.begin(), caveats.end(), c) == caveats.end())
        caveats.push_back(c);
    t.add_row({fmt::format("{:g}", v), fmt::format("{:.3f}", e.step_time_s),
               fmt::format("{:.1f}%", 100 * e.mfu), fmt::format("{:.4g}", e.tokens_per_s),
               fmt::format("{:.4g}", per_gpu), fmt::format("{:.3f}", eff),
               fmt::format("{:.2f}", e.memory.total / 1e9), fits ? "yes" : "NO"},
              {fmt::format("{:g}", v), fmt::format("{:.9g}", e.step_time_s),
               fmt::format("{:.6f}", e.mfu), fmt::format("{:.6g}", e.tokens_per_s),
               fmt::format("{:.6g}", per_gpu), fmt::format("{:.6f}", eff),
               fmt::format("{:.0f}", e.memory.total), fits ? "true" : "false"});
    const double y = o.metric == "mfu"                  ? e.mfu
                     : o.metric == "step_time_s"        ? e.step_time_s
                     : o.metric == "tokens_per_s"       ? e.tokens_per_s
                     : o.metric == "scaling_efficiency" ? eff
                                                        : e.memory.total / 1e9;
    series.points.emplace_back(v, y);
  }
  check_finite(rows); // every printed figure below is one of these
  if (sink.format() == Format::json)
    sink.json({{"vary", o.vary},
               {"model", m.name},
               {"framework", framework},
               {"zero_stage_note", zero_note},
               {"mfu_note", mfu_above_peak ? sim::kMfuAbovePeakNote : ""},
               {"rows", rows}});
  else {
    sink.comment(fmt::format("sweep of {} for {} (framework {}); scaling efficiency = tokens/s "
                             "per GPU relative to the first value",
                             o.vary, m.name, framework));
    if (!zero_note.empty())
      sink.comment(zero_note);
    t.print(sink);
    if (mfu_above_peak)
      sink.write(fmt::format("note: {}\n", sim::kMfuAbovePeakNote));
    for (const auto& c : caveats) // the rows each name theirs in JSON
      sink.write(fmt::format("caveat ({}): {}\n", framework, c));
  }
  if (!o.plot.empty()) {
    PlotSpec spec = plot_spec(o.plot, fmt::format("{}: {} against {}", m.name, o.metric, o.vary),
                              o.vary, o.metric);
    spec.logx = o.vary == "num-gpus" || o.vary == "seq-len";
    plot_xy(spec, {series});
  }
  return 0;
}

} // namespace

void add_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto* cmd =
      app.add_subcommand("sweep", "Vary one input of `estimate` and tabulate/plot the result");
  add_model_options(*cmd, o->model, true);
  add_machine_options(*cmd, o->machine, true);
  add_plan_options(*cmd, o->plan);
  add_setup_options(*cmd, o->setup);
  add_framework_setup_options(*cmd, o->setup);
  add_step_flags(*cmd, o->step);
  cmd->add_option("--vary", o->vary,
                  "num-gpus | micro-batch | seq-len | tp | pp | cp | zero | "
                  "global-batch | bucket-mb")
      ->required();
  cmd->add_option("--values", o->values, "Comma-separated values, e.g. 8,16,32,64")->required();
  cmd->add_option("--metric", o->metric,
                  "Plotted metric: mfu | step_time_s | tokens_per_s | "
                  "scaling_efficiency | memory_gb")
      ->capture_default_str();
  cmd->add_option("--plot", o->plot, "Write the plot (.png or .svg)");
  add_output_options(*cmd, o->out);
  cmd->footer("Example: trainsim sweep --model llama3-8b --cluster dgx-h100 --tp 2 --micro-batch 2 "
              "--seq-len 4096 --zero 1 --vary num-gpus --values 8,16,32,64,128,256 --metric "
              "scaling_efficiency --format csv");
  cmd->callback([o] { run_sweep(*o); });
}

} // namespace trainsim::cli
