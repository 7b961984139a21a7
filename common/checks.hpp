// Range checks for numbers at the edge (preset fields and command-line flags): one rule
// form, "field = value: must be in [lo, hi] unit", so NaN and infinities fail every check and
// every message names the field, the value and the rule.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/errors.hpp"

namespace trainsim {

/// A closed interval of allowed values; zero_ok also allows exactly 0 ("not present").
struct Interval {
  double lo = 0, hi = 0;
  std::string_view unit; // printed after the interval, e.g. "MiB"
  bool zero_ok = false;
  [[nodiscard]] bool contains(double v) const {
    return (v >= lo && v <= hi) || (zero_ok && v == 0);
  }
};

/// "field = value: must be in [lo, hi] unit" (or "must be 0 or in ...").
[[nodiscard]] std::string range_message(std::string_view field, double value, const Interval& r);

/// Adds range_message to `problems` unless r.contains(value); returns whether it did not.
bool check_range(Problems& problems, std::string_view field, double value, const Interval& r);

/// Throws ConfigError with range_message unless r.contains(value); returns value.
double require_range(std::string_view flag, double value, const Interval& r);
/// Integer form: "flag = value: must be in lo..hi unit".
std::int64_t require_range(std::string_view flag, std::int64_t value, std::int64_t lo,
                           std::int64_t hi, std::string_view unit = {});

} // namespace trainsim
