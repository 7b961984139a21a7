// `trainsim calibrate`: fit a hardware profile from kernel measurements (run now on the local
// GPU, or read from a `bench kernels --format json` file) and from collective measurements
// (`bench collectives --format json`), and write it as a profile JSON.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/compare_framework_runs.hpp"
#include "cli/measure.hpp"
#include "cli/output.hpp"
#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "common/units.hpp"
#include "hardware/load.hpp"
#include "hardware/topology.hpp"
#include "simulate/fit/collective_fit.hpp"
#include "simulate/fit/kernel_fit.hpp"
#include "validate/bench/bench.hpp"

namespace trainsim::cli {
namespace {

struct CalibrateOptions {
  std::string out;
  std::string from;
  std::string gpu;
  std::string base;
  std::string name;
  std::string collectives;
  std::string launch_probe, overlap_probe, host_link_probe;
  std::string level = "intra-node";
  std::string suite = "calibration";
  std::int64_t max_regimes = 3;
  std::string topology;
  std::vector<std::string> notes;
  std::vector<std::string> framework_runs;
  std::vector<std::string> repeat_runs;
  std::string framework;
  std::string fit_only;
  OutputOptions output;
};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += (i ? sep : "") + parts[i];
  return out;
}

// "2x NVIDIA H200" from the per-rank GPU names (or "NVIDIA H200, NVIDIA H100" when mixed).
std::string device_summary(const nlohmann::json& gpu_names) {
  std::vector<std::string> names;
  if (gpu_names.is_array())
    for (const auto& n : gpu_names)
      if (n.is_string())
        names.push_back(n.get<std::string>());
  if (names.empty())
    return "unknown devices";
  if (std::all_of(names.begin(), names.end(), [&](const auto& n) { return n == names[0]; }))
    return fmt::format("{}x {}", names.size(), names[0]);
  return join(names, ", ");
}

// The report lines of one collective fit: the regimes, then the quality figures.
std::vector<std::string> describe_fit(const fitting::CollectiveFitResult& r) {
  const hw::CollectiveFit& f = r.fit;
  const fitting::CollectiveFitQuality& q = r.quality;
  std::vector<std::string> regimes;
  for (const auto& g : f.regimes)
    regimes.push_back(fmt::format("from {}: alpha {:.2f} us, busbw {:.1f} GB/s",
                                  format_bytes_binary(g.min_bytes), g.alpha_s * 1e6,
                                  g.busbw_bytes_per_s / 1e9));
  auto at = [](double bytes) {
    return std::isfinite(bytes) ? " at " + format_bytes_binary(bytes) : std::string();
  };
  return {fmt::format("{} {} P={}: {} regime{}: {}", hw::to_string(f.op), hw::to_string(f.level),
                      f.num_ranks, f.regimes.size(), f.regimes.size() == 1 ? "" : "s",
                      join(regimes, "; ")),
          fmt::format("{} P={}: max error >= 1 MiB {:.1f}%{}, <= 64 KiB {:.1f}%{}; latency: alpha "
                      "{:.2f} us vs median time <= 64 KiB {:.2f} us ({:+.1f}%); held-out (fit on "
                      "even-indexed sizes, odd sizes >= 1 MiB): {:.1f}%{}, {:.1f}% away from "
                      "breakpoints",
                      hw::to_string(f.op), f.num_ranks, 100 * q.max_rel_error_large_fraction,
                      at(q.max_rel_error_large_bytes), 100 * q.max_rel_error_small_fraction,
                      at(q.max_rel_error_small_bytes), q.small_alpha_s * 1e6,
                      q.median_small_time_s * 1e6, 100 * q.small_alpha_error_fraction,
                      100 * q.heldout_max_rel_error_large_fraction,
                      at(q.heldout_max_rel_error_large_bytes),
                      100 * q.heldout_max_rel_error_large_interior_fraction)};
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

} // namespace

std::string gpu_preset_for_device(const std::string& device_name) {
  std::string s;
  for (char c : device_name)
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.rfind("nvidia ", 0) == 0)
    s = s.substr(7);
  for (char& c : s)
    if (c == ' ')
      c = '-';
  const auto names = list_presets("gpus");
  if (std::find(names.begin(), names.end(), s) != names.end())
    return s;
  if (s.rfind("h100", 0) == 0)
    return s.find("pcie") != std::string::npos ? "h100-pcie" : "h100-sxm";
  if (s.rfind("a100", 0) == 0)
    return s.find("40") != std::string::npos ? "a100-40g" : "a100-80g";
  return "";
}

fitting::MeasurementSet measurements_from(const std::string& file, const std::string& suite) {
  if (!file.empty())
    return fitting::load_measurements(file);
  val::BenchOptions opts;
  opts.cases = val::suite_cases(suite);
  opts.command_line = "trainsim bench kernels --suite " + suite;
  const auto dev = val::query_device(0);
  const auto results = val::run_kernel_benchmarks(
      opts, [](std::size_t done, std::size_t total, const std::string& name) {
        fmt::print(stderr, "\r[{}/{}] {:<60}", done, total, name);
        if (done == total)
          fmt::print(stderr, "\n");
      });
  fitting::MeasurementSet ms;
  ms.source = "suite " + suite + " on " + dev.gpu_name;
  ms.device = {{"gpu_name", dev.gpu_name},
               {"driver_version", dev.driver_version},
               {"runtime_version", dev.runtime_version},
               {"cublas_version", dev.cublas_version}};
  ms.command_line = opts.command_line;
  for (const auto& r : results) {
    if (!r.check_passed)
      throw CheckFailed(fmt::format("{}: failed its correctness check", r.name));
    ms.items.push_back({r.name, r.shape, r.median_s, r.min_s, r.noise_pct});
  }
  return ms;
}

namespace {

int run_calibrate(const CalibrateOptions& o) {
  if (o.out.empty())
    throw ConfigError("--out: required (the profile JSON to write)");
  if (!o.repeat_runs.empty() && o.framework_runs.empty())
    throw ConfigError("--repeat-runs: needs --framework-runs (the runs it repeats)");
  if (!o.framework_runs.empty()) {
    Sink sink(o.output);
    calibrate_framework(o.framework_runs, o.repeat_runs, o.framework, o.fit_only, o.out, sink);
    return 0;
  }
  if (o.max_regimes < 1 || o.max_regimes > 3)
    throw ConfigError(fmt::format("--max-regimes = {}: must be 1, 2 or 3", o.max_regimes));
  if (!o.topology.empty() && o.collectives.empty())
    throw ConfigError("--topology: only used with --collectives (it describes their machine)");
  std::string gpu_name = o.gpu;
  nlohmann::json metadata{{"date", today()}};
  hw::HardwareProfile profile;
  std::vector<std::string> lines;
  const bool kernels = o.collectives.empty() || !o.from.empty();
  if (kernels) {
    const auto ms = measurements_from(o.from, o.suite);
    if (gpu_name.empty() && ms.device.contains("gpu_name") && ms.device["gpu_name"].is_string())
      gpu_name = gpu_preset_for_device(ms.device["gpu_name"].get<std::string>());
    if (gpu_name.empty())
      throw ConfigError("--gpu: required (the measured device has no preset)");
    const auto gpu = hw::load_gpu(gpu_name);
    const auto base = o.base.empty() ? hw::default_profile(gpu.name) : hw::load_profile(o.base);
    fitting::FitReport report;
    profile = fitting::fit_profile(ms, gpu, base, report);
    lines = report.lines;
    metadata["kernel_measurements"] = ms.source;
    metadata["device"] = ms.device;
    metadata["bench_command"] = ms.command_line;
    metadata["kernel_cases"] = ms.items.size();
  } else {
    if (gpu_name.empty() && o.base.empty())
      throw ConfigError(
          "--gpu or --base: needed to start from a profile when only --collectives is given");
    profile = o.base.empty() ? hw::default_profile(gpu_name) : hw::load_profile(o.base);
  }
  std::vector<std::pair<hw::CollectiveFit, nlohmann::json>> qualities;
  std::string collective_source;
  if (!o.collectives.empty()) {
    fitting::CollectiveFitOptions fit_options;
    fit_options.max_regimes = o.max_regimes;
    const auto fits = fitting::fit_collectives_file(o.collectives, o.level, fit_options);
    profile.collective_fits.erase(std::remove_if(profile.collective_fits.begin(),
                                                 profile.collective_fits.end(),
                                                 [&](const hw::CollectiveFit& f) {
                                                   return hw::to_string(f.level) == o.level;
                                                 }),
                                  profile.collective_fits.end());
    for (const auto& f : fits) {
      // P = 1 fits describe a local copy, not communication: keep them out of the model.
      if (f.fit.num_ranks < 2) {
        lines.push_back(
            fmt::format("{} at P = 1 skipped (no communication)", hw::to_string(f.fit.op)));
        continue;
      }
      profile.collective_fits.push_back(f.fit);
      qualities.emplace_back(f.fit, fitting::to_json(f.quality));
      for (const auto& l : describe_fit(f))
        lines.push_back(l);
    }
    metadata["collective_measurements"] = o.collectives;
    metadata["collective_fit_options"] = {
        {"max_regimes", fit_options.max_regimes},
        {"min_sizes_per_regime", fit_options.min_sizes_per_regime}};
    // Provenance of the measurements: the device block `bench collectives` wrote.
    const nlohmann::json doc = load_json_file(o.collectives);
    std::vector<std::string> parts;
    if (doc.contains("device") && doc["device"].is_object()) {
      nlohmann::json device = doc["device"];
      device.erase("hostname");
      metadata["collective_device"] = device;
      // Provenance only, but a field of the wrong type is named, not taken for another.
      const std::string& where = o.collectives;
      parts.push_back(device_summary(device.value("gpu_names", nlohmann::json())));
      parts.push_back("NCCL " + optional_string(device, "nccl_version", "?", where));
      parts.push_back("NCCL_NVLS_ENABLE=" +
                      optional_string(device, "nccl_nvls_enable", "?", where));
      parts.push_back(fmt::format("launcher {} ({:g} ranks)",
                                  optional_string(device, "launcher", "?", where),
                                  optional_number(device, "num_ranks", 0, where)));
    }
    if (!o.topology.empty()) {
      const auto links = hw::topology_links(read_input_file(o.topology), o.topology);
      metadata["topology"] = {{"file", o.topology}, {"links", links}};
      parts.push_back("topology " + join(links, ", "));
    }
    collective_source = fmt::format("collectives from {}{}", o.collectives,
                                    parts.empty() ? "" : " (" + join(parts, ", ") + ")");
  }
  if (!o.launch_probe.empty() || !o.overlap_probe.empty() || !o.host_link_probe.empty()) {
    fitting::FitReport probes;
    if (!o.launch_probe.empty()) {
      fitting::apply_launch_probe(load_json_file(o.launch_probe), o.launch_probe, profile, probes);
      metadata["launch_probe"] = o.launch_probe;
    }
    if (!o.overlap_probe.empty()) {
      fitting::apply_overlap_probe(load_json_file(o.overlap_probe), o.overlap_probe, profile,
                                   probes);
      metadata["overlap_probe"] = o.overlap_probe;
    }
    if (!o.host_link_probe.empty()) {
      if (gpu_name.empty())
        throw ConfigError("--host-link-probe: needs --gpu (the preset whose host link the "
                          "fraction is of)");
      fitting::apply_host_link_probe(load_json_file(o.host_link_probe), o.host_link_probe,
                                     hw::load_gpu(gpu_name).pcie_bandwidth_bytes_per_s, profile,
                                     probes);
      metadata["host_link_probe"] = o.host_link_probe;
    }
    lines.insert(lines.end(), probes.lines.begin(), probes.lines.end());
  }
  if (!o.notes.empty())
    metadata["notes"] = o.notes;
  if (!o.base.empty())
    metadata["base_profile"] = o.base;
  if (!gpu_name.empty())
    profile.gpu = gpu_name;
  profile.name =
      o.name.empty() ? (profile.gpu.empty() ? "calibrated" : profile.gpu + " calibrated") : o.name;
  if (kernels)
    profile.source =
        fmt::format("trainsim calibrate on {} ({}); fitted: {}", today(),
                    metadata.value("kernel_measurements", std::string("")),
                    lines.empty() ? "nothing" : lines.front() + (lines.size() > 1 ? ", ..." : ""));
  else
    profile.source = fmt::format("trainsim calibrate on {}: {}{}{}", today(), collective_source,
                                 o.notes.empty() ? "" : "; " + join(o.notes, "; "),
                                 o.base.empty() ? "" : "; other fields from " + o.base);
  if (kernels && !collective_source.empty())
    profile.source += "; " + collective_source;
  hw::validate(profile, o.out);
  nlohmann::json j = hw::profile_to_json(profile);
  // Each new collective fit carries its quality (the loader reads and ignores it).
  for (auto& fj : j["collective_fits"])
    for (const auto& [fit, quality] : qualities)
      if (fj["op"] == hw::to_string(fit.op) && fj["level"] == hw::to_string(fit.level) &&
          fj["num_ranks"] == fit.num_ranks)
        fj["quality"] = quality;
  metadata["fit"] = lines;
  j["metadata"] = metadata;
  write_output_file(o.out, "--out", j.dump(2) + "\n");
  Sink sink(o.output);
  if (sink.format() == Format::json) {
    sink.json(j);
  } else {
    sink.comment(fmt::format("wrote {} ({})", o.out, profile.name));
    if (sink.format() == Format::table) // CSV: the table alone
      for (const auto& l : lines)
        sink.write("  " + l + "\n");
  }
  return 0;
}

} // namespace

void add_calibrate(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = app.add_subcommand("calibrate", "Fit a hardware profile from kernel (and collective) "
                                              "measurements");
  cmd->add_option("--out", o->out, "Profile JSON to write")->required();
  cmd->add_option("--framework-runs", o->framework_runs,
                  "Recorded framework runs (JSON lines, docs/frameworks.md; repeatable): fit "
                  "--framework's free parameters on their fit half and write the framework "
                  "profile to --out");
  cmd->add_option("--framework", o->framework,
                  "With --framework-runs: the framework profile to start from and fit");
  cmd->add_option("--fit-only", o->fit_only,
                  "With --framework-runs: fit this one constant and keep the rest of --framework "
                  "(its residuals too): tp-overlap (tp_overlap_hidden_fraction, on the fit rows "
                  "that overlap tensor-parallel communication without context parallelism)")
      ->check(CLI::IsMember({"tp-overlap"}));
  cmd->add_option("--repeat-runs", o->repeat_runs,
                  "With --framework-runs: further passes of runs already given (same ids; "
                  "repeatable): each run's step time becomes the geometric mean of its passes");
  cmd->add_option("--from", o->from,
                  "Kernel measurements (bench kernels --format json); default: "
                  "run the calibration suite on GPU 0 now");
  cmd->add_option("--suite", o->suite, "Suite to run when measuring now")->capture_default_str();
  cmd->add_option("--gpu,-g", o->gpu, "GPU preset (default: from the measured device name)");
  cmd->add_option("--base", o->base,
                  "Profile whose fields are kept where nothing was measured "
                  "(default: the GPU's datasheet profile)");
  cmd->add_option("--name", o->name, "Profile name");
  cmd->add_option(
      "--collectives", o->collectives,
      "Collective measurements (bench collectives --format json) to fit alpha-beta regimes from");
  cmd->add_option("--launch-probe", o->launch_probe,
                  "kernels/dev/launch_probe JSON: host time per queued launch (our kernels, "
                  "cuBLAS GEMMs), used when a step's kernels are queued back to back");
  cmd->add_option("--overlap-probe", o->overlap_probe,
                  "validate/comm/overlap_probe JSON: GEMM and all-reduce throughput while "
                  "overlapped, used for data-parallel gradient sync hidden behind backward");
  cmd->add_option("--host-link-probe", o->host_link_probe,
                  "scripts/peer_offload_overlap.py JSON: pinned host <-> device copy bandwidth, "
                  "as a fraction of the GPU preset's host link (host_link_bw_fraction), used for "
                  "activation offload and ZeRO-Offload transfers");
  cmd->add_option("--level", o->level, "Level of those collectives: intra-node | inter-node")
      ->capture_default_str();
  cmd->add_option("--max-regimes", o->max_regimes,
                  "Size regimes per collective fit, 1..3 (1: one alpha-beta line)")
      ->capture_default_str();
  cmd->add_option("--topology", o->topology,
                  "`nvidia-smi topo -m` output of the measured machine, recorded in the profile");
  cmd->add_option("--note", o->notes,
                  "Free text recorded in the profile's source and metadata (repeatable)");
  add_output_options(*cmd, o->output);
  cmd->footer("Examples:\n  trainsim calibrate --out h200.json                  # measure on this "
              "GPU, fit\n"
              "  trainsim calibrate --from validate/results/fixtures/h200-calibration.json --out "
              "h200.json\n"
              "  trainsim calibrate --collectives collectives.json --base h200 --topology topo.txt "
              "--out h200-x2.json");
  cmd->callback([o] { run_calibrate(*o); });
}

} // namespace trainsim::cli
