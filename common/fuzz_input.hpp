// Fuzz-target support: a libFuzzer input as JSON text, parsed as the tool parses a file. Inputs
// that are not JSON are refused by the parser (ConfigError) and are not what the targets after
// it test. Header-only; used by the libFuzzer targets, not by the tool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "common/errors.hpp"
#include "common/json_io.hpp"

namespace trainsim::testing {

/// The input parsed under the name "fuzz.json", or nothing when it is not JSON.
inline std::optional<nlohmann::json> fuzz_json(const std::uint8_t* data, std::size_t size) {
  try {
    return parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size),
                           "fuzz.json");
  } catch (const ConfigError&) {
    return std::nullopt;
  }
}

} // namespace trainsim::testing
