// libFuzzer target for the allocator-trace reader (simulate/allocator.hpp): any input must
// replay or throw ConfigError; a crash, another exception, a sanitizer report or a replay whose
// reserved bytes fall below its allocated bytes is a bug. Built with -DTRAINSIM_FUZZ=ON (clang);
// docs/model.md, "Fuzzing the input parsers".
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/errors.hpp"
#include "simulate/allocator.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    // Without a cap, under one, and under one with the cache emptied at the first step's start.
    for (const std::int64_t cap : {std::int64_t{0}, std::int64_t{24} << 20})
      for (const bool empty_cache : {false, true}) {
        if (cap == 0 && empty_cache)
          continue;
        const auto r =
            trainsim::sim::replay_allocator_trace_text(text, "fuzz.trace", cap, empty_cache);
        if (r.model_peak_reserved_bytes < r.model_peak_allocated_bytes)
          __builtin_trap();
      }
  } catch (const trainsim::ConfigError&) {
  }
  return 0;
}
