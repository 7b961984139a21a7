// `trainsim calibrate`: fit a hardware profile from kernel measurements (run now on the local
// GPU, or read from a `bench kernels --format json` file) and from collective measurements
// (`bench collectives --format json`), and write it as a profile JSON.
#include <chrono>
#include <ctime>
#include <fmt/format.h>
#include <fstream>

#include "cli/commands.hpp"
#include "cli/measure.hpp"
#include "cli/output.hpp"
#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "hardware/load.hpp"
#include "validate/bench/bench.hpp"
#include "validate/calibrate/calibrate.hpp"
#include "validate/comm/fit.hpp"

namespace trainsim::cli {
namespace {

struct CalibrateOptions {
  std::string out;
  std::string from;
  std::string gpu;
  std::string base;
  std::string name;
  std::string collectives;
  std::string launch_probe, overlap_probe;
  std::string level = "intra-node";
  std::string suite = "calibration";
  OutputOptions output;
};

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

val::MeasurementSet measurements_from(const std::string& file, const std::string& suite) {
  if (!file.empty())
    return val::load_measurements(file);
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
  val::MeasurementSet ms;
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
    val::FitReport report;
    profile = val::fit_profile(ms, gpu, base, report);
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
  if (!o.collectives.empty()) {
    const auto fits = val::fit_collectives_file(o.collectives, o.level);
    profile.collective_fits.erase(
        std::remove_if(profile.collective_fits.begin(), profile.collective_fits.end(),
                       [&](const hw::CollectiveFit& f) { return f.level == o.level; }),
        profile.collective_fits.end());
    for (const auto& f : fits) {
      // P = 1 fits describe a local copy, not communication: keep them out of the model.
      if (f.fit.num_ranks < 2) {
        lines.push_back(fmt::format("{} at P = 1 skipped (no communication)", f.fit.op));
        continue;
      }
      profile.collective_fits.push_back(f.fit);
      lines.push_back(fmt::format("{} {} P={}: alpha {:.2f} us, busbw {:.1f} GB/s (max error above "
                                  "1 MiB {:.1f}%, below 64 KiB {:.1f}%)",
                                  f.fit.op, f.fit.level, f.fit.num_ranks, f.fit.alpha_s * 1e6,
                                  f.fit.busbw_bytes_per_s / 1e9,
                                  100 * f.quality.max_rel_error_large_fraction,
                                  100 * f.quality.max_rel_error_small_fraction));
    }
    metadata["collective_measurements"] = o.collectives;
  }
  if (!o.launch_probe.empty() || !o.overlap_probe.empty()) {
    val::FitReport probes;
    if (!o.launch_probe.empty()) {
      val::apply_launch_probe(load_json_file(o.launch_probe), o.launch_probe, profile, probes);
      metadata["launch_probe"] = o.launch_probe;
    }
    if (!o.overlap_probe.empty()) {
      val::apply_overlap_probe(load_json_file(o.overlap_probe), o.overlap_probe, profile, probes);
      metadata["overlap_probe"] = o.overlap_probe;
    }
    lines.insert(lines.end(), probes.lines.begin(), probes.lines.end());
  }
  if (!gpu_name.empty())
    profile.gpu = gpu_name;
  profile.name =
      o.name.empty() ? (profile.gpu.empty() ? "calibrated" : profile.gpu + " calibrated") : o.name;
  profile.source =
      fmt::format("trainsim calibrate on {} ({}); fitted: {}", today(),
                  metadata.value("kernel_measurements", std::string("collectives only")),
                  lines.empty() ? "nothing" : lines.front() + (lines.size() > 1 ? ", ..." : ""));
  hw::validate(profile, o.out);
  nlohmann::json j = hw::profile_to_json(profile);
  metadata["fit"] = lines;
  j["metadata"] = metadata;
  std::ofstream f(o.out);
  if (!f)
    throw ConfigError(fmt::format("--out {}: cannot open for writing", o.out));
  f << j.dump(2) << "\n";
  Sink sink(o.output);
  if (sink.format() == Format::json) {
    sink.json(j);
  } else {
    sink.comment(fmt::format("wrote {} ({})", o.out, profile.name));
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
      "Collective measurements (bench collectives --format json) to fit alpha-beta from");
  cmd->add_option("--launch-probe", o->launch_probe,
                  "kernels/dev/launch_probe JSON: host time per queued launch (our kernels, "
                  "cuBLAS GEMMs), used when a step's kernels are queued back to back");
  cmd->add_option("--overlap-probe", o->overlap_probe,
                  "validate/comm/overlap_probe JSON: GEMM and all-reduce throughput while "
                  "overlapped, used for data-parallel gradient sync hidden behind backward");
  cmd->add_option("--level", o->level, "Level of those collectives: intra-node | inter-node")
      ->capture_default_str();
  add_output_options(*cmd, o->output);
  cmd->footer("Examples:\n  trainsim calibrate --out h200.json                  # measure on this "
              "GPU, fit\n"
              "  trainsim calibrate --from validate/results/h200-calibration.json --out h200.json");
  cmd->callback([o] { run_calibrate(*o); });
}

} // namespace trainsim::cli
