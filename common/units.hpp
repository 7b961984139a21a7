// Unit helpers: parsing sizes and counts from the command line, and scaling for printing.
// Inside the core every quantity is a double in base units (bytes, flops, seconds).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace trainsim {

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;
inline constexpr double kTB = 1e12;
inline constexpr double kTera = 1e12;
inline constexpr double kSecondsPerDay = 86400.0;

/// Parses a byte size: "4096", "1K", "25M", "1G", "2T" (binary: K = 1024), "1.5G", "1e9".
/// Throws ConfigError naming `field` on a malformed, negative or non-finite value.
[[nodiscard]] double parse_bytes(std::string_view text, std::string_view field);

/// Parses a count: "300e9", "15T", "70B", "1.5M", "8K" (decimal: K = 1e3, M = 1e6, B/G = 1e9,
/// T = 1e12). Throws ConfigError naming `field` on a malformed, negative or non-finite value.
[[nodiscard]] double parse_count(std::string_view text, std::string_view field);

/// "1.23 GB" style with decimal prefixes (B, KB, MB, GB, TB).
[[nodiscard]] std::string format_bytes(double bytes);
/// Message sizes with binary prefixes, as nccl-tests sweeps them: "8 B", "64 KiB", "1.41 MiB",
/// "4 GiB" (whole numbers print without decimals).
[[nodiscard]] std::string format_bytes_binary(double bytes);
/// "7.00 B" / "124.4 M" style for counts (K, M, B, T).
[[nodiscard]] std::string format_count(double count);
/// A duration with a unit chosen for readability (us, ms, s, min, h, days).
[[nodiscard]] std::string format_seconds(double seconds);

} // namespace trainsim
