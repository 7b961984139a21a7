// Parsing and formatting of sizes, counts and durations (see units.hpp).
#include "common/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "common/errors.hpp"

namespace trainsim {
namespace {

double parse_with_suffix(std::string_view text, std::string_view field, bool binary) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.pop_back();
  std::size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start])))
    ++start;
  s = s.substr(start);
  if (s.empty())
    throw ConfigError(fmt::format("{}: empty value: expected a number", field));
  double scale = 1.0;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
  // 'B' is a byte marker for sizes ("25MB" is accepted as 25M) and billion for counts.
  if (binary && last == 'B' && s.size() > 1 &&
      std::isalpha(static_cast<unsigned char>(s[s.size() - 2]))) {
    s.pop_back();
    if (s.size() > 1 && std::toupper(static_cast<unsigned char>(s.back())) == 'I')
      s.pop_back();
    last = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
  }
  const double k = binary ? 1024.0 : 1000.0;
  switch (last) {
  case 'K': scale = k; break;
  case 'M': scale = k * k; break;
  case 'G': scale = k * k * k; break;
  case 'B': scale = binary ? 1.0 : 1e9; break;
  case 'T': scale = k * k * k * k; break;
  default: break;
  }
  if (scale != 1.0 || last == 'B')
    s.pop_back();
  double value = 0;
  const char* first = s.data();
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(first, end, value);
  if (ec != std::errc() || ptr != end || s.empty()) {
    throw ConfigError(fmt::format("{} = '{}': not a number (expected e.g. {})", field, text,
                                  binary ? "4096, 64K, 25M, 1G (binary multiples)"
                                         : "70e9, 1.5M, 70B, 15T (decimal)"));
  }
  value *= scale;
  if (!std::isfinite(value))
    throw ConfigError(fmt::format("{} = '{}': not finite", field, text));
  if (value < 0)
    throw ConfigError(fmt::format("{} = '{}': must not be negative", field, text));
  return value;
}

} // namespace

double parse_bytes(std::string_view text, std::string_view field) {
  return parse_with_suffix(text, field, true);
}

double parse_count(std::string_view text, std::string_view field) {
  return parse_with_suffix(text, field, false);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int i = 0;
  double v = bytes;
  while (std::fabs(v) >= 1000.0 && i < 5) {
    v /= 1000.0;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f} B", v) : fmt::format("{:.2f} {}", v, units[i]);
}

std::string format_bytes_binary(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024.0 && i < 4) {
    v /= 1024.0;
    ++i;
  }
  if (v == std::floor(v))
    return fmt::format("{:.0f} {}", v, units[i]);
  return fmt::format("{:.3g} {}", v, units[i]);
}

std::string format_count(double count) {
  const char* units[] = {"", " K", " M", " B", " T"};
  int i = 0;
  double v = count;
  while (std::fabs(v) >= 1000.0 && i < 4) {
    v /= 1000.0;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}{}", v, units[i]);
}

std::string format_seconds(double s) {
  if (s < 1e-3)
    return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1.0)
    return fmt::format("{:.2f} ms", s * 1e3);
  if (s < 120.0)
    return fmt::format("{:.2f} s", s);
  if (s < 7200.0)
    return fmt::format("{:.1f} min", s / 60.0);
  if (s < 2 * kSecondsPerDay)
    return fmt::format("{:.1f} h", s / 3600.0);
  return fmt::format("{:.1f} days", s / kSecondsPerDay);
}

} // namespace trainsim
