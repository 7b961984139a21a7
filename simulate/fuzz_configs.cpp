// libFuzzer target for the configuration files a user hands to trainsim beside model and
// hardware presets: framework profiles (`--framework FILE`) and DeepSpeed configs
// (`memory --deepspeed FILE`). Any input
// must load into a valid object or throw ConfigError; a crash, another exception or a
// sanitizer report is a bug, and so is a loaded profile that fails its own validation or a
// DeepSpeed batch that breaks DeepSpeed's rule. Built with -DTRAINSIM_FUZZ=ON (clang);
// docs/model.md, "Fuzzing the input parsers", says how to run it.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/errors.hpp"
#include "common/fuzz_input.hpp"
#include "simulate/deepspeed.hpp"
#include "simulate/framework.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parsed = trainsim::testing::fuzz_json(data, size);
  if (!parsed)
    return 0;
  const nlohmann::json& j = *parsed;
  std::optional<trainsim::sim::FrameworkProfile> f;
  try {
    f = trainsim::sim::framework_from_json(j, "fuzz.json");
  } catch (const trainsim::ConfigError&) {
  }
  if (f) {
    try {
      trainsim::sim::validate(*f, "fuzz.json"); // what loads is valid
    } catch (const trainsim::ConfigError&) {
      __builtin_trap();
    }
  }
  try {
    const auto c = trainsim::sim::deepspeed_config_from_json(j, "fuzz.json");
    for (std::int64_t dp : {1, 3, 8}) {
      try {
        const auto b = trainsim::sim::deepspeed_batch(c, dp, "fuzz.json");
        if (b.micro > 0 && b.train != b.micro * b.grad_acc * dp)
          __builtin_trap();
      } catch (const trainsim::ConfigError&) {
      }
    }
  } catch (const trainsim::ConfigError&) {
  }
  return 0;
}
