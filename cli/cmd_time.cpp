// `trainsim time`: top-down training time, 6ND / (GPUs x peak x MFU), with the op-level FLOP
// count beside it when a model is given (CS336 lecture 2; docs/model.md).
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/estimate_print.hpp"
#include "cli/output.hpp"
#include "cli/resolve.hpp"
#include "common/checks.hpp"
#include "common/errors.hpp"
#include "common/units.hpp"
#include "hardware/load.hpp"
#include "model/count.hpp"
#include "simulate/topdown.hpp"

namespace trainsim::cli {
namespace {

struct TimeOptions {
  ModelOptions model;
  std::string params; // alternative to --model
  std::string tokens;
  std::string gpu;
  std::int64_t num_gpus = 1;
  double mfu = 0.5;
  std::string dtype = "bf16";
  std::optional<std::int64_t> seq_len; // unset: model::default_seq_len
  double usd_per_gpu_hour = 0;
  OutputOptions out;
};

int run_time(const TimeOptions& o) {
  if (o.model.model.empty() == o.params.empty())
    throw ConfigError("--model or --params: give exactly one (e.g. --params 70e9)");
  // From 0.1%: below it the days overflow to infinity long before any real run is that slow.
  require_range("--mfu", o.mfu, Interval{0.001, 1, ""});
  if (o.num_gpus <= 0 || o.num_gpus > 10000000)
    throw ConfigError(fmt::format("--num-gpus = {}: must be in 1..10000000", o.num_gpus));
  require_range("--usd-per-gpu-hour", o.usd_per_gpu_hour, Interval{0, 1e6, "USD"});
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype)
    throw ConfigError(fmt::format("--dtype = {}: must be fp32, tf32, fp16, bf16 or fp8", o.dtype));
  const double tokens = parse_tokens(o.tokens);
  if (tokens <= 0)
    throw ConfigError("--tokens: must be positive");
  const hw::GpuSpec gpu = hw::load_gpu(o.gpu);
  const double peak = gpu.peak_flops_per_s[*dtype];
  if (peak <= 0)
    throw ConfigError(fmt::format("--dtype = {}: {} has no {} peak (see its preset)", o.dtype,
                                  gpu.name, o.dtype));
  double params = 0, exact_per_token = 0;
  std::string what;
  std::int64_t seq = 0;
  if (!o.params.empty()) {
    params = parse_count(o.params, "--params");
    if (params <= 0 || params > 1e16)
      throw ConfigError("--params: must be in (0, 1e16]");
    what = fmt::format("{} parameters", format_count(params));
  } else {
    const auto m = resolve_model(o.model);
    seq = resolve_seq_len(o.seq_len, m);
    params = model::count_params(m).active;
    exact_per_token = model::flops_per_token(m, seq).total;
    what = fmt::format("{} ({} active parameters, seq_len {})", m.name, format_count(params), seq);
  }
  const auto t = sim::estimate_time_top_down(params, tokens, exact_per_token, peak, o.num_gpus,
                                             o.mfu, o.usd_per_gpu_hour);
  if (o.seq_len && !o.params.empty())
    throw ConfigError("--seq-len: only with --model (the op-level count; --params has none)");
  Sink sink(o.out);
  nlohmann::json j{{"params", params},
                   {"tokens", tokens},
                   {"gpu", gpu.name},
                   {"num_gpus", o.num_gpus},
                   {"dtype", o.dtype},
                   {"peak_flops_per_s", peak},
                   {"mfu", o.mfu},
                   {"total_flops", t.total_flops},
                   {"seconds", t.seconds},
                   {"days", t.days},
                   {"gpu_hours", t.gpu_hours},
                   {"cost_usd", t.cost_usd}};
  if (exact_per_token > 0) {
    j["seq_len"] = seq;
    j["total_flops_exact"] = t.total_flops_exact;
    j["days_exact"] = t.days_exact;
    j["gpu_hours_exact"] = t.gpu_hours_exact;
  }
  check_finite(j); // every printed figure below is one of these
  if (sink.format() == Format::json) {
    sink.json(j);
    return 0;
  }
  sink.comment(fmt::format("{} trained on {} tokens, {} x {} at {:.1f} TFLOP/s {} peak, MFU {}",
                           what, format_count(tokens), o.num_gpus, gpu.name, peak / 1e12, o.dtype,
                           o.mfu));
  Table tab({"count", "total FLOPs", "days", "GPU-hours", "cost (USD)"},
            {"count", "total_flops", "days", "gpu_hours", "cost_usd"});
  auto row = [&](const char* name, double flops, double days, double hours) {
    const double cost = hours * o.usd_per_gpu_hour;
    tab.add_row({name, fmt::format("{:.3e}", flops), fmt::format("{:.1f}", days),
                 fmt::format("{:.3e}", hours),
                 o.usd_per_gpu_hour > 0 ? fmt::format("{:.3e}", cost) : "-"},
                {name, fmt::format("{:.6e}", flops), fmt::format("{:.4f}", days),
                 fmt::format("{:.6e}", hours), fmt::format("{:.6e}", cost)});
  };
  row("6ND", t.total_flops, t.days, t.gpu_hours);
  if (exact_per_token > 0)
    row("op-level (with attention)", t.total_flops_exact, t.days_exact, t.gpu_hours_exact);
  tab.print(sink);
  return 0;
}

} // namespace

void add_time(CLI::App& app) {
  auto o = std::make_shared<TimeOptions>();
  auto* cmd = app.add_subcommand("time", "Top-down training time: 6ND / (GPUs x peak x MFU)");
  add_model_options(*cmd, o->model, false);
  cmd->add_option("--params", o->params, "Parameter count instead of --model (e.g. 70e9, 7B)");
  cmd->add_option("--tokens,-t", o->tokens, "Training tokens (e.g. 15T, 300e9; decimal suffixes)")
      ->required();
  cmd->add_option("--gpu,-g", o->gpu, "GPU preset or JSON file")->required();
  cmd->add_option("--num-gpus,-n", o->num_gpus, "Number of GPUs")->capture_default_str();
  cmd->add_option("--mfu", o->mfu, "Model FLOPs utilisation, 0..1 (PaLM's definition)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Peak to use: fp32, tf32, fp16, bf16, fp8")
      ->capture_default_str();
  cmd->add_option("--seq-len,-s", o->seq_len,
                  "Sequence length for the op-level count (default: 2048, or the model's "
                  "max_seq_len when smaller)");
  cmd->add_option("--usd-per-gpu-hour", o->usd_per_gpu_hour, "Price for a cost estimate")
      ->capture_default_str();
  add_output_options(*cmd, o->out);
  cmd->footer("Example (CS336 lecture 2): trainsim time --params 70e9 --tokens 15T --gpu h100-sxm "
              "--num-gpus 1024 --mfu 0.5   -> ~143.9 days");
  cmd->callback([o] { run_time(*o); });
}

} // namespace trainsim::cli
