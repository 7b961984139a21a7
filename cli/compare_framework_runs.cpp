// Framework runs: compare and calibrate (compare_framework_runs.hpp).
#include "cli/compare_framework_runs.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "cli/estimate_print.hpp"
#include "cli/plot.hpp"
#include "cli/resolve.hpp"
#include "common/errors.hpp"
#include "common/text.hpp"
#include "simulate/fit/framework_fit.hpp"

namespace trainsim::cli {
namespace {

struct Tally {
  std::int64_t n = 0, in1 = 0, in2 = 0;
  std::int64_t banded = 0; // runs whose profile has a band (fit residuals): the coverage's base
  double sum_abs = 0, worst = 0;
  std::int64_t mem_n = 0, alloc_n = 0;
  double mem_sum_abs = 0, mem_worst = 0, alloc_sum_abs = 0, alloc_worst = 0;
  std::int64_t oom_n = 0, oom_exact = 0, oom_within_one = 0;
  std::int64_t oom_loop = 0; // of oom_n, boundaries a user's training loop measured
  // Recompute boundaries: least layers fully recomputed to fit under a cap.
  std::int64_t rcb_n = 0, rcb_exact = 0, rcb_within_one = 0, rcb_sum_abs_layers = 0;
  std::int64_t rcb_in_band = 0; // the measured answer inside the memory band's range
  // Runs that ran (a measured step) whose predicted memory exceeds their GPU's: a "does not
  // fit" verdict the run itself refutes.
  std::int64_t ran_n = 0, ran_over_capacity = 0;
  void time(double e, double sigma, double sigma2) {
    ++n;
    sum_abs += std::abs(e);
    worst = std::max(worst, std::abs(e));
    // The bands are +-sigma and +-2 sigma around the prediction (as prediction intervals:
    // FitResiduals::time_band_fraction): measured inside when |error| is within.
    // A profile without residuals has no band: its runs count in no coverage.
    if (sigma <= 0)
      return;
    ++banded;
    in1 += std::abs(e) <= sigma ? 1 : 0;
    in2 += std::abs(e) <= sigma2 ? 1 : 0;
  }
  // "inside 1 sigma 80%, 2 sigma 100%", over the runs with a band ("of 4 with a band" when
  // some have none), or that none has one.
  [[nodiscard]] std::string coverage_text() const {
    if (banded == 0)
      return "no band (the profile has no fit residuals)";
    return fmt::format("inside 1 sigma {:.0f}%, 2 sigma {:.0f}%{}",
                       100.0 * static_cast<double>(in1) / static_cast<double>(banded),
                       100.0 * static_cast<double>(in2) / static_cast<double>(banded),
                       banded < n ? fmt::format(" (of {} runs with a band)", banded) : "");
  }
  void memory(double e) {
    ++mem_n;
    mem_sum_abs += std::abs(e);
    mem_worst = std::max(mem_worst, std::abs(e));
  }
  void allocated(double e) {
    ++alloc_n;
    alloc_sum_abs += std::abs(e);
    alloc_worst = std::max(alloc_worst, std::abs(e));
  }
  [[nodiscard]] nlohmann::json json() const {
    nlohmann::json j{{"runs", n}};
    if (n > 0) {
      j["time_mean_abs_error_pct"] = 100 * sum_abs / static_cast<double>(n);
      j["time_worst_abs_error_pct"] = 100 * worst;
      j["banded_runs"] = banded;
      if (banded > 0) {
        j["inside_1_sigma_fraction"] = static_cast<double>(in1) / static_cast<double>(banded);
        j["inside_2_sigma_fraction"] = static_cast<double>(in2) / static_cast<double>(banded);
      }
    }
    if (alloc_n > 0) {
      j["allocated_runs"] = alloc_n;
      j["allocated_mean_abs_error_pct"] = 100 * alloc_sum_abs / static_cast<double>(alloc_n);
      j["allocated_worst_abs_error_pct"] = 100 * alloc_worst;
    }
    if (mem_n > 0) {
      j["memory_runs"] = mem_n;
      j["memory_mean_abs_error_pct"] = 100 * mem_sum_abs / static_cast<double>(mem_n);
      j["memory_worst_abs_error_pct"] = 100 * mem_worst;
    }
    if (ran_n > 0) {
      j["ran_runs"] = ran_n;
      j["ran_predicted_over_capacity"] = ran_over_capacity;
    }
    if (oom_n > 0) {
      j["oom_pairs"] = oom_n;
      j["oom_exact"] = oom_exact;
      j["oom_within_one"] = oom_within_one;
      j["oom_by_training_loop"] = oom_loop;
    }
    if (rcb_n > 0) {
      j["recompute_boundaries"] = rcb_n;
      j["recompute_boundary_exact"] = rcb_exact;
      j["recompute_boundary_within_one"] = rcb_within_one;
      j["recompute_boundary_mean_abs_layers"] =
          static_cast<double>(rcb_sum_abs_layers) / static_cast<double>(rcb_n);
      j["recompute_boundary_inside_band"] = rcb_in_band;
    }
    return j;
  }
};

const char* half(fitting::Split s) { return s == fitting::Split::fit ? "fit" : "test"; }

std::map<std::string, sim::FrameworkProfile>
profiles_for(const std::vector<fitting::FrameworkRun>& runs, const std::string& fixed) {
  std::map<std::string, sim::FrameworkProfile> p;
  for (const auto& r : runs) {
    const std::string name = fixed.empty() ? r.framework : fixed;
    if (p.contains(name))
      continue;
    try {
      p.emplace(name, sim::load_framework(name));
    } catch (const ConfigError& e) {
      if (!fixed.empty())
        throw;
      // The row's own framework: name the row, and the way to use a profile of one's own.
      throw ConfigError(
          fmt::format("{}: run '{}': framework '{}' is no framework preset (`trainsim "
                      "presets list frameworks`); --framework FILE.json predicts "
                      "every run with a profile of your own",
                      r.file, r.id, name));
    }
  }
  return p;
}

// What one comparison of framework runs collects: the table, the tallies by framework and half,
// the JSON rows, the plot's points and the rows' own notes.
struct RunsReport {
  Table t{{"run", "half", "framework", "measured", "predicted", "error", "band", "memory error"},
          {"id", "split", "framework", "measured", "predicted", "error_pct", "band_pct",
           "memory_error_pct"}};
  std::map<std::string, Tally> tally; // "framework/half"
  nlohmann::json rows = nlohmann::json::array();
  Series fit_pts{"fit half", {}, "points pt 7 ps 1.1", {}},
      test_pts{"test half", {}, "points pt 5 ps 1.1", {}};
  std::vector<std::string> row_notes; // rows that contradict themselves (FrameworkRun::notes)

  // A recompute boundary: the least layers recomputed, measured against predicted.
  void recompute_boundary(const fitting::FrameworkRun& r, const fitting::RunPrediction& p,
                          const std::string& fw_name, Tally& k, nlohmann::json& row) {
    // An answer of -1 (not even every layer) is as far from 0 as every layer is.
    auto layers = [&r](std::int64_t n) { return n < 0 ? r.model.num_layers + 1 : n; };
    const std::int64_t diff = layers(p.min_recompute_layers) - layers(r.min_recompute_layers);
    ++k.rcb_n;
    k.rcb_exact += diff == 0 ? 1 : 0;
    k.rcb_within_one += std::abs(diff) <= 1 ? 1 : 0;
    k.rcb_sum_abs_layers += std::abs(diff);
    const std::int64_t lo = layers(p.min_recompute_layers_low),
                       hi = layers(p.min_recompute_layers_high),
                       measured = layers(r.min_recompute_layers);
    const bool in_band = lo <= measured && measured <= hi;
    k.rcb_in_band += in_band ? 1 : 0;
    row["memory_cap_bytes"] = r.memory_cap_bytes;
    row["min_recompute_layers_measured"] = r.min_recompute_layers;
    row["min_recompute_layers_predicted"] = p.min_recompute_layers;
    row["min_recompute_layers_low"] = p.min_recompute_layers_low;
    row["min_recompute_layers_high"] = p.min_recompute_layers_high;
    row["inside_band"] = in_band;
    row["num_layers"] = r.model.num_layers;
    const double me = fitting::memory_error(r, p);
    if (std::isfinite(me)) {
      k.memory(me);
      row["memory_error_pct"] = 100 * me;
    }
    auto span = [](std::int64_t n) { return n < 0 ? std::string("all+") : std::to_string(n); };
    auto say = [&r](std::int64_t n) {
      return n < 0    ? std::string("not even all")
             : n == 0 ? std::string("none")
                      : fmt::format("{} of {} layers", n, r.model.num_layers);
    };
    t.add_row(
        {r.id, half(r.split), fw_name,
         fmt::format("recompute {} at {:.2f} GB", say(r.min_recompute_layers),
                     r.memory_cap_bytes / 1e9),
         say(p.min_recompute_layers), diff == 0 ? "=" : fmt::format("{:+d}", diff),
         fmt::format("{}..{}", span(p.min_recompute_layers_low), span(p.min_recompute_layers_high)),
         std::isfinite(me) ? fmt::format("{:+.1f}%", 100 * me) : "-"},
        {r.id, half(r.split), fw_name, std::to_string(r.min_recompute_layers),
         std::to_string(p.min_recompute_layers), "", "",
         std::isfinite(me) ? fmt::format("{:.4f}", 100 * me) : ""});
  }

  // An OOM boundary: the largest micro-batch under the cap, measured against predicted.
  void oom_boundary(const fitting::FrameworkRun& r, const fitting::RunPrediction& p,
                    const std::string& fw_name, Tally& k, nlohmann::json& row) {
    ++k.oom_n;
    k.oom_exact += p.max_micro_batch == r.max_micro_batch ? 1 : 0;
    k.oom_within_one += std::abs(p.max_micro_batch - r.max_micro_batch) <= 1 ? 1 : 0;
    row["memory_cap_bytes"] = r.memory_cap_bytes;
    const double me = fitting::memory_error(r, p);
    if (std::isfinite(me)) {
      k.memory(me);
      row["memory_error_pct"] = 100 * me;
    }
    row["max_micro_batch_measured"] = r.max_micro_batch;
    row["max_micro_batch_predicted"] = p.max_micro_batch;
    // By whom the boundary was measured: a user's training loop (four steps, the cache kept:
    // what `trainsim memory --allocator-cap-gb` predicts) or the recorded search's probes.
    row["boundary_measured_by"] = r.loop_boundary ? "training loop" : "probes";
    k.oom_loop += r.loop_boundary ? 1 : 0;
    if (r.searched_max_micro_batch >= 0)
      row["max_micro_batch_probes"] = r.searched_max_micro_batch;
    t.add_row({r.id, half(r.split), fw_name,
               r.loop_boundary ? fmt::format("max batch {} (loop; probes {})", r.max_micro_batch,
                                             r.searched_max_micro_batch)
                               : fmt::format("max batch {} (probes)", r.max_micro_batch),
               fmt::format("{}", p.max_micro_batch),
               p.max_micro_batch == r.max_micro_batch
                   ? "="
                   : fmt::format("{:+d}", p.max_micro_batch - r.max_micro_batch),
               "", std::isfinite(me) ? fmt::format("{:+.1f}%", 100 * me) : "-"},
              {r.id, half(r.split), fw_name, std::to_string(r.max_micro_batch),
               std::to_string(p.max_micro_batch), "", "", ""});
  }

  // A step that ran: its time (or throughput) and memory, measured against predicted.
  void step(const fitting::FrameworkRun& r, const fitting::RunPrediction& p,
            const sim::FrameworkProfile& fw, const std::string& fw_name, Tally& k, double sigma,
            double sigma2, nlohmann::json& row) {
    const double e = fitting::time_error(r, p);
    const double me = fitting::memory_error(r, p);
    const bool by_step = r.step_time_s > 0;
    if (std::isfinite(e)) {
      k.time(e, sigma, sigma2);
      // Published throughput: BF16 and FP8 (FP8 recipes and MXFP8) also apart.
      if (!by_step) {
        const auto prec = r.setup.precision;
        const char* cls = model::is_fp8(prec)                    ? " fp8"
                          : prec == model::Precision::fp16_mixed ? " fp16"
                          : prec == model::Precision::fp32       ? " fp32"
                                                                 : " bf16";
        tally[fw_name + "/" + half(r.split) + cls].time(e, sigma, sigma2);
      }
      // Models with routed experts apart too, where the profile's fit had both kinds.
      if (fw.fit_moe.time_runs > 0)
        tally[fw_name + "/" + half(r.split) + (r.model.num_experts > 0 ? " moe" : " dense")].time(
            e, sigma, sigma2);
    }
    if (std::isfinite(me))
      k.memory(me);
    // It ran: a predicted peak above the GPU's memory is a wrong "does not fit".
    const bool over = p.step.memory.total > r.gpu.memory_bytes;
    ++k.ran_n;
    k.ran_over_capacity += over ? 1 : 0;
    row["predicted_fits"] = !over;
    row["measured"] = by_step ? r.step_time_s : r.tokens_per_s_per_gpu;
    row["predicted"] = by_step ? p.step_time_s : p.tokens_per_s_per_gpu;
    row["quantity"] = by_step ? "step_time_s" : "tokens_per_s_per_gpu";
    row["error_pct"] = 100 * e;
    row["band_pct"] = 100 * sigma;
    // How the prediction was made, to read a miss from: the layout the row ran with and the
    // predicted step's parts (as `trainsim estimate --format json` gives them).
    row["plan"] = plan_json(r.plan);
    row["setup"] = setup_json(r.setup);
    row["cluster"] = r.cluster.name;
    row["predicted_step_time_s"] = p.step_time_s;
    row["breakdown_s"] = breakdown_json(p.step.breakdown_s);
    row["caveats"] = p.step.caveats;
    row["notes"] = r.notes;
    for (const auto& n : r.notes)
      row_notes.push_back(fmt::format("# note: {}: {}", r.id, n));
    if (std::isfinite(me)) {
      row["memory_error_pct"] = 100 * me;
      row["peak_reserved_bytes_predicted"] = p.peak_reserved_bytes;
      row["peak_allocated_bytes_predicted"] = p.peak_allocated_bytes;
    }
    if (r.peak_allocated_bytes > 0) {
      const double ae = p.peak_allocated_bytes / r.peak_allocated_bytes - 1;
      k.allocated(ae);
      row["allocated_error_pct"] = 100 * ae;
    }
    const std::string meas = by_step ? fmt::format("{:.2f} ms", r.step_time_s * 1e3)
                                     : fmt::format("{:.0f} tok/s/GPU", r.tokens_per_s_per_gpu);
    const std::string pred = by_step ? fmt::format("{:.2f} ms", p.step_time_s * 1e3)
                                     : fmt::format("{:.0f} tok/s/GPU", p.tokens_per_s_per_gpu);
    t.add_row({r.id, half(r.split), fw_name, meas, pred, fmt::format("{:+.1f}%", 100 * e),
               sigma > 0 ? fmt::format("+-{:.0f}%", 100 * sigma) : "-",
               std::isfinite(me) ? fmt::format("{:+.1f}%", 100 * me)
               : over            ? "over GPU"
                                 : "-"},
              {r.id, half(r.split), fw_name, fmt::format("{:.9g}", row["measured"].get<double>()),
               fmt::format("{:.9g}", row["predicted"].get<double>()),
               fmt::format("{:.4f}", 100 * e), fmt::format("{:.4f}", 100 * sigma),
               std::isfinite(me) ? fmt::format("{:.4f}", 100 * me) : ""});
    const double mv = by_step ? r.step_time_s * 1e3 : r.tokens_per_s_per_gpu;
    const double pv = by_step ? p.step_time_s * 1e3 : p.tokens_per_s_per_gpu;
    (r.split == fitting::Split::fit ? fit_pts : test_pts).points.emplace_back(mv, pv);
  }

  void print_summary(Sink& sink) const {
    for (const auto& [key, k] : tally) {
      std::string line = fmt::format("{}: ", key);
      if (k.n > 0)
        line += fmt::format("{} runs, time mean |error| {:.1f}%, worst {:.1f}%, {}", k.n,
                            100 * k.sum_abs / static_cast<double>(k.n), 100 * k.worst,
                            k.coverage_text());
      if (k.mem_n > 0)
        line += fmt::format("{}memory mean |error| {:.1f}%, worst {:.1f}% ({} runs)",
                            k.n > 0 ? "; " : "", 100 * k.mem_sum_abs / static_cast<double>(k.mem_n),
                            100 * k.mem_worst, k.mem_n);
      if (k.alloc_n > 0)
        line += fmt::format("; peak allocated mean |error| {:.1f}%, worst {:.1f}% ({} runs)",
                            100 * k.alloc_sum_abs / static_cast<double>(k.alloc_n),
                            100 * k.alloc_worst, k.alloc_n);
      if (k.ran_over_capacity > 0)
        line += fmt::format("; {} of {} runs that ran predicted over their GPU's memory",
                            k.ran_over_capacity, k.ran_n);
      if (k.oom_n > 0)
        line += fmt::format("{}OOM boundary: max micro-batch exact {}/{}, within one {}/{}{}",
                            k.n > 0 || k.mem_n > 0 ? "; " : "", k.oom_exact, k.oom_n,
                            k.oom_within_one, k.oom_n,
                            k.oom_loop == k.oom_n ? " (each by a training loop)"
                            : k.oom_loop > 0 ? fmt::format(" ({} by a training loop, {} by probes)",
                                                           k.oom_loop, k.oom_n - k.oom_loop)
                                             : " (by probes)");
      if (k.rcb_n > 0)
        line +=
            fmt::format("{}recompute boundary: least layers recomputed exact {}/{}, within one "
                        "{}/{}, mean |difference| {:.1f} layers, measured inside the memory "
                        "band's range {}/{}",
                        k.n > 0 || k.mem_n > 0 || k.oom_n > 0 ? "; " : "", k.rcb_exact, k.rcb_n,
                        k.rcb_within_one, k.rcb_n,
                        static_cast<double>(k.rcb_sum_abs_layers) / static_cast<double>(k.rcb_n),
                        k.rcb_in_band, k.rcb_n);
      sink.write(line + "\n");
    }
  }

  void plot(const std::string& file) const {
    double lo = 1e300, hi = 0;
    for (const auto* s : {&fit_pts, &test_pts})
      for (const auto& [x, y] : s->points) {
        lo = std::min({lo, x, y});
        hi = std::max({hi, x, y});
      }
    if (hi > 0) {
      Series diag{
          "predicted = measured", {{lo / 1.5, lo / 1.5}, {hi * 1.5, hi * 1.5}}, "lines", {}};
      PlotSpec spec =
          plot_spec(file, "framework runs: predicted vs measured (step ms or tokens/s/GPU)",
                    "measured", "predicted");
      spec.logx = spec.logy = true;
      spec.key = KeyPlace::top_left;
      plot_xy(spec, {diag, fit_pts, test_pts});
    }
  }
};

} // namespace

void compare_framework_runs(const FrameworkRunsOptions& o, Sink& sink, nlohmann::json& out) {
  if (!o.plot.empty())
    check_plot_file(o.plot);
  auto all = fitting::read_framework_runs(o.files);
  fitting::merge_repeat_runs(all, o.repeat_files);
  std::vector<fitting::FrameworkRun> runs;
  for (const auto& r : all)
    if (o.only.empty() || r.framework == o.only)
      runs.push_back(r);
  if (runs.empty())
    throw ConfigError(fmt::format("--framework-runs: no run{} in {} file(s)",
                                  o.only.empty() ? "" : " of framework " + o.only, o.files.size()));
  const auto profiles = profiles_for(runs, o.framework);
  RunsReport report;
  auto& t = report.t;
  auto& tally = report.tally;
  auto& rows = report.rows;
  std::int64_t skipped = 0;
  std::map<std::string, std::int64_t> skip_reasons;
  for (const auto& r : runs) {
    const std::string fw_name = o.framework.empty() ? r.framework : o.framework;
    nlohmann::json row{
        {"id", r.id}, {"file", r.file}, {"framework", fw_name}, {"split", half(r.split)}};
    if (!r.skip_reason.empty()) {
      ++skipped;
      ++skip_reasons[r.skip_reason.substr(0, r.skip_reason.find(':'))];
      row["skipped"] = r.skip_reason;
      rows.push_back(row);
      continue;
    }
    const auto& fw = profiles.at(fw_name);
    const auto p = fitting::predict_run(r, fw);
    Tally& k = tally[fw_name + "/" + half(r.split)];
    const auto& residuals = // of this kind of run and model
        fw.time_residuals(r.plan.num_gpus(), r.model.num_experts > 0);
    const double sigma = residuals.time_band_fraction(1), sigma2 = residuals.time_band_fraction(2);
    if (r.recompute_boundary)
      report.recompute_boundary(r, p, fw_name, k, row);
    else if (r.is_oom_search())
      report.oom_boundary(r, p, fw_name, k, row);
    else
      report.step(r, p, fw, fw_name, k, sigma, sigma2, row);
    rows.push_back(row);
  }
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [key, k] : tally)
    summary[key] = k.json();
  out["framework_runs"] = {
      {"files", o.files}, {"runs", rows}, {"summary", summary}, {"skipped", skipped}};
  if (sink.format() == Format::json)
    return;
  sink.comment(fmt::format(
      "{} runs from {} file(s); predicted with {}; skipped {}", runs.size(), o.files.size(),
      o.framework.empty() ? "each run's framework profile" : o.framework, skipped));
  t.print(sink);
  if (sink.format() != Format::table)
    return;
  for (const auto& [why, n] : skip_reasons)
    sink.write(fmt::format("# skipped {}: {}\n", n, why));
  for (const auto& n : report.row_notes)
    sink.write(n + "\n");
  report.print_summary(sink);
  if (!o.plot.empty())
    report.plot(o.plot);
  if (o.max_test_error_pct > 0)
    for (const auto& [key, k] : tally)
      if (key.ends_with("/test") && k.n > 0 &&
          100 * k.sum_abs / static_cast<double>(k.n) > o.max_test_error_pct)
        throw CheckFailed(fmt::format("{}: mean |error| {:.1f}% > {:.1f}% (--max-test-error-pct)",
                                      key, 100 * k.sum_abs / static_cast<double>(k.n),
                                      o.max_test_error_pct));
}

namespace {

// A fitted profile's figures, in every format: "name = value" lines under a comment (table),
// name,value rows (CSV), or one object (JSON); the profile itself is the --out file.
struct FitReport {
  std::string what; // the comment line: what was fitted on what
  std::vector<std::pair<std::string, double>> fitted, quality;
  std::string out_file;
};

void print_fit(Sink& sink, const FitReport& f) {
  if (sink.format() == Format::json) {
    nlohmann::json fitted = nlohmann::json::object(), quality = nlohmann::json::object();
    for (const auto& [k, v] : f.fitted)
      fitted[k] = v;
    for (const auto& [k, v] : f.quality)
      quality[k] = v;
    sink.json({{"fitted", fitted}, {"quality", quality}, {"wrote", f.out_file}, {"what", f.what}});
    return;
  }
  if (sink.format() == Format::csv) {
    Table t({"name", "value"});
    for (const auto* list : {&f.fitted, &f.quality})
      for (const auto& [k, v] : *list)
        t.add_row({k, fmt::format("{:.6g}", v)});
    t.print(sink);
    return;
  }
  sink.comment(f.what);
  for (const auto* list : {&f.fitted, &f.quality})
    for (const auto& [k, v] : *list)
      sink.write(fmt::format("{} = {:.4g}\n", k, v));
  sink.write(fmt::format("wrote {}\n", printable(f.out_file)));
}

} // namespace

void calibrate_framework(const std::vector<std::string>& files,
                         const std::vector<std::string>& repeat_files, const std::string& framework,
                         const std::string& fit_only, const std::string& out_file, Sink& sink) {
  if (framework.empty())
    throw ConfigError("--framework: required with --framework-runs (the profile to fit)");
  auto runs = fitting::read_framework_runs(files);
  fitting::merge_repeat_runs(runs, repeat_files);
  const auto base = sim::load_framework(framework);
  auto write = [&out_file](const sim::FrameworkProfile& p) {
    write_output_file(out_file, "--out", sim::framework_to_json(p).dump(2) + "\n");
  };
  std::string on;
  for (const auto& f : files)
    on += (on.empty() ? "" : ", ") + f;
  FitReport report;
  report.out_file = out_file;
  if (fit_only == "tp-overlap") {
    auto r = fitting::fit_tp_overlap_hidden(base, runs);
    // The band of multi-GPU predictions: this profile's residuals on the multi-GPU fit rows
    // (one parameter, tp_overlap_hidden_fraction, fitted on some of them).
    r.profile.fit_multi_gpu = fitting::multi_gpu_residuals(
        r.profile, runs, 1, on + " (fit half, runs on more than one GPU: docs/frameworks.md)");
    write(r.profile);
    report.what = fmt::format("fitted {}'s tp_overlap_hidden_fraction alone on {} fit rows that "
                              "overlap tensor-parallel communication without context parallelism",
                              base.name, r.rows);
    report.fitted = {{"tp_overlap_hidden_fraction", r.profile.tp_overlap_hidden_fraction}};
    report.quality = {
        {"fit_rows_mean_abs_error_pct", 100 * r.mape},
        {"multi_gpu_sigma_pct", 100 * r.profile.fit_multi_gpu.time_sigma_fraction},
        {"multi_gpu_fit_rows", static_cast<double>(r.profile.fit_multi_gpu.time_runs)},
        {"multi_gpu_dof", static_cast<double>(r.profile.fit_multi_gpu.time_dof())}};
    print_fit(sink, report);
    return;
  }
  if (!fit_only.empty())
    throw ConfigError(fmt::format("--fit-only = {}: must be tp-overlap", fit_only));
  const auto options = fitting::default_fit_options(base, runs);
  if (!repeat_files.empty()) {
    on += "; further passes merged:";
    for (const auto& f : repeat_files)
      on += " " + f;
  }
  on += " (fit half: docs/frameworks.md)";
  const auto r = fitting::fit_framework(base, runs, options, on);
  write(r.profile);
  const auto& p = r.profile;
  report.what = fmt::format("fitted {} on {} time and {} memory runs (fit half of {})", p.name,
                            r.fit_time_runs, r.fit_memory_runs, on);
  auto& f = report.fitted;
  if (options.host_per_kernel)
    f.emplace_back("host_us_per_kernel", p.host_s_per_kernel * 1e6);
  if (options.host_per_checkpoint)
    f.emplace_back("host_us_per_checkpoint", p.host_s_per_checkpoint * 1e6);
  if (options.host_per_sac_kernel)
    f.emplace_back("host_us_per_sac_kernel", p.host_s_per_sac_kernel * 1e6);
  if (options.gemm_efficiency)
    f.emplace_back("gemm_efficiency_scale", p.gemm_efficiency_scale);
  for (const auto& [gpu, v] : p.gpu_gemm_efficiency_scale) // on top of the shared scale
    f.emplace_back("gpu_gemm_efficiency_scale." + gpu, v);
  if (options.expert_efficiency)
    f.emplace_back("expert_gemm_efficiency_scale", p.expert_gemm_efficiency_scale);
  if (options.moe_dispatch)
    f.emplace_back("moe_dispatch_us_per_layer", p.moe_dispatch_s_per_layer * 1e6);
  if (options.activation_factor)
    f.emplace_back("activation_bytes_factor", p.activation_bytes_factor);
  if (options.activation_factor_fp32)
    f.emplace_back("activation_bytes_factor_fp32", p.activation_bytes_factor_fp32);
  if (options.allocator_overhead)
    f.emplace_back("allocator_overhead_fraction", p.allocator_overhead_fraction);
  report.quality = {{"fit_time_mean_abs_error_pct", 100 * r.fit_time_mape},
                    {"fit_time_sigma_pct", 100 * p.fit.time_sigma_fraction},
                    {"fit_memory_mean_abs_error_pct", 100 * r.fit_memory_mape},
                    {"fit_memory_sigma_pct", 100 * p.fit.memory_sigma_fraction}};
  print_fit(sink, report);
}

} // namespace trainsim::cli
