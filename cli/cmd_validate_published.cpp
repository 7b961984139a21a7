// `trainsim validate-published`: predicts the published Megatron-LM runs (Narayanan et al.
// 2021, Table 1) with the default A100 profile and prints predicted vs published; exits 3
// when a row is off by more than 10% or the mean absolute error exceeds 5%.
#include <cmath>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/estimate_print.hpp"
#include "cli/output.hpp"
#include "common/checks.hpp"
#include "common/errors.hpp"
#include "validate/published/megatron.hpp"

namespace trainsim::cli {
namespace {

struct ValidateOptions {
  std::string calibration;
  std::string framework = "megatron";
  double max_error_pct = 10, max_mean_error_pct = 5;
  OutputOptions out;
};

int run_validate(const ValidateOptions& o) {
  require_range("--max-error-pct", o.max_error_pct, Interval{0, 1e4, "%"});
  require_range("--max-mean-error-pct", o.max_mean_error_pct, Interval{0, 1e4, "%"});
  Sink sink(o.out);
  Table t({"model", "tp", "pp", "v", "GPUs", "batch", "micro", "step (s)", "bubble", "tp comm",
           "published TFLOP/s", "predicted", "error"},
          {"model", "tp", "pp", "interleave", "num_gpus", "global_batch", "micro_batch",
           "step_time_s", "bubble_s", "tp_comm_s", "published_tflops_per_gpu",
           "predicted_tflops_per_gpu", "error_pct"});
  nlohmann::json rows = nlohmann::json::array();
  double sum_abs = 0, max_abs = 0, x_1t = 0;
  for (const auto& run : val::megatron_table1()) {
    const auto p = val::predict_megatron(run, o.calibration, o.framework);
    sum_abs += std::fabs(p.error_pct);
    max_abs = std::max(max_abs, std::fabs(p.error_pct));
    if (run.name == "1008.0B")
      x_1t = p.predicted_tflops_per_gpu * 1e12;
    const auto& b = p.step.breakdown_s;
    rows.push_back({{"model", run.name},
                    {"published_tflops_per_gpu", run.published_tflops_per_gpu},
                    {"predicted_tflops_per_gpu", p.predicted_tflops_per_gpu},
                    {"error_pct", p.error_pct},
                    {"step_time_s", p.step.step_time_s}});
    t.add_row(
        {run.name, fmt::format("{}", run.tp), fmt::format("{}", run.pp),
         fmt::format("{}", run.interleave), fmt::format("{}", run.num_gpus),
         fmt::format("{}", run.global_batch), fmt::format("{}", run.micro_batch),
         fmt::format("{:.2f}", p.step.step_time_s),
         fmt::format("{:.1f}%", 100 * b.bubble / p.step.step_time_s),
         fmt::format("{:.1f}%", 100 * b.tp_comm / p.step.step_time_s),
         fmt::format("{:.0f}", run.published_tflops_per_gpu),
         fmt::format("{:.1f}", p.predicted_tflops_per_gpu), fmt::format("{:+.1f}%", p.error_pct)},
        {run.name, fmt::format("{}", run.tp), fmt::format("{}", run.pp),
         fmt::format("{}", run.interleave), fmt::format("{}", run.num_gpus),
         fmt::format("{}", run.global_batch), fmt::format("{}", run.micro_batch),
         fmt::format("{:.6g}", p.step.step_time_s), fmt::format("{:.6g}", b.bubble),
         fmt::format("{:.6g}", b.tp_comm), fmt::format("{:.0f}", run.published_tflops_per_gpu),
         fmt::format("{:.4f}", p.predicted_tflops_per_gpu), fmt::format("{:.4f}", p.error_pct)});
  }
  const double mae = sum_abs / static_cast<double>(val::megatron_table1().size());
  // Eq. 4 (8 T P / (n X)): with the paper's X, and with trainsim's predicted X for the 1T row.
  const double d175 = val::megatron_eq4_seconds(300e9, 175e9, 1024, 140e12) / 86400;
  const double d1t = val::megatron_eq4_seconds(450e9, 1008e9, 3072, 163e12) / 86400;
  const double d1t_pred = val::megatron_eq4_seconds(450e9, 1008e9, 3072, x_1t) / 86400;
  const bool ok = max_abs <= o.max_error_pct && mae <= o.max_mean_error_pct;
  if (sink.format() == Format::json) {
    sink.json({{"rows", rows},
               {"mean_abs_error_pct", mae},
               {"max_abs_error_pct", max_abs},
               {"pass", ok},
               {"eq4_days",
                {{"gpt3_175b_1024gpus_300b_tokens_140tflops", d175},
                 {"1t_3072gpus_450b_tokens_163tflops", d1t},
                 {"1t_3072gpus_450b_tokens_predicted", d1t_pred}}}});
  } else {
    sink.comment(
        "Narayanan et al. 2021 (Megatron-LM), Table 1: A100 80GB SXM (312 TFLOP/s fp16), "
        "s = 2048, V = 51200, full recompute, fp16; micro-batch, interleaving and DDP from "
        "the paper's examples/sc21/run_table_1.sh");
    sink.comment(
        "TFLOP/s per GPU counted with Eq. 3: 96 B s L h^2 (1 + s/6h + V/16Lh) / (step x GPUs)");
    t.print(sink);
    if (sink.format() == Format::table) {
      sink.write(fmt::format("mean |error| {:.1f}% (limit {:.0f}%), max |error| {:.1f}% (limit "
                             "{:.0f}%): {}\n",
                             mae, o.max_mean_error_pct, max_abs, o.max_error_pct,
                             ok ? "PASS" : "FAIL"));
      sink.write(fmt::format("Eq. 4, 8TP/(nX): GPT-3 175B, 1024 GPUs, 300B tokens at 140 TFLOP/s "
                             "= {:.1f} days (paper ~34); 1T, 3072 GPUs, 450B tokens at 163 "
                             "TFLOP/s = {:.1f} days (paper ~84), at trainsim's {:.1f} TFLOP/s = "
                             "{:.1f} days\n",
                             d175, d1t, x_1t / 1e12, d1t_pred));
    }
  }
  if (!ok)
    throw CheckFailed(
        fmt::format("published validation: mean |error| {:.1f}%, max {:.1f}%", mae, max_abs));
  return 0;
}

} // namespace

void add_validate_published(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand("validate-published",
                                 "Predict published training runs (Megatron-LM Table 1) and "
                                 "compare");
  cmd->add_option("--calibration", o->calibration, "Profile to use (default: a100-80g)");
  add_framework_option(*cmd, o->framework);
  cmd->add_option("--max-error-pct", o->max_error_pct, "Per-row limit")->capture_default_str();
  cmd->add_option("--max-mean-error-pct", o->max_mean_error_pct, "Mean limit")
      ->capture_default_str();
  add_output_options(*cmd, o->out);
  cmd->footer("Example: trainsim validate-published");
  cmd->callback([o] { run_validate(*o); });
}

} // namespace trainsim::cli
