// Summary statistics of measured samples (kernel, collective and step timings): median, mean,
// sample standard deviation, min. One definition for every benchmark, fit and report; nvbench
// reports the same figures. Header-only and C++17 so CUDA translation units can include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace trainsim {

/// Median of `v`: the middle value, or the mean of the two middle values for an even count.
/// NaN for an empty list.
[[nodiscard]] inline double median(std::vector<double> v) {
  if (v.empty())
    return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Arithmetic mean; NaN for an empty list.
[[nodiscard]] inline double mean(const std::vector<double>& v) {
  if (v.empty())
    return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

/// Sample standard deviation around `mean_value` (Bessel's n - 1); 0 for fewer than 2 samples.
[[nodiscard]] inline double sample_stdev(const std::vector<double>& v, double mean_value) {
  if (v.size() < 2)
    return 0.0;
  double var = 0;
  for (double x : v)
    var += (x - mean_value) * (x - mean_value);
  return std::sqrt(var / static_cast<double>(v.size() - 1));
}

/// Sample standard deviation (Bessel's n - 1); 0 for fewer than 2 samples.
[[nodiscard]] inline double sample_stdev(const std::vector<double>& v) {
  return v.size() < 2 ? 0.0 : sample_stdev(v, mean(v));
}

/// The figures a timing reports: median, min, mean, stdev and count, never one best time
/// (the protocol at the top of docs/kernels.md).
struct SampleSummary {
  std::int64_t num_samples = 0;
  double median = 0, min = 0, max = 0, mean = 0, stdev = 0; // in the samples' unit
};

/// Summary of `v`; all figures 0 for an empty list.
[[nodiscard]] inline SampleSummary summarize(const std::vector<double>& v) {
  SampleSummary s;
  s.num_samples = static_cast<std::int64_t>(v.size());
  if (v.empty())
    return s;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.min = *lo;
  s.max = *hi;
  s.median = median(v);
  s.mean = mean(v);
  s.stdev = sample_stdev(v, s.mean);
  return s;
}

} // namespace trainsim
