// Numeric formats trainsim knows: element sizes and names. Peaks per format live in GpuSpec.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace trainsim {

enum class Dtype { fp32 = 0, tf32, fp16, bf16, fp8 };
inline constexpr std::size_t kNumDtypes = 5;
inline constexpr std::array<Dtype, kNumDtypes> kAllDtypes = {Dtype::fp32, Dtype::tf32, Dtype::fp16,
                                                             Dtype::bf16, Dtype::fp8};

/// Bytes per element in memory (tf32 is stored as fp32).
[[nodiscard]] constexpr double dtype_bytes(Dtype d) {
  switch (d) {
  case Dtype::fp32: return 4;
  case Dtype::tf32: return 4;
  case Dtype::fp16: return 2;
  case Dtype::bf16: return 2;
  case Dtype::fp8: return 1;
  }
  return 4;
}

[[nodiscard]] constexpr std::string_view dtype_name(Dtype d) {
  switch (d) {
  case Dtype::fp32: return "fp32";
  case Dtype::tf32: return "tf32";
  case Dtype::fp16: return "fp16";
  case Dtype::bf16: return "bf16";
  case Dtype::fp8: return "fp8";
  }
  return "fp32";
}

[[nodiscard]] inline std::optional<Dtype> parse_dtype(std::string_view s) {
  for (Dtype d : kAllDtypes)
    if (dtype_name(d) == s)
      return d;
  return std::nullopt;
}

/// A value per dtype, indexed by Dtype.
template <class T> struct PerDtype {
  std::array<T, kNumDtypes> values{};
  [[nodiscard]] T& operator[](Dtype d) { return values[static_cast<std::size_t>(d)]; }
  [[nodiscard]] const T& operator[](Dtype d) const { return values[static_cast<std::size_t>(d)]; }
};

} // namespace trainsim
