// Summary statistics (stats.hpp): hand-computed figures.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "common/stats.hpp"

using namespace trainsim;

TEST_CASE("median: middle value, mean of the two middle values, NaN when empty") {
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 3, 2}) == 2.5); // (2 + 3) / 2
  CHECK(median({7}) == 7);
  CHECK(median({5, 5, 1, 9}) == 5);
  CHECK(std::isnan(median({})));
  const std::vector<double> v{9, 8, 7};
  CHECK(median(v) == 8);
  CHECK(v == std::vector<double>{9, 8, 7}); // the argument is not reordered
}

TEST_CASE("mean and sample standard deviation (n - 1)") {
  // 2, 4, 4, 4, 5, 5, 7, 9: mean 40 / 8 = 5; squared deviations sum to 32; 32 / 7.
  const std::vector<double> v{2, 4, 4, 4, 5, 5, 7, 9};
  CHECK(mean(v) == 5);
  CHECK(sample_stdev(v) == doctest::Approx(std::sqrt(32.0 / 7)).epsilon(1e-15));
  CHECK(sample_stdev(v, 5) == doctest::Approx(std::sqrt(32.0 / 7)).epsilon(1e-15));
  CHECK(std::isnan(mean({})));
  CHECK(sample_stdev({3}) == 0);
  CHECK(sample_stdev({}) == 0);
}

TEST_CASE("summarize: parts of one timing, zeros when empty") {
  const SampleSummary s = summarize({3e-6, 1e-6, 2e-6, 6e-6});
  CHECK(s.num_samples == 4);
  CHECK(s.min == 1e-6);
  CHECK(s.max == 6e-6);
  CHECK(s.median == doctest::Approx(2.5e-6).epsilon(1e-12)); // (2 + 3) / 2 us
  CHECK(s.mean == doctest::Approx(3e-6).epsilon(1e-12));     // 12 / 4 us
  // Deviations -2, 0, -1, 3 us: 14 / 3 us^2.
  CHECK(s.stdev == doctest::Approx(std::sqrt(14.0 / 3) * 1e-6).epsilon(1e-12));
  const SampleSummary none = summarize({});
  CHECK(none.num_samples == 0);
  CHECK(none.median == 0);
  CHECK(none.mean == 0);
}

TEST_CASE("Student's t: CDF and quantiles against tabulated values") {
  // Tabulated quantiles (any statistics table; dof 1 is the Cauchy: tan(pi (p - 1/2))).
  CHECK(student_t_quantile(0.975, 10) == doctest::Approx(2.228139).epsilon(1e-5));
  CHECK(student_t_quantile(0.95, 5) == doctest::Approx(2.015048).epsilon(1e-5));
  CHECK(student_t_quantile(0.975, 13) == doctest::Approx(2.160369).epsilon(1e-5));
  CHECK(student_t_quantile(0.9, 30) == doctest::Approx(1.310415).epsilon(1e-5));
  CHECK(student_t_quantile(0.975, 1) == doctest::Approx(12.706205).epsilon(1e-5));
  CHECK(student_t_cdf(0, 7) == doctest::Approx(0.5));
  CHECK(student_t_cdf(-2.228139, 10) == doctest::Approx(0.025).epsilon(1e-4));
  CHECK(std::isnan(student_t_quantile(0.3, 5)));
  CHECK(std::isnan(student_t_quantile(0.9, 0)));
  // The band: k sigma for a known sigma, wider with few residuals, k when dof is unknown.
  CHECK(t_band_sigmas(1, 1e6) == doctest::Approx(1).epsilon(1e-3));
  CHECK(t_band_sigmas(2, 1e6) == doctest::Approx(2).epsilon(1e-3));
  CHECK(t_band_sigmas(2, 13) > 2.15);
  CHECK(t_band_sigmas(1, 13) > 1.03);
  CHECK(t_band_sigmas(2, 0) == 2);
}
