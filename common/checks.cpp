// Interval checks with one message form (checks.hpp).
#include "common/checks.hpp"

#include <cmath>
#include <fmt/format.h>

namespace trainsim {

std::string range_message(std::string_view field, double value, const Interval& r) {
  const std::string unit = r.unit.empty() ? "" : fmt::format(" {}", r.unit);
  const char* finite = std::isfinite(value) ? "" : "a finite number ";
  return fmt::format("{} = {}: must be {}{}in [{:g}, {:g}]{}", field, value,
                     r.zero_ok ? "0 or " : "", finite, r.lo, r.hi, unit);
}

bool check_range(Problems& problems, std::string_view field, double value, const Interval& r) {
  if (r.contains(value))
    return true;
  problems.add(range_message(field, value, r));
  return false;
}

double require_range(std::string_view flag, double value, const Interval& r) {
  if (!r.contains(value))
    throw ConfigError(range_message(flag, value, r));
  return value;
}

std::int64_t require_range(std::string_view flag, std::int64_t value, std::int64_t lo,
                           std::int64_t hi, std::string_view unit) {
  if (value < lo || value > hi)
    throw ConfigError(fmt::format("{} = {}: must be in {}..{}{}{}", flag, value, lo, hi,
                                  unit.empty() ? "" : " ", unit));
  return value;
}

} // namespace trainsim
