// `trainsim compare --train-step FILE.jsonl`: recorded training-step measurements (one JSON
// object per line, as scripts/train-step-bench.sh writes them: `train-step --format json` with
// "source": "trainsim"; lines from other sources, e.g. the PyTorch peer, are skipped) against
// trainsim's prediction for the same configuration with the given profile, re-computed now. So
// a model or profile change is checked against every recorded run without a GPU.
#include "cli/compare_train_step.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <sstream>

#include "cli/plot.hpp"
#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "hardware/load.hpp"
#include "validate/train/train.hpp"

namespace trainsim::cli {

namespace {

namespace vt = val::train;

// A measured figure, in the range `range` (checks.hpp) so that no absurd value reaches a
// percentage or a table.
double number(const nlohmann::json& j, const char* key, const std::string& where,
              const Interval& range) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number())
    throw ConfigError(fmt::format("{}: {}: missing (a number)", where, key));
  return require_range(fmt::format("{}: {}", where, key), j[key].get<double>(), range);
}

// A short label for a configuration: "xl bf16 flash rc=none dp2 bucketed 25MiB".
std::string label(const vt::TrainOptions& o) {
  std::string m = o.model.name;
  if (m.rfind("cs336-", 0) == 0)
    m = m.substr(6);
  std::string s =
      fmt::format("{} {} {}", m, o.precision == model::Precision::fp32 ? "fp32" : "bf16",
                  model::to_string(o.attention));
  if (o.recompute != model::Recompute::none)
    s += fmt::format(" rc={}", model::to_string(o.recompute));
  if (o.num_gpus > 1) {
    s += fmt::format(" dp{}", o.num_gpus);
    if (o.zero_stage > 0)
      s += fmt::format(" zero{}", o.zero_stage);
    else
      s += " " + std::string(vt::to_string(o.ddp));
    if (o.ddp == vt::DdpMode::bucketed)
      s += fmt::format(" {:g}MiB", o.bucket_bytes / (1024.0 * 1024.0));
  }
  if (o.grad_accumulation > 1)
    s += fmt::format(" acc{}", o.grad_accumulation);
  return s;
}

} // namespace

void compare_train_step(const std::string& file, const hw::HardwareProfile& cal,
                        const std::string& gpu_override, const std::string& plot,
                        double max_error_pct, Sink& sink, nlohmann::json& out) {
  std::istringstream in(read_input_file(file)); // says why a file cannot be read
  const std::string gpu_name = !gpu_override.empty() ? gpu_override
                               : !cal.gpu.empty()    ? cal.gpu
                                                     : std::string("h200");
  const hw::GpuSpec gpu = hw::load_gpu(gpu_name);
  Table t({"run", "step (ms)", "predicted (ms)", "error", "dp_comm (ms)", "predicted (ms)",
           "peak (GiB)", "predicted (GiB)", "error"},
          {"run", "measured_step_s", "predicted_step_s", "step_error_pct", "measured_dp_comm_s",
           "predicted_dp_comm_s", "measured_peak_bytes", "predicted_peak_bytes",
           "memory_error_pct"});
  nlohmann::json rows = nlohmann::json::array();
  Series one{"1 GPU", {}, "points pt 7 ps 1.3", {}},
      many{"data parallel", {}, "points pt 5 ps 1.3", {}};
  double max_step = 0, max_mem = 0, sum_step = 0;
  std::string line;
  int line_no = 0;
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const std::string where = fmt::format("--train-step {} line {}", file, line_no);
    const nlohmann::json j = parse_json_text(line, "--train-step " + file, line_no);
    if (optional_string(j, "source", "", where) != "trainsim")
      continue; // the PyTorch peer's lines and anything else
    if (!j.contains("inputs") || !j["inputs"].is_object() || !j.contains("time") ||
        !j["time"].contains("step") || !j["time"].contains("dp_comm") || !j.contains("memory") ||
        !j["memory"].contains("total"))
      throw ConfigError(fmt::format("{}: needs inputs, time.step, time.dp_comm and memory.total "
                                    "(the output of `train-step --format json`)",
                                    where));
    const vt::TrainOptions o = vt::options_from_inputs_json(j["inputs"], where);
    const sim::StepEstimate est = vt::predict_train_step(o, gpu, cal);
    const Interval seconds{1e-6, 3600, "s"}, bytes{1, 0x1p50, "bytes"};
    const double step_m = number(j["time"]["step"], "measured_median_s", where, seconds);
    const double comm_m =
        number(j["time"]["dp_comm"], "measured_median_s", where, Interval{0, 3600, "s"});
    const double mem_m = number(j["memory"]["total"], "measured_at_peak_bytes", where, bytes);
    const double step_p = est.step_time_s;
    const double comm_p = est.breakdown_s.dp_comm - est.zero_allgather_s; // as train-step does
    const double mem_p = est.memory.total - est.memory.overhead;          // allocator-visible
    const double e_step = 100 * (step_p / step_m - 1), e_mem = 100 * (mem_p / mem_m - 1);
    max_step = std::max(max_step, std::fabs(e_step));
    max_mem = std::max(max_mem, std::fabs(e_mem));
    sum_step += std::fabs(e_step);
    const std::string name = label(o);
    (o.num_gpus > 1 ? many : one).points.emplace_back(step_m * 1e3, step_p * 1e3);
    rows.push_back({{"run", name},
                    {"measured_step_s", step_m},
                    {"predicted_step_s", step_p},
                    {"step_error_pct", e_step},
                    {"measured_dp_comm_s", comm_m},
                    {"predicted_dp_comm_s", comm_p},
                    {"measured_peak_bytes", mem_m},
                    {"predicted_peak_bytes", mem_p},
                    {"memory_error_pct", e_mem}});
    t.add_row({name, fmt::format("{:.2f}", step_m * 1e3), fmt::format("{:.2f}", step_p * 1e3),
               fmt::format("{:+.1f}%", e_step), fmt::format("{:.2f}", comm_m * 1e3),
               fmt::format("{:.2f}", comm_p * 1e3), fmt::format("{:.2f}", mem_m / kGiB),
               fmt::format("{:.2f}", mem_p / kGiB), fmt::format("{:+.1f}%", e_mem)},
              {name, fmt::format("{:.9g}", step_m), fmt::format("{:.9g}", step_p),
               fmt::format("{:.4f}", e_step), fmt::format("{:.9g}", comm_m),
               fmt::format("{:.9g}", comm_p), fmt::format("{:.0f}", mem_m),
               fmt::format("{:.0f}", mem_p), fmt::format("{:.4f}", e_mem)});
  }
  if (rows.empty())
    throw ConfigError(fmt::format("--train-step {}: no trainsim runs in it (lines with "
                                  "\"source\": \"trainsim\")",
                                  file));
  const double mean_step = sum_step / static_cast<double>(rows.size());
  out["train_step"] = {{"file", file},
                       {"gpu", gpu.name},
                       {"rows", rows},
                       {"max_abs_step_error_pct", max_step},
                       {"mean_abs_step_error_pct", mean_step},
                       {"max_abs_memory_error_pct", max_mem}};
  if (sink.format() != Format::json) {
    sink.comment(fmt::format("training steps: measured ({}) vs predicted now with '{}' on {}; "
                             "dp_comm = exposed gradient sync; peak = allocator-visible",
                             file, cal.name, gpu.name));
    t.print(sink);
    if (sink.format() == Format::table)
      sink.write(fmt::format("training steps: {} runs, step time |error| mean {:.1f}%, max "
                             "{:.1f}%; peak memory max |error| {:.1f}%\n",
                             rows.size(), mean_step, max_step, max_mem));
  }
  if (!plot.empty()) {
    // Predicted against measured on log axes, with the diagonal and the +-10% band.
    double lo = 1e300, hi = 0;
    for (const Series* s : {&one, &many})
      for (const auto& [m, p] : s->points) {
        lo = std::min({lo, m, p});
        hi = std::max({hi, m, p});
      }
    lo *= 0.8;
    hi *= 1.25;
    auto line = [&](const char* title, double f) {
      return Series{title, {{lo, lo * f}, {hi, hi * f}}, "lines dt 2", {}};
    };
    std::vector<Series> series{line("predicted = measured", 1.0), line("+10%", 1.1),
                               line("-10%", 0.9)};
    for (Series* s : {&one, &many})
      if (!s->points.empty())
        series.push_back(*s);
    PlotSpec spec = plot_spec(plot, "training step time: predicted vs measured",
                              "measured step (ms)", "predicted step (ms)");
    spec.logx = spec.logy = true;
    spec.xrange = spec.yrange = {lo, hi};
    spec.key = KeyPlace::top_left;
    plot_xy(spec, series);
  }
  if (max_error_pct > 0 && max_step > max_error_pct)
    throw CheckFailed(fmt::format("--train-step: max step-time |error| {:.1f}% > {:.1f}%", max_step,
                                  max_error_pct));
}

} // namespace trainsim::cli
