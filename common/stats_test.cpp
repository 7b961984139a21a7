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
