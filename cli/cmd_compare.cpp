// `trainsim compare`: predicted vs measured, per kernel (with the datasheet profile and the
// calibrated one) and per collective size; MAPE; plots of predicted vs measured, of the
// roofline with the measured points, and of collective bus bandwidth against size.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/compare_framework_runs.hpp"
#include "cli/compare_train_step.hpp"
#include "cli/measure.hpp"
#include "cli/output.hpp"
#include "cli/plot.hpp"
#include "common/checks.hpp"
#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/units.hpp"
#include "hardware/load.hpp"
#include "model/ops.hpp"
#include "simulate/allocator.hpp"
#include "simulate/collectives.hpp"
#include "simulate/costs.hpp"
#include "simulate/fit/collective_fit.hpp"
#include "simulate/fit/framework_fit.hpp"
#include "simulate/framework.hpp"
#include "simulate/memory.hpp"

namespace trainsim::cli {
namespace {

struct CompareOptions {
  std::string calibration;
  std::string measurements;
  std::string suite = "held-out";
  std::string base;
  std::string gpu;
  std::string collectives;
  std::string train_step;
  std::string level = "intra-node";
  std::string plot;
  double max_mape_pct = 0;             // 0 = report only
  double max_step_error_pct = 0;       // --train-step: 0 = report only
  std::string ops;                     // collectives to compare ("" = every op with a fit)
  double max_error_above_1mib_pct = 0; // 0 = report only
  FrameworkRunsOptions framework_runs;
  std::vector<std::string> allocator_traces;
  std::vector<std::string> kernel_profiles;
  double max_reserved_error_pct = 0;      // --allocator-traces: 0 = report only
  double allocator_cap_gb = 0;            // --allocator-traces: also replay under this cap (0: no)
  bool allocator_with_prediction = false; // --allocator-traces: also predict each configuration
  bool allocator_empty_cache = false;     // --allocator-traces: also replay as an OOM probe runs it
  OutputOptions out;
};

// The configuration a trace's header records, predicted as `trainsim memory` would (the
// framework's generated step through the allocator model, under `cap_bytes` if > 0), over the
// steps the trace recorded.
sim::MemoryBreakdown predict_traced_step(const std::string& text, const std::string& file,
                                         std::int64_t cap_bytes, const CompareOptions& o) {
  const std::string first = text.substr(0, text.find('\n'));
  nlohmann::json j =
      first.starts_with("#") ? parse_json_text(first.substr(1), file, 1) : nlohmann::json();
  if (!j.is_object())
    throw ConfigError(fmt::format("{}:1: the header must be '# ' and a JSON object to "
                                  "predict the step (--with-prediction)",
                                  file));
  j["measured"] = nlohmann::json::object();
  const fitting::FrameworkRun run = fitting::parse_framework_run(j, file);
  if (!run.skip_reason.empty())
    throw ConfigError(fmt::format("{}: {}", file, run.skip_reason));
  sim::MemoryOptions mo;
  mo.framework = std::make_shared<const sim::FrameworkProfile>(sim::load_framework(
      o.framework_runs.framework.empty() ? run.framework : o.framework_runs.framework));
  mo.allocator_cap_bytes = static_cast<double>(cap_bytes);
  // As many steps as the trace recorded (its phase marks; none: a loop's, as `memory` plays).
  std::int64_t steps = 0;
  if (const auto it = j.find("phases"); it != j.end() && it->is_array())
    for (const auto& ph : *it)
      if (ph.is_object() && ph.contains("step") && ph["step"].is_number_integer())
        steps = std::max<std::int64_t>(steps, ph["step"].get<std::int64_t>() + 1);
  if (steps > 0)
    mo.allocator_steps = std::min<std::int64_t>(steps, 64);
  return sim::estimate_memory(run.model, run.plan, run.setup, run.profile, mo);
}

// One recorded trace read, replayed without a cap and, where one applies (--allocator-cap-gb,
// else the cap the trace was recorded under), under it.
struct TraceRead {
  std::string file, text;
  sim::TraceReplay free_run;
  std::int64_t cap_bytes = 0;
};

// What one trace says beside the model: its replay (capped where it was recorded capped), the
// error of the model's reserved bytes, the verdicts under the cap (the model's, PyTorch's, with
// the cache emptied at the start) and the framework's generated step for its configuration.
struct TraceResult {
  std::string id;
  sim::TraceReplay replay;     // the one compared: capped where the trace was recorded capped
  bool measured_peaks = false; // false: a generated step (no peaks measured)
  double error_pct = std::numeric_limits<double>::quiet_NaN();
  bool fits = true;      // the model's replay under the cap
  int measured_oom = -1; // PyTorch under that cap: 0 ran, 1 out of memory, -1 unknown
  bool emptied_known = false, emptied_fits = true, ends_at_failure = false;
  std::optional<sim::MemoryBreakdown> predicted; // --with-prediction
};

TraceResult examine_trace(const TraceRead& rd, const CompareOptions& o) {
  TraceResult x;
  const std::string& file = rd.file;
  // A trace recorded under a cap is compared with its capped replay: what PyTorch reserved
  // there is what the cap let it keep.
  const bool recorded_capped = rd.free_run.recorded_cap_bytes > 0;
  const sim::TraceReplay capped_run =
      rd.cap_bytes > 0 ? sim::replay_allocator_trace_text(rd.text, file, rd.cap_bytes)
                       : rd.free_run;
  x.replay = recorded_capped ? capped_run : rd.free_run;
  const sim::TraceReplay& r = x.replay;
  x.id = r.id.empty() ? file : r.id;
  // A trace with no measured peaks (trainsim's own generated step, `trainsim memory
  // --allocator-trace-out`) is replayed and shown, and left out of the error summary.
  x.measured_peaks = std::isfinite(r.measured_peak_reserved_bytes) &&
                     std::isfinite(r.measured_peak_allocated_bytes);
  if (!x.measured_peaks && recorded_capped)
    throw ConfigError(fmt::format(
        "{}: recorded under a cap, but the header records no measured peaks (phases[].max_*)",
        file));
  if (x.measured_peaks)
    x.error_pct = (r.model_peak_reserved_bytes / r.measured_peak_reserved_bytes - 1) * 100;
  // The same allocations and frees under the cap: the model releases its cache and retries as
  // PyTorch does, and says whether the step would still have run; a trace recorded under that
  // cap says whether PyTorch's did.
  x.fits = !capped_run.out_of_memory;
  x.measured_oom = rd.cap_bytes == static_cast<std::int64_t>(r.recorded_cap_bytes)
                       ? r.measured_out_of_memory
                       : -1;
  if (o.allocator_empty_cache && rd.cap_bytes > 0) {
    // The same requests as an OOM probe makes them: the cache emptied after the model is
    // built, before the first step (a trace without the step's start marker: unknown).
    const sim::TraceReplay emptied =
        sim::replay_allocator_trace_text(rd.text, file, rd.cap_bytes, true);
    x.emptied_known = emptied.cache_emptied;
    x.emptied_fits = !emptied.out_of_memory;
    // A trace PyTorch ran out of memory in ends at the failed request: served, it says only
    // that the step got that far.
    x.ends_at_failure = r.measured_out_of_memory == 1;
  }
  if (o.allocator_with_prediction)
    x.predicted = predict_traced_step(rd.text, file, rd.cap_bytes, o);
  return x;
}

// The table's columns and the JSON keys for the options asked.
Table trace_table(const CompareOptions& o, bool any_cap) {
  std::vector<std::string> head{"trace",          "events",         "alloc model",
                                "alloc measured", "reserved model", "reserved measured",
                                "error"};
  std::vector<std::string> keys{"trace",
                                "events",
                                "model_peak_allocated_bytes",
                                "measured_peak_allocated_bytes",
                                "model_peak_reserved_bytes",
                                "measured_peak_reserved_bytes",
                                "reserved_error_pct"};
  if (any_cap) {
    head.insert(head.end(), {"cap", "model under cap", "PyTorch under cap"});
    keys.insert(keys.end(), {"cap_bytes", "fits_under_cap", "measured_fits_under_cap"});
    if (o.allocator_empty_cache) {
      head.push_back("cache emptied at start");
      keys.push_back("fits_under_cap_cache_emptied");
    }
  }
  if (o.allocator_with_prediction) {
    head.insert(head.end(), {"step alloc", "step reserved"});
    keys.insert(keys.end(), {"predicted_peak_allocated_bytes", "predicted_peak_reserved_bytes"});
    if (any_cap) {
      head.push_back("step under cap");
      keys.push_back("predicted_fits_under_cap");
    }
  }
  return Table(head, keys);
}

// One trace's row: shown, raw (CSV) and JSON.
void add_trace_row(Table& t, nlohmann::json& rows, const TraceResult& x, std::int64_t cap_bytes,
                   const CompareOptions& o, bool any_cap) {
  const sim::TraceReplay& r = x.replay;
  auto shown_gb = [](double bytes) {
    return std::isfinite(bytes) ? fmt::format("{:.2f} GB", bytes / 1e9) : std::string("-");
  };
  auto raw_num = [](double v) { return std::isfinite(v) ? fmt::format("{}", v) : std::string(); };
  std::vector<std::string> shown{x.id,
                                 fmt::format("{}", r.events),
                                 shown_gb(r.model_peak_allocated_bytes),
                                 shown_gb(r.measured_peak_allocated_bytes),
                                 shown_gb(r.model_peak_reserved_bytes),
                                 shown_gb(r.measured_peak_reserved_bytes),
                                 x.measured_peaks ? fmt::format("{:+.1f}%", x.error_pct) : "-"};
  std::vector<std::string> raw{x.id,
                               fmt::format("{}", r.events),
                               raw_num(r.model_peak_allocated_bytes),
                               raw_num(r.measured_peak_allocated_bytes),
                               raw_num(r.model_peak_reserved_bytes),
                               raw_num(r.measured_peak_reserved_bytes),
                               raw_num(x.error_pct)};
  nlohmann::json row{{"trace", x.id},
                     {"events", r.events},
                     {"model_peak_allocated_bytes", r.model_peak_allocated_bytes},
                     {"model_peak_reserved_bytes", r.model_peak_reserved_bytes}};
  if (x.measured_peaks) {
    row["measured_peak_allocated_bytes"] = r.measured_peak_allocated_bytes;
    row["measured_peak_reserved_bytes"] = r.measured_peak_reserved_bytes;
    row["reserved_error_pct"] = x.error_pct;
  }
  const bool capped = cap_bytes > 0;
  if (any_cap) {
    const int measured = x.measured_oom;
    shown.insert(shown.end(), {capped ? fmt::format("{:g} GB", cap_bytes / 1e9) : "-",
                               capped ? (x.fits ? "fits" : "out of memory") : "-",
                               measured < 0    ? "-"
                               : measured == 0 ? "ran"
                                               : "out of memory"});
    raw.insert(raw.end(), {fmt::format("{}", cap_bytes), capped ? (x.fits ? "true" : "false") : "",
                           measured < 0    ? ""
                           : measured == 0 ? "true"
                                           : "false"});
    if (capped) {
      row["fits_under_cap"] = x.fits;
      row["cap_bytes"] = cap_bytes;
    }
    if (measured >= 0)
      row["measured_fits_under_cap"] = measured == 0;
    if (o.allocator_empty_cache) {
      const bool known = capped && x.emptied_known;
      shown.push_back(!known              ? "-"
                      : !x.emptied_fits   ? "out of memory"
                      : x.ends_at_failure ? "serves the failed request"
                                          : "fits");
      raw.push_back(known ? (x.emptied_fits ? "true" : "false") : "");
      if (known) {
        row["fits_under_cap_cache_emptied"] = x.emptied_fits;
        row["trace_ends_at_failure"] = x.ends_at_failure;
      }
    }
  }
  if (x.predicted) {
    const sim::MemoryBreakdown& m = *x.predicted;
    shown.insert(shown.end(), {fmt::format("{:.2f} GB", m.peak_allocated() / 1e9),
                               fmt::format("{:.2f} GB", m.peak_reserved() / 1e9)});
    raw.insert(raw.end(),
               {fmt::format("{}", m.peak_allocated()), fmt::format("{}", m.peak_reserved())});
    row["predicted_peak_allocated_bytes"] = m.peak_allocated();
    row["predicted_peak_reserved_bytes"] = m.peak_reserved();
    if (any_cap) {
      const bool step_fits = !capped || m.peak_reserved() <= static_cast<double>(cap_bytes);
      shown.push_back(capped ? (step_fits ? "fits" : "out of memory") : "-");
      raw.push_back(capped ? (step_fits ? "true" : "false") : "");
      if (capped)
        row["predicted_fits_under_cap"] = step_fits;
    }
  }
  t.add_row(shown, raw);
  rows.push_back(row);
}

// Replays of recorded allocator traces through the caching-allocator model
// (simulate/allocator.hpp): peak allocated and reserved, model vs PyTorch.
void compare_allocator_traces(const CompareOptions& o, Sink& sink) {
  if (o.allocator_cap_gb < 0 || !std::isfinite(o.allocator_cap_gb) || o.allocator_cap_gb > 1e6)
    throw ConfigError(fmt::format("--allocator-cap-gb = {}: must be in [0, 1e6] (GB = 1e9 bytes; "
                                  "0 = no cap)",
                                  o.allocator_cap_gb));
  const auto cli_cap_bytes = static_cast<std::int64_t>(o.allocator_cap_gb * 1e9);
  std::vector<TraceRead> reads;
  bool any_cap = false;
  for (const auto& file : o.allocator_traces) {
    TraceRead r{file, read_input_file(file), {}, 0};
    r.free_run = sim::replay_allocator_trace_text(r.text, file);
    r.cap_bytes = cli_cap_bytes > 0 ? cli_cap_bytes
                                    : static_cast<std::int64_t>(r.free_run.recorded_cap_bytes);
    any_cap = any_cap || r.cap_bytes > 0;
    reads.push_back(std::move(r));
  }
  if (o.allocator_empty_cache && !any_cap)
    throw ConfigError("--empty-cache-at-start: needs a cap to say what fits (--allocator-cap-gb, "
                      "or traces recorded under one)");
  Table t = trace_table(o, any_cap);
  nlohmann::json rows = nlohmann::json::array();
  double worst = 0, sum = 0;
  int verdicts = 0, agreed = 0, measured_traces = 0;
  for (const auto& rd : reads) {
    const TraceResult x = examine_trace(rd, o);
    if (x.measured_peaks) {
      worst = std::max(worst, std::abs(x.error_pct));
      sum += std::abs(x.error_pct);
      ++measured_traces;
    }
    if (any_cap && rd.cap_bytes > 0 && x.measured_oom >= 0) {
      ++verdicts;
      agreed += x.fits == (x.measured_oom == 0) ? 1 : 0;
    }
    add_trace_row(t, rows, x, rd.cap_bytes, o, any_cap);
  }
  const double mean = measured_traces > 0 ? sum / measured_traces : 0.0;
  if (sink.format() == Format::json) {
    nlohmann::json j{{"allocator_traces", rows}};
    if (measured_traces > 0) {
      j["reserved_mean_abs_error_pct"] = mean;
      j["reserved_max_abs_error_pct"] = worst;
    }
    if (verdicts > 0) {
      j["verdicts_under_cap"] = verdicts;
      j["verdicts_agreed"] = agreed;
    }
    sink.json(j);
  } else {
    t.print(sink);
    if (sink.format() == Format::table) {
      if (measured_traces > 0)
        sink.write(fmt::format("reserved: mean |error| {:.1f}%, worst {:.1f}% ({} traces)\n", mean,
                               worst, measured_traces));
      if (measured_traces < static_cast<int>(o.allocator_traces.size()))
        sink.write(
            fmt::format("{} trace(s) without measured peaks (a generated step): replayed, "
                        "not compared\n",
                        o.allocator_traces.size() - static_cast<std::size_t>(measured_traces)));
      if (verdicts > 0)
        sink.write(fmt::format("under the cap each was recorded under: the model's verdict is "
                               "PyTorch's for {} of {} traces\n",
                               agreed, verdicts));
    }
  }
  if (o.max_reserved_error_pct > 0 && worst > o.max_reserved_error_pct)
    throw CheckFailed(fmt::format("allocator traces: worst reserved |error| {:.1f}% > {:.1f}% "
                                  "(--max-reserved-error-pct)",
                                  worst, o.max_reserved_error_pct));
}

// Kernel profiles of framework steps (scripts/peer_kernel_profile.py): the GPU's work per step
// (the summed kernel time), against the GPU part of trainsim's step under the run's framework
// profile (forward, backward, recompute, optimizer, communication; not the host's issue
// time), so the GPU side of a framework profile is checked apart from its host model.
// A profiler kernel's kind, by its name: GEMMs (cuBLAS's nvjet and CUTLASS/xmma GEMM kernels),
// attention (cuDNN's SDPA and its fused pre/post kernels, FlashAttention, PyTorch's
// memory-efficient fmha), the optimizer's
// multi-tensor kernels, and the rest (elementwise, reductions, copies, casts).
enum class KernelKind { gemm, attention, optimizer, other };
KernelKind kernel_kind(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("fmha") || has("flash") || has("sdpa") || has("attention") || has("cudnn::fusion"))
    return KernelKind::attention;
  if (has("nvjet") || has("gemm") || has("cutlass") || has("xmma"))
    return KernelKind::gemm;
  if (has("multi_tensor"))
    return KernelKind::optimizer;
  return KernelKind::other;
}

void compare_kernel_profiles(const CompareOptions& o, Sink& sink) {
  Table t({"profile", "framework", "GPU busy measured", "GPU predicted", "error", "step predicted"},
          {"profile", "framework", "measured_gpu_busy_s", "predicted_gpu_s", "error_pct",
           "predicted_step_s"});
  // The same steps by kind of kernel: measured (the profile's kernels by name) and predicted
  // (sim::gpu_time_by_kind; the optimizer from the step's breakdown; "other" on the predicted
  // side is the rest of the GPU part: elementwise ops, casts, recompute of other policies).
  Table kinds({"profile", "GEMM meas.", "GEMM pred.", "attention meas.", "attention pred.",
               "optimizer meas.", "optimizer pred.", "other meas.", "other pred."},
              {"profile", "gemm_measured_s", "gemm_predicted_s", "attention_measured_s",
               "attention_predicted_s", "optimizer_measured_s", "optimizer_predicted_s",
               "other_measured_s", "other_predicted_s"});
  nlohmann::json rows = nlohmann::json::array();
  double sum = 0, worst = 0;
  for (const auto& file : o.kernel_profiles) {
    nlohmann::json j = load_json_file(file);
    if (!j.is_object() || !j.contains("gpu_busy_s") || !j["gpu_busy_s"].is_number() ||
        j["gpu_busy_s"].get<double>() <= 0)
      throw ConfigError(fmt::format("{}: gpu_busy_s: missing or not a positive number (a kernel "
                                    "profile from scripts/peer_kernel_profile.py)",
                                    file));
    // A step's GPU time: at least a microsecond, at most a day (as a run's step time).
    const double busy = require_range(fmt::format("{}: gpu_busy_s", file),
                                      j["gpu_busy_s"].get<double>(), Interval{1e-6, 86400, "s"});
    j["measured"] = {{"step_time_s", optional_number(j, "step_wall_s", 0.0, file)}};
    const fitting::FrameworkRun run = fitting::parse_framework_run(j, file);
    if (!run.skip_reason.empty())
      throw ConfigError(fmt::format("{}: {}", file, run.skip_reason));
    const sim::FrameworkProfile fw = sim::load_framework(
        o.framework_runs.framework.empty() ? run.framework : o.framework_runs.framework);
    const auto p = fitting::predict_run(run, fw);
    const auto& b = p.step.breakdown_s;
    const double gpu = b.total() - b.host;
    const double err = (gpu / busy - 1) * 100;
    sum += std::abs(err);
    worst = std::max(worst, std::abs(err));
    const std::string id = run.id.empty() ? file : run.id;
    t.add_row({id, fw.name, fmt::format("{:.2f} ms", busy * 1e3),
               fmt::format("{:.2f} ms", gpu * 1e3), fmt::format("{:+.1f}%", err),
               fmt::format("{:.2f} ms", p.step_time_s * 1e3)},
              {id, fw.name, fmt::format("{}", busy), fmt::format("{}", gpu), fmt::format("{}", err),
               fmt::format("{}", p.step_time_s)});
    std::array<double, 4> meas{};
    if (j.contains("kernels") && j["kernels"].is_array()) {
      // Each kernel's total_s is per step (their sum is gpu_busy_s).
      for (const auto& k : j["kernels"])
        if (k.is_object() && k.contains("name") && k["name"].is_string() && k.contains("total_s") &&
            k["total_s"].is_number())
          meas[static_cast<std::size_t>(kernel_kind(k["name"].get<std::string>()))] +=
              k["total_s"].get<double>();
    }
    std::array<double, 4> pred{};
    if (run.plan.pp == 1) {
      const auto ops = model::build_ops(run.model, model::make_op_context(run.plan, run.setup));
      const auto by = sim::gpu_time_by_kind(ops, run.plan, run.gpu, run.profile, fw);
      const auto mb = static_cast<double>(std::max<std::int64_t>(p.step.micro_batches, 1));
      pred = {mb * by.gemm_s, mb * by.attention_s, b.optimizer, 0.0};
      pred[3] = gpu - pred[0] - pred[1] - pred[2];
    }
    const auto ms = [](double s) { return fmt::format("{:.1f} ms", s * 1e3); };
    kinds.add_row({id, ms(meas[0]), ms(pred[0]), ms(meas[1]), ms(pred[1]), ms(meas[2]), ms(pred[2]),
                   ms(meas[3]), ms(pred[3])},
                  {id, fmt::format("{}", meas[0]), fmt::format("{}", pred[0]),
                   fmt::format("{}", meas[1]), fmt::format("{}", pred[1]),
                   fmt::format("{}", meas[2]), fmt::format("{}", pred[2]),
                   fmt::format("{}", meas[3]), fmt::format("{}", pred[3])});
    rows.push_back({{"profile", id},
                    {"framework", fw.name},
                    {"measured_gpu_busy_s", busy},
                    {"predicted_gpu_s", gpu},
                    {"error_pct", err},
                    {"predicted_step_s", p.step_time_s},
                    {"by_kind",
                     {{"gemm_measured_s", meas[0]},
                      {"gemm_predicted_s", pred[0]},
                      {"attention_measured_s", meas[1]},
                      {"attention_predicted_s", pred[1]},
                      {"optimizer_measured_s", meas[2]},
                      {"optimizer_predicted_s", pred[2]},
                      {"other_measured_s", meas[3]},
                      {"other_predicted_s", pred[3]}}}});
  }
  const double mean = sum / static_cast<double>(o.kernel_profiles.size());
  if (sink.format() == Format::json) {
    sink.json({{"kernel_profiles", rows},
               {"gpu_mean_abs_error_pct", mean},
               {"gpu_max_abs_error_pct", worst}});
    return;
  }
  t.print(sink);
  if (sink.format() == Format::table)
    sink.write(fmt::format("GPU time: mean |error| {:.1f}%, worst {:.1f}% ({} profiles)\n", mean,
                           worst, o.kernel_profiles.size()));
  if (sink.format() != Format::table)
    return; // CSV: one table per output
  sink.write("\nBy kind of kernel (measured: the profile's kernels by name; predicted: the "
             "framework's ops by kind, other = the rest of the GPU part):\n");
  kinds.print(sink);
}

std::string with_suffix(const std::string& file, const std::string& suffix) {
  const auto dot = file.rfind('.');
  return dot == std::string::npos ? file + suffix : file.substr(0, dot) + suffix + file.substr(dot);
}

// Per-op figures of the collective comparison (docs/collectives.md reads them).
struct OpSummary {
  std::string op;
  std::int64_t num_ranks = 0;
  std::size_t num_regimes = 0;
  double max_large_pct = 0, max_large_bytes = 0; // max |error| at sizes >= 1 MiB, and where
  double max_small_pct = 0, max_small_bytes = 0; // max |error| at sizes <= 64 KiB, and where
  double small_alpha_s = 0;                      // alpha of the smallest-size regime
  double median_small_time_s = 0;                // median measured time at sizes <= 64 KiB
};

// Axis tics at powers of 1024 with binary-prefix labels (the sizes nccl-tests sweeps).
std::vector<std::pair<std::string, double>> binary_size_tics() {
  return {{"8 B", 8},         {"1 KiB", 1024},      {"32 KiB", 32768},
          {"1 MiB", 1048576}, {"32 MiB", 33554432}, {"1 GiB", 1073741824}};
}

void compare_collectives(const CompareOptions& o, const hw::HardwareProfile& cal, Sink& sink,
                         nlohmann::json& out, bool kernel_plots) {
  const auto doc = load_json_file(o.collectives);
  const auto series = fitting::read_collective_series(doc, o.collectives, o.level);
  std::vector<std::string> wanted;
  if (!o.ops.empty()) {
    std::stringstream list(o.ops);
    for (std::string op; std::getline(list, op, ',');) {
      sim::Collective c;
      if (!sim::parse_collective(op, c))
        throw ConfigError(fmt::format("--ops = '{}': unknown collective '{}' (all-reduce, "
                                      "all-gather, reduce-scatter, broadcast, all-to-all, "
                                      "send-recv)",
                                      o.ops, op));
      wanted.push_back(op);
    }
  }
  Table t({"op", "P", "size (B)", "measured (us)", "predicted (us)", "error", "busbw meas. (GB/s)",
           "busbw pred. (GB/s)"},
          {"op", "num_ranks", "bytes", "measured_s", "predicted_s", "error_pct",
           "measured_busbw_bytes_per_s", "predicted_busbw_bytes_per_s"});
  nlohmann::json rows = nlohmann::json::array();
  std::vector<Panel> panels;
  std::vector<OpSummary> summaries;
  double max_large = 0, max_small = 0;
  for (const auto& s : series) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), s.op) == wanted.end())
      continue;
    const hw::CollectiveFit* fit = nullptr;
    for (const auto& f : cal.collective_fits)
      if (hw::to_string(f.op) == s.op && hw::to_string(f.level) == s.level &&
          f.num_ranks == s.num_ranks)
        fit = &f;
    if (!fit)
      continue;
    // The fit's own factor (busbw, or algbw at P = 1) and its quality on these measurements.
    const double factor = fitting::fit_bandwidth_factor(s.op, s.num_ranks);
    const fitting::CollectiveFitQuality q = fitting::fit_quality(*fit, s);
    auto pct = [](double fraction) { return std::isfinite(fraction) ? 100 * fraction : 0.0; };
    auto at = [](double bytes) { return std::isfinite(bytes) ? bytes : 0.0; };
    OpSummary sum;
    sum.op = s.op;
    sum.num_ranks = s.num_ranks;
    sum.num_regimes = std::max<std::size_t>(fit->regimes.size(), 1);
    sum.small_alpha_s = hw::regime_for(*fit, 0).alpha_s;
    sum.max_large_pct = pct(q.max_rel_error_large_fraction);
    sum.max_large_bytes = at(q.max_rel_error_large_bytes);
    sum.max_small_pct = pct(q.max_rel_error_small_fraction);
    sum.max_small_bytes = at(q.max_rel_error_small_bytes);
    sum.median_small_time_s = q.median_small_time_s;
    Series meas{"measured", {}, "points pt 7 ps 0.7 lc rgb '#1f77b4'", {}},
        pred{"model", {}, "lines lw 2 lc rgb '#d62728'", {}};
    double lo = 0, hi = 0;
    for (const auto& p : s.points) {
      const double t_pred = hw::collective_fit_time_s(*fit, p.bytes, factor);
      const double err = 100 * (t_pred / p.time_s - 1);
      lo = lo == 0 ? p.bytes : std::min(lo, p.bytes);
      hi = std::max(hi, p.bytes);
      const double bw_m = p.bytes / p.time_s * factor, bw_p = p.bytes / t_pred * factor;
      meas.points.emplace_back(p.bytes, bw_m / 1e9);
      rows.push_back({{"op", s.op},
                      {"num_ranks", s.num_ranks},
                      {"bytes", p.bytes},
                      {"measured_s", p.time_s},
                      {"predicted_s", t_pred},
                      {"error_pct", err}});
      t.add_row({s.op, fmt::format("{}", s.num_ranks), fmt::format("{:.0f}", p.bytes),
                 fmt::format("{:.2f}", p.time_s * 1e6), fmt::format("{:.2f}", t_pred * 1e6),
                 fmt::format("{:+.1f}%", err), fmt::format("{:.2f}", bw_m / 1e9),
                 fmt::format("{:.2f}", bw_p / 1e9)},
                {s.op, fmt::format("{}", s.num_ranks), fmt::format("{:.0f}", p.bytes),
                 fmt::format("{:.9g}", p.time_s), fmt::format("{:.9g}", t_pred),
                 fmt::format("{:.4f}", err), fmt::format("{:.6g}", bw_m),
                 fmt::format("{:.6g}", bw_p)});
    }
    max_large = std::max(max_large, sum.max_large_pct);
    max_small = std::max(max_small, sum.max_small_pct);
    // The model's busbw on a fine grid (8 points per doubling) and on both sides of each regime
    // boundary, so the switches show as steps.
    std::vector<double> grid;
    for (double b = lo; b <= hi * (1 + 1e-9); b *= std::pow(2.0, 0.125))
      grid.push_back(b);
    std::vector<double> boundaries;
    for (std::size_t k = 1; k < fit->regimes.size(); ++k) {
      const double b = fit->regimes[k].min_bytes;
      boundaries.push_back(b);
      grid.push_back(b * (1 - 1e-9));
      grid.push_back(b);
    }
    std::sort(grid.begin(), grid.end());
    for (double b : grid)
      pred.points.emplace_back(b, b * factor / hw::collective_fit_time_s(*fit, b, factor) / 1e9);
    panels.push_back(
        {fmt::format("{} (P={}): {} regime{}; max |error| >= 1 MiB {:.1f}%", s.op, s.num_ranks,
                     sum.num_regimes, sum.num_regimes == 1 ? "" : "s", sum.max_large_pct),
         {meas, pred},
         boundaries});
    summaries.push_back(sum);
  }
  if (rows.empty())
    throw ConfigError(fmt::format("--collectives {}: no series matches a collective fit of the "
                                  "calibration{} (run `trainsim calibrate --collectives` first)",
                                  o.collectives, o.ops.empty() ? "" : " among --ops " + o.ops));
  nlohmann::json per_op = nlohmann::json::array();
  Table st({"op", "P", "regimes", "max |error| >= 1 MiB", "at", "max |error| <= 64 KiB", "at",
            "alpha (us)", "median time <= 64 KiB (us)", "alpha vs median"});
  for (const OpSummary& m : summaries) {
    per_op.push_back({{"op", m.op},
                      {"num_ranks", m.num_ranks},
                      {"num_regimes", m.num_regimes},
                      {"max_abs_error_pct_above_1mib", m.max_large_pct},
                      {"max_abs_error_bytes_above_1mib", m.max_large_bytes},
                      {"max_abs_error_pct_below_64kib", m.max_small_pct},
                      {"max_abs_error_bytes_below_64kib", m.max_small_bytes},
                      {"small_alpha_s", m.small_alpha_s},
                      {"median_time_s_below_64kib", m.median_small_time_s}});
    st.add_row({m.op, fmt::format("{}", m.num_ranks), fmt::format("{}", m.num_regimes),
                fmt::format("{:.1f}%", m.max_large_pct), format_bytes_binary(m.max_large_bytes),
                fmt::format("{:.1f}%", m.max_small_pct), format_bytes_binary(m.max_small_bytes),
                fmt::format("{:.2f}", m.small_alpha_s * 1e6),
                fmt::format("{:.2f}", m.median_small_time_s * 1e6),
                fmt::format("{:+.1f}%", 100 * (m.small_alpha_s / m.median_small_time_s - 1))});
  }
  out["collectives"] = {{"rows", rows},
                        {"per_op", per_op},
                        {"max_abs_error_pct_above_1mib", max_large},
                        {"max_abs_error_pct_below_64kib", max_small}};
  if (sink.format() != Format::json) {
    sink.comment(fmt::format("collectives: measured ({}) vs the calibration's fits (regime "
                             "covering each size)",
                             o.collectives));
    t.print(sink);
    if (sink.format() == Format::table) {
      sink.write("\n");
      st.print(sink);
      sink.write(fmt::format("collectives: max |error| {:.1f}% above 1 MiB, {:.1f}% below 64 KiB\n",
                             max_large, max_small));
    }
  }
  if (!o.plot.empty()) {
    PlotSpec spec = plot_spec(kernel_plots ? with_suffix(o.plot, "-collectives") : o.plot,
                              fmt::format("bus bandwidth, measured ({}) and model ({}); dashed: "
                                          "regime boundaries",
                                          o.collectives, cal.name),
                              "message size", "busbw (GB/s)");
    spec.logx = true; // linear busbw, as nccl-tests' curves: the large-size fit is what to see
    spec.yrange.lo = 0;
    spec.xtics = binary_size_tics();
    plot_panels(spec, panels, 3);
  }
  if (o.max_error_above_1mib_pct > 0 && max_large > o.max_error_above_1mib_pct)
    throw CheckFailed(fmt::format("collectives: max |error| {:.1f}% above 1 MiB > {:.1f}% "
                                  "(--max-error-above-1mib-pct)",
                                  max_large, o.max_error_above_1mib_pct));
}

// The flags of one comparison: limits in range, and one kind of comparison per run
// (measurements, collectives and a train-step file compare against one calibration together).
void check_compare_flags(const CompareOptions& o) {
  const Interval pct{0, 1e4, "% (0 = report only)"};
  require_range("--max-mape-pct", o.max_mape_pct, pct);
  require_range("--max-step-error-pct", o.max_step_error_pct, pct);
  require_range("--max-error-above-1mib-pct", o.max_error_above_1mib_pct, pct);
  require_range("--max-test-error-pct", o.framework_runs.max_test_error_pct, pct);
  require_range("--max-reserved-error-pct", o.max_reserved_error_pct, pct);
  if (!o.plot.empty())
    check_plot_file(o.plot);
  if (o.allocator_empty_cache && o.allocator_traces.empty())
    throw ConfigError("--empty-cache-at-start: replays allocator traces; give --allocator-traces");
  // A second kind would be ignored.
  std::vector<std::string> kinds;
  if (!o.allocator_traces.empty())
    kinds.emplace_back("--allocator-traces");
  if (!o.kernel_profiles.empty())
    kinds.emplace_back("--kernel-profiles");
  if (!o.framework_runs.files.empty())
    kinds.emplace_back("--framework-runs");
  const int calibrated = static_cast<int>(!o.measurements.empty()) +
                         static_cast<int>(!o.collectives.empty()) +
                         static_cast<int>(!o.train_step.empty());
  if (calibrated > 0)
    kinds.emplace_back("--measurements/--collectives/--train-step");
  if (kinds.size() > 1)
    throw ConfigError(fmt::format("{} and {}: one kind of comparison per run", kinds[0], kinds[1]));
  if (calibrated > 1 && o.out.format == Format::csv)
    throw ConfigError("--format csv: one table per run, and --measurements, --collectives and "
                      "--train-step make one each; compare one of them, or use --format json");
}

// --plot for kernels: predicted against measured, and the measured kernels on the roofline.
void plot_kernel_comparison(const std::string& file, const std::vector<fitting::Comparison>& cmp,
                            const fitting::MeasurementSet& ms, const hw::GpuSpec& gpu) {
  Series base_pts{"datasheet profile", {}, "points pt 6", {}},
      cal_pts{"calibrated profile", {}, "points pt 7", {}};
  double lo = 1e300, hi = 0;
  for (const auto& c : cmp) {
    base_pts.points.emplace_back(c.measured_s * 1e6, c.predicted_base_s * 1e6);
    cal_pts.points.emplace_back(c.measured_s * 1e6, c.predicted_calibrated_s * 1e6);
    lo = std::min(lo, c.measured_s * 1e6);
    hi = std::max(hi, c.measured_s * 1e6);
  }
  Series diag{"predicted = measured", {{lo / 2, lo / 2}, {hi * 2, hi * 2}}, "lines", {}};
  PlotSpec spec = plot_spec(file, fmt::format("{}: predicted vs measured kernel time", gpu.name),
                            "measured (us)", "predicted (us)");
  spec.logx = spec.logy = true;
  plot_xy(spec, {diag, base_pts, cal_pts});
  // Roofline with the measured points.
  const double peak = gpu.peak_flops_per_s[Dtype::bf16], bw = gpu.hbm_bandwidth_bytes_per_s;
  Series roof{"datasheet roofline (bf16)", {}, "lines", {}};
  for (double ai = 1.0 / 16; ai <= 16384; ai *= 2)
    roof.points.emplace_back(ai, std::min(peak, ai * bw) / 1e12);
  Series pts{"measured", {}, "points pt 7", {}};
  for (const auto& item : ms.items) {
    double flops = 0, bytes = 0;
    const auto w = fitting::kernel_work(item.shape);
    flops = w.flops;
    bytes = w.bytes_read + w.bytes_written;
    if (flops > 0 && bytes > 0)
      pts.points.emplace_back(flops / bytes, flops / item.median_s / 1e12);
  }
  PlotSpec roof_spec = plot_spec(with_suffix(file, "-roofline"),
                                 fmt::format("{}: measured kernels on the roofline", gpu.name),
                                 "arithmetic intensity (FLOP/byte)", "TFLOP/s");
  roof_spec.logx = roof_spec.logy = true;
  roof_spec.yrange = {0.01, 3 * peak / 1e12};
  plot_xy(roof_spec, {roof, pts});
}

// Measured kernels against the datasheet and the calibrated profile; returns the calibrated
// mean |error| (%).
double compare_measured_kernels(const CompareOptions& o, const hw::HardwareProfile& cal, Sink& sink,
                                nlohmann::json& out) {
  const auto ms = measurements_from(o.measurements, o.suite);
  std::string gpu_name = o.gpu.empty() ? cal.gpu : o.gpu;
  if (gpu_name.empty() && ms.device.contains("gpu_name") && ms.device["gpu_name"].is_string())
    gpu_name = gpu_preset_for_device(ms.device["gpu_name"].get<std::string>());
  if (gpu_name.empty())
    throw ConfigError("--gpu: required (the calibration names no GPU)");
  const auto gpu = hw::load_gpu(gpu_name);
  const std::string base_name = !o.base.empty() ? o.base : "default";
  const auto base = hw::load_profile(base_name);
  const auto cmp = fitting::compare_kernels(ms, gpu, base, cal);
  const double mape_base = fitting::mape(cmp, false), mape_cal = fitting::mape(cmp, true);
  nlohmann::json rows = nlohmann::json::array();
  Table t({"case", "measured (us)", "datasheet (us)", "error", "calibrated (us)", "error"},
          {"name", "measured_s", "predicted_base_s", "error_base_pct", "predicted_calibrated_s",
           "error_calibrated_pct"});
  for (const auto& c : cmp) {
    rows.push_back({{"name", c.name},
                    {"op", c.op},
                    {"measured_s", c.measured_s},
                    {"predicted_s", c.predicted_calibrated_s},
                    {"error_pct", c.error_calibrated_pct()},
                    {"predicted_base_s", c.predicted_base_s},
                    {"error_base_pct", c.error_base_pct()}});
    t.add_row({c.name, fmt::format("{:.2f}", c.measured_s * 1e6),
               fmt::format("{:.2f}", c.predicted_base_s * 1e6),
               fmt::format("{:+.1f}%", c.error_base_pct()),
               fmt::format("{:.2f}", c.predicted_calibrated_s * 1e6),
               fmt::format("{:+.1f}%", c.error_calibrated_pct())},
              {c.name, fmt::format("{:.9g}", c.measured_s),
               fmt::format("{:.9g}", c.predicted_base_s), fmt::format("{:.4f}", c.error_base_pct()),
               fmt::format("{:.9g}", c.predicted_calibrated_s),
               fmt::format("{:.4f}", c.error_calibrated_pct())});
  }
  out["kernels"] = {{"measurements", ms.source},
                    {"base_profile", base_name},
                    {"gpu", gpu.name},
                    {"rows", rows},
                    {"mape_base_pct", mape_base},
                    {"mape_calibrated_pct", mape_cal}};
  if (sink.format() != Format::json) {
    sink.comment(fmt::format("{} cases from {} on {}; datasheet profile '{}' vs calibrated '{}'",
                             cmp.size(), ms.source, gpu.name, base_name, cal.name));
    t.print(sink);
    if (sink.format() == Format::table)
      sink.write(fmt::format("mean |error|: datasheet {:.1f}%, calibrated {:.1f}% over {} cases\n",
                             mape_base, mape_cal, cmp.size()));
  }
  if (!o.plot.empty())
    plot_kernel_comparison(o.plot, cmp, ms, gpu);
  return mape_cal;
}

int run_compare(const CompareOptions& o) {
  check_compare_flags(o);
  if (!o.allocator_traces.empty()) {
    Sink sink(o.out);
    compare_allocator_traces(o, sink);
    return 0;
  }
  if (!o.kernel_profiles.empty()) {
    Sink sink(o.out);
    compare_kernel_profiles(o, sink);
    return 0;
  }
  if (!o.framework_runs.repeat_files.empty() && o.framework_runs.files.empty())
    throw ConfigError("--repeat-runs: needs --framework-runs (the runs it repeats)");
  if (!o.framework_runs.files.empty()) {
    Sink sink(o.out);
    nlohmann::json out;
    FrameworkRunsOptions f = o.framework_runs;
    f.plot = o.plot;
    compare_framework_runs(f, sink, out);
    if (sink.format() == Format::json)
      sink.json(out);
    return 0;
  }
  if (o.calibration.empty())
    throw ConfigError("--calibration: required (a profile from `trainsim calibrate`)");
  const auto cal = hw::load_profile(o.calibration);
  Sink sink(o.out);
  nlohmann::json out{{"calibration", o.calibration}};
  const bool kernels = !o.measurements.empty() || (o.collectives.empty() && o.train_step.empty());
  if (kernels) {
    const double mape_cal = compare_measured_kernels(o, cal, sink, out);
    if (o.max_mape_pct > 0 && mape_cal > o.max_mape_pct)
      throw CheckFailed(
          fmt::format("calibrated mean |error| {:.1f}% > {:.1f}%", mape_cal, o.max_mape_pct));
  }
  if (!o.collectives.empty()) {
    try {
      compare_collectives(o, cal, sink, out, kernels);
    } catch (const CheckFailed&) {
      if (sink.format() == Format::json)
        sink.json(out);
      throw;
    }
  }
  if (!o.train_step.empty())
    compare_train_step(o.train_step, cal, o.gpu,
                       o.plot.empty()                      ? ""
                       : kernels || !o.collectives.empty() ? with_suffix(o.plot, "-train-step")
                                                           : o.plot,
                       o.max_step_error_pct, sink, out);
  if (sink.format() == Format::json)
    sink.json(out);
  return 0;
}

} // namespace

void add_compare(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  auto* cmd = app.add_subcommand("compare", "Predicted vs measured: per kernel (datasheet and "
                                            "calibrated profile), per collective size, per "
                                            "recorded training step");
  cmd->add_option("--calibration", o->calibration,
                  "Calibrated profile (from `trainsim calibrate`); not needed with "
                  "--framework-runs");
  cmd->add_option("--framework-runs", o->framework_runs.files,
                  "Recorded runs of training frameworks (JSON lines, docs/frameworks.md; "
                  "repeatable): each predicted with its framework's profile, fit and test halves "
                  "summarised");
  cmd->add_option("--repeat-runs", o->framework_runs.repeat_files,
                  "With --framework-runs: further passes of runs already given (same ids; "
                  "repeatable): each run's step time becomes the geometric mean of its passes");
  cmd->add_option("--framework", o->framework_runs.framework,
                  "With --framework-runs: predict every run with this profile (name or file) "
                  "instead of its own framework's");
  cmd->add_option("--only", o->framework_runs.only,
                  "With --framework-runs: only the runs of this framework");
  cmd->add_option("--max-test-error-pct", o->framework_runs.max_test_error_pct,
                  "With --framework-runs: exit 3 when a framework's test-half mean |error| "
                  "exceeds this (0 = report)");
  cmd->add_option("--allocator-traces", o->allocator_traces,
                  "Allocator traces of PyTorch steps (scripts/peer_allocator_trace.py; "
                  "repeatable): each replayed through trainsim's caching-allocator model, peak "
                  "allocated and reserved against PyTorch's; a trace recorded under a cap "
                  "(--memory-cap-gb) is replayed under it, its verdict beside PyTorch's")
      ->check(CLI::ExistingFile);
  cmd->add_option("--kernel-profiles", o->kernel_profiles,
                  "Kernel profiles of framework steps (scripts/peer_kernel_profile.py; "
                  "repeatable): the GPU's summed kernel time per step against the GPU part of "
                  "trainsim's step (no host time), under the run's framework or --framework")
      ->check(CLI::ExistingFile);
  cmd->add_option("--allocator-cap-gb", o->allocator_cap_gb,
                  "With --allocator-traces: also replay each trace under this cap (GB = 1e9 "
                  "bytes, what torch.cuda.set_per_process_memory_fraction lets the allocator "
                  "reserve) and say whether the step would have run out of memory (default: "
                  "the cap a trace was recorded under, if any)");
  cmd->add_flag("--with-prediction", o->allocator_with_prediction,
                "With --allocator-traces: also predict each trace's configuration (its header: "
                "model, batch, precision, recompute, attention; the framework it names, or "
                "--framework) as `trainsim memory` does, from trainsim's own step, not the trace: "
                "peak allocated and reserved, and under a cap whether it fits");
  cmd->add_flag("--empty-cache-at-start", o->allocator_empty_cache,
                "With --allocator-traces under a cap: also replay each trace with the cache "
                "emptied at the first step's start, as the OOM probes run a step "
                "(scripts/peer_framework_runs.py calls torch.cuda.empty_cache() after building "
                "the model; the traced process did not): whether it would then fit");
  cmd->add_option("--max-reserved-error-pct", o->max_reserved_error_pct,
                  "With --allocator-traces: exit 3 when a trace's reserved |error| exceeds "
                  "this (0 = report)");
  cmd->add_option("--measurements", o->measurements,
                  "Kernel measurements to predict (bench kernels "
                  "JSON); default: run --suite on GPU 0 now");
  cmd->add_option("--suite", o->suite,
                  "Suite to run when measuring now (held-out: shapes the fit "
                  "never saw)")
      ->capture_default_str();
  cmd->add_option("--base", o->base,
                  "Datasheet profile to compare with (default: presets/profiles/default)");
  cmd->add_option("--gpu,-g", o->gpu, "GPU preset (default: the calibration's)");
  cmd->add_option("--collectives", o->collectives,
                  "Collective measurements (bench collectives JSON)");
  cmd->add_option("--level", o->level, "Level of those collectives")->capture_default_str();
  cmd->add_option(
      "--train-step", o->train_step,
      "Recorded training-step runs (train-step.jsonl from scripts/train-step-bench.sh): "
      "each re-predicted now with --calibration");
  cmd->add_option("--max-step-error-pct", o->max_step_error_pct,
                  "With --train-step: exit 3 when a step-time |error| exceeds this (0 = report)");
  cmd->add_option("--max-mape-pct", o->max_mape_pct,
                  "Fail (exit 3) above this calibrated mean error")
      ->capture_default_str();
  cmd->add_option("--ops", o->ops,
                  "Collectives to compare, comma-separated (default: every op with a fit)");
  cmd->add_option("--max-error-above-1mib-pct", o->max_error_above_1mib_pct,
                  "Fail (exit 3) when a collective's |error| at a size >= 1 MiB exceeds this")
      ->capture_default_str();
  cmd->add_option("--plot", o->plot,
                  "Charts (.png/.svg): kernels predicted vs measured here, plus <name>-roofline "
                  "and <name>-collectives (<name>-train-step); with --collectives or --train-step "
                  "alone, that chart here");
  add_output_options(*cmd, o->out);
  cmd->footer(
      "Examples:\n  trainsim compare --calibration presets/profiles/h200.json --measurements "
      "validate/results/fixtures/h200-held-out.json --plot docs/img/h200-compare.png\n"
      "  trainsim compare --calibration h200-x2-nvlink --collectives "
      "validate/results/fixtures/collectives-h200x2-mpi.json --ops all-reduce,all-gather "
      "--max-error-above-1mib-pct 15\n"
      "  trainsim compare --calibration h200-x2-nvlink --train-step "
      "validate/results/fixtures/h200x2-dp-train-step.jsonl --plot dp.png\n"
      "  trainsim compare --framework-runs validate/results/runs-2026-12-02/runs-a.jsonl "
      "--only pytorch\n"
      "  trainsim compare --allocator-traces "
      "validate/results/fixtures/allocator-traces/"
      "pytorch-cs336-xl-bf16-mixed-flash-none-b4-s512.trace.gz\n"
      "  trainsim compare --allocator-traces "
      "validate/results/fixtures/allocator-traces/"
      "fsdp-cs336-medium-bf16-mixed-flash-full-b77-s2048.trace.gz --allocator-cap-gb 40\n"
      "  trainsim compare --allocator-traces "
      "validate/results/fixtures/allocator-traces-capped/"
      "pytorch-cs336-large-bf16-mixed-naive-full-b46-s1024-cap40.trace.gz");
  cmd->callback([o] { run_compare(*o); });
}

} // namespace trainsim::cli
