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

/// Standard normal CDF.
[[nodiscard]] inline double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

/// Density of Student's t distribution with `dof` > 0 degrees of freedom.
[[nodiscard]] inline double student_t_pdf(double t, double dof) {
  const double c = std::exp(std::lgamma((dof + 1) / 2) - std::lgamma(dof / 2)) /
                   std::sqrt(dof * 3.14159265358979323846);
  return c * std::pow(1 + t * t / dof, -(dof + 1) / 2);
}

/// CDF of Student's t distribution with `dof` > 0 degrees of freedom, by Simpson's rule over its
/// density from 0 to |x| (the density is smooth; 2000 panels put the error far below 1e-9 for
/// |x| < 50).
[[nodiscard]] inline double student_t_cdf(double x, double dof) {
  const double a = std::min(std::abs(x), 50.0);
  const int n = 2000; // even
  const double h = a / n;
  double s = student_t_pdf(0, dof) + student_t_pdf(a, dof);
  for (int i = 1; i < n; ++i)
    s += (i % 2 ? 4 : 2) * student_t_pdf(i * h, dof);
  const double half = s * h / 3;
  return x >= 0 ? 0.5 + half : 0.5 - half;
}

/// Quantile of Student's t with `dof` > 0 degrees of freedom at probability 0.5 <= p < 1;
/// NaN outside that range. Newton's method from 0: the CDF is concave above 0, so the steps
/// approach the root from below without overshooting.
[[nodiscard]] inline double student_t_quantile(double p, double dof) {
  if (!(p >= 0.5 && p < 1) || !(dof > 0))
    return std::numeric_limits<double>::quiet_NaN();
  double x = 0;
  for (int i = 0; i < 200; ++i) {
    const double step = (p - student_t_cdf(x, dof)) / student_t_pdf(x, dof);
    x = std::min(x + step, 50.0);
    if (std::abs(step) < 1e-10 * std::max(1.0, x))
      break;
  }
  return x;
}

/// Half-width, in units of a residual sigma estimated from `dof` degrees of freedom, of the
/// prediction interval that a k-sigma band would be for a known sigma: the Student-t quantile
/// at the normal's coverage (k = 1: 68.3%, k = 2: 95.4%). With few residuals the sigma itself
/// is uncertain and the interval widens (dof 13: 1.04 and 2.21 for k = 1 and 2); dof <= 0
/// (unknown): k.
[[nodiscard]] inline double t_band_sigmas(double k, double dof) {
  return dof > 0 ? student_t_quantile(normal_cdf(k), dof) : k;
}

} // namespace trainsim
