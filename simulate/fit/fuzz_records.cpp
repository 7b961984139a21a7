// libFuzzer target for the recorded measurements a user hands to `trainsim compare` and
// `trainsim calibrate`: a training run's record (one line of `--framework-runs`, or the
// configuration of a `--kernel-profiles` file), the input whole as a runs file (JSON lines:
// repeated ids, a bad line among good ones), a `bench kernels` document (`--measurements`),
// a `bench collectives` document (`--collectives`) and the launch, overlap and host-link probes.
// Any input must be read or refused with ConfigError; a crash, another exception or a sanitizer
// report is a bug, and so is a run's predicted step time, tokens/s or peak that comes out
// non-finite or negative, a kernel's predicted time likewise, a refusal of a kernel document
// that does not name its file, or a fit or probe that leaves the hardware profile failing its
// own validation (every collective series read is fitted and its quality written). The names a
// record gives (framework, model, gpu, cluster) are data, never paths: one read with a '/' in
// it is a bug (the reader must refuse it before anything opens it). Built with
// -DTRAINSIM_FUZZ=ON (clang); docs/model.md, "Fuzzing the input parsers", says how to run it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/errors.hpp"
#include "common/fuzz_input.hpp"
#include "hardware/load.hpp"
#include "simulate/fit/collective_fit.hpp"
#include "simulate/fit/framework_fit.hpp"
#include "simulate/fit/kernel_fit.hpp"
#include "simulate/framework.hpp"

namespace {

bool bad(double v) { return !std::isfinite(v) || v < 0; }

bool path_like(const std::string& s) {
  return s.find('/') != std::string::npos || s.ends_with(".json");
}

void predict(const trainsim::fitting::FrameworkRun& run) {
  using namespace trainsim;
  if (path_like(run.framework) || path_like(run.model_name))
    __builtin_trap(); // a name read as data that could open a file
  if (!run.skip_reason.empty())
    return;
  try {
    const sim::FrameworkProfile fw = sim::load_framework(run.framework);
    const fitting::RunPrediction p = fitting::predict_run(run, fw);
    if (bad(p.step_time_s) || p.step_time_s == 0 || bad(p.tokens_per_s_per_gpu) ||
        bad(p.peak_allocated_bytes) || bad(p.peak_reserved_bytes))
      __builtin_trap();
    const double e = fitting::time_error(run, p);
    if (std::isinf(e))
      __builtin_trap();
  } catch (const ConfigError&) {
  }
}

void run_record(const nlohmann::json& j) {
  using namespace trainsim;
  try {
    predict(fitting::parse_framework_run(j, "fuzz.json"));
  } catch (const ConfigError&) {
  }
}

// The input as a runs file: read whole or refused (a line naming its file and line), and each
// run read predicted (the first few: a prediction plays the allocator).
void runs_file(std::string_view text) {
  using namespace trainsim;
  std::vector<fitting::FrameworkRun> runs;
  try {
    runs = fitting::read_framework_runs_text(text, "fuzz.jsonl");
  } catch (const ConfigError& e) {
    if (std::string_view(e.what()).find("fuzz.jsonl") == std::string_view::npos)
      __builtin_trap(); // every refusal names its source
    return;
  }
  for (std::size_t i = 0; i < runs.size() && i < 4; ++i)
    predict(runs[i]);
}

void kernel_document(const nlohmann::json& j, const trainsim::hw::GpuSpec& gpu,
                     const trainsim::hw::HardwareProfile& base) {
  using namespace trainsim;
  try {
    const fitting::MeasurementSet ms = fitting::read_measurements(j, "fuzz.json");
    for (const auto& m : ms.items)
      if (bad(fitting::predict_kernel_s(m.shape, gpu, base)))
        __builtin_trap();
    if (ms.items.size() > 64) // calibrate's fit, on documents of a bench's size
      return;
    fitting::FitReport report;
    const hw::HardwareProfile fitted = fitting::fit_profile(ms, gpu, base, report);
    try {
      hw::validate(fitted, "fuzz.json");
    } catch (const ConfigError&) {
      __builtin_trap(); // measurements that were read fitted a profile that is not valid
    }
  } catch (const ConfigError& e) {
    if (std::string_view(e.what()).find("fuzz.json") == std::string_view::npos)
      __builtin_trap(); // every refusal names its source
  }
}

void collective_document(const nlohmann::json& j) {
  using namespace trainsim;
  try {
    for (const auto& series : fitting::read_collective_series(j, "fuzz.json", "intra-node")) {
      const fitting::CollectiveFitResult r = fitting::fit_collective(series);
      (void)fitting::to_json(r.quality);
    }
  } catch (const ConfigError&) {
  }
}

void probes(const nlohmann::json& j, const trainsim::hw::GpuSpec& gpu,
            const trainsim::hw::HardwareProfile& base) {
  using namespace trainsim;
  fitting::FitReport report;
  auto check = [](const hw::HardwareProfile& p) {
    try {
      hw::validate(p, "fuzz.json");
    } catch (const ConfigError&) {
      __builtin_trap(); // a probe that was read left a profile that is not valid
    }
  };
  try {
    hw::HardwareProfile p = base;
    fitting::apply_launch_probe(j, "fuzz.json", p, report);
    check(p);
  } catch (const ConfigError&) {
  }
  try {
    hw::HardwareProfile p = base;
    fitting::apply_overlap_probe(j, "fuzz.json", p, report);
    check(p);
  } catch (const ConfigError&) {
  }
  try {
    hw::HardwareProfile p = base;
    fitting::apply_host_link_probe(j, "fuzz.json", gpu.pcie_bandwidth_bytes_per_s, p, report);
    check(p);
  } catch (const ConfigError&) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  static const hw::GpuSpec gpu = hw::load_gpu("h200");
  static const hw::HardwareProfile base = hw::load_profile("h200");
  runs_file(std::string_view(reinterpret_cast<const char*>(data), size));
  const auto parsed = testing::fuzz_json(data, size);
  if (!parsed)
    return 0;
  const nlohmann::json& j = *parsed;
  run_record(j);
  kernel_document(j, gpu, base);
  collective_document(j);
  probes(j, gpu, base);
  return 0;
}
