// Test support: random JSON values and one-key mutations of a JSON object, for the tests that
// feed mutated presets and configs to a loader (each loader must load a valid object or throw
// ConfigError naming the field). Header-only; used by tests, not by the tool.
#pragma once

#include <cmath>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace trainsim::testing {

/// One of: a negative integer, a fraction, a power of two from 2^-100 to 2^99, a string, null,
/// an array, an object, a boolean; or one of `extras` (values a given loader should meet).
inline nlohmann::json random_json_value(std::mt19937_64& rng,
                                        const std::vector<nlohmann::json>& extras = {}) {
  const auto pick = rng() % (8 + extras.size());
  switch (pick) {
  case 0: return -static_cast<std::int64_t>(rng() % 1000);
  case 1: return static_cast<double>(rng() % 100000) / 7.0;
  case 2: return std::ldexp(1.0, static_cast<int>(rng() % 200) - 100);
  case 3: return "x";
  case 4: return nullptr;
  case 5: return nlohmann::json::array({1, 2});
  case 6: return nlohmann::json::object({{"a", 1}});
  case 7: return rng() % 2 == 0;
  default: return extras[pick - 8];
  }
}

/// Removes a key of `j`, replaces its value with a random one, or adds an unknown key
/// (a non-object or empty `j` is left alone).
inline void mutate_json_object(nlohmann::json& j, std::mt19937_64& rng,
                               const std::vector<nlohmann::json>& extras = {}) {
  if (!j.is_object() || j.empty())
    return;
  auto it = j.begin();
  std::advance(it, static_cast<long>(rng() % j.size()));
  switch (rng() % 3) {
  case 0: j.erase(it.key()); break;
  case 1: j[it.key()] = random_json_value(rng, extras); break;
  default: j["unknown_" + std::to_string(rng() % 3)] = random_json_value(rng, extras); break;
  }
}

} // namespace trainsim::testing
