// libFuzzer target for everything that parses user input: JSON text -> project model preset or
// Hugging Face config.json, GPU, cluster and hardware-profile presets. Any input must either
// load into a valid spec or throw ConfigError; anything else (crash, other exception, sanitizer
// report) is a bug. Built with -DTRAINSIM_FUZZ=ON (clang); see docs/model.md for how to run it.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/errors.hpp"
#include "common/fuzz_input.hpp"
#include "hardware/load.hpp"
#include "model/count.hpp"
#include "model/load.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parsed = trainsim::testing::fuzz_json(data, size);
  if (!parsed)
    return 0;
  const nlohmann::json& j = *parsed;
  try {
    const auto m = trainsim::model::model_from_json(j, "fuzz.json");
    const auto c = trainsim::model::count_params(m);
    if (!std::isfinite(c.total) || c.total <= 0)
      __builtin_trap();
  } catch (const trainsim::ConfigError&) {
  }
  try {
    (void)trainsim::hw::gpu_from_json(j, "fuzz.json");
  } catch (const trainsim::ConfigError&) {
  }
  try {
    (void)trainsim::hw::cluster_from_json(j, "fuzz.json");
  } catch (const trainsim::ConfigError&) {
  }
  try {
    (void)trainsim::hw::profile_from_json(j, "fuzz.json");
  } catch (const trainsim::ConfigError&) {
  }
  return 0;
}
