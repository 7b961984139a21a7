// Tests for the alpha-beta collective fit and the pure helpers of the collective benchmarks:
// busbw factors, size sweeps, op lists, recovery of known alpha/busbw from noisy synthetic data.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "common/errors.hpp"
#include "validate/comm/collectives.hpp"
#include "validate/comm/fit.hpp"

using namespace trainsim;
using namespace trainsim::val;

namespace {

// Synthetic series: t = alpha + bytes * factor(P) / busbw, times (1 + noise), 8 B .. 1 GiB.
CollectiveSeries synthetic(const std::string& op, std::int64_t num_ranks, double alpha_s,
                           double busbw_bytes_per_s, double noise_fraction, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, noise_fraction);
  double factor = busbw_factor(op, num_ranks);
  if (factor == 0)
    factor = 1;
  CollectiveSeries s{op, "intra-node", num_ranks, {}};
  for (double bytes = 8; bytes <= 1024.0 * 1024 * 1024; bytes *= 2) {
    const double t = alpha_s + bytes * factor / busbw_bytes_per_s;
    s.points.push_back({bytes, t * (1 + noise(rng))});
  }
  return s;
}

} // namespace

TEST_CASE("busbw factors follow nccl-tests") {
  // all-reduce at 8 ranks: 2 * 7 / 8 = 1.75; all-gather at 4 ranks: 3 / 4 = 0.75.
  CHECK(busbw_factor(CollectiveOp::all_reduce, 8) == doctest::Approx(1.75).epsilon(1e-12));
  CHECK(busbw_factor(CollectiveOp::all_gather, 4) == doctest::Approx(0.75).epsilon(1e-12));
  CHECK(busbw_factor(CollectiveOp::reduce_scatter, 2) == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(busbw_factor(CollectiveOp::all_to_all, 8) == doctest::Approx(0.875).epsilon(1e-12));
  CHECK(busbw_factor(CollectiveOp::broadcast, 8) == 1.0);
  CHECK(busbw_factor(CollectiveOp::send_recv, 2) == 1.0);
  CHECK(busbw_factor(CollectiveOp::all_reduce, 1) == 0.0); // P = 1: nothing crosses a link
  CHECK_THROWS_AS((void)busbw_factor("allreduce", 2), ConfigError);
}

TEST_CASE("op lists, counts and size sweeps") {
  CHECK(parse_collective_list("all", "ops").size() == 6);
  auto ops = parse_collective_list("all-reduce,send-recv", "ops");
  REQUIRE(ops.size() == 2);
  CHECK(ops[1] == CollectiveOp::send_recv);
  CHECK_THROWS_WITH_AS((void)parse_collective_list("all-reduce,allgather", "--ops"),
                       doctest::Contains("--ops"), ConfigError);
  // 8 B .. 1 GiB by 2: 2^3 .. 2^30 = 28 sizes.
  auto sizes = size_sweep(8, 1024.0 * 1024 * 1024, 2);
  CHECK(sizes.size() == 28);
  CHECK(sizes.back() == 1024.0 * 1024 * 1024);
  CHECK_THROWS_WITH_AS((void)size_sweep(8, 4, 2), doctest::Contains("max_bytes"), ConfigError);
  CHECK_THROWS_WITH_AS((void)size_sweep(8, 64, 1), doctest::Contains("factor"), ConfigError);
  // 100 B of fp32 = 25 elements; split over 4 ranks: 24.
  CHECK(collective_count(CollectiveOp::all_gather, 100, Dtype::fp32, 4) == 24);
  CHECK(collective_count(CollectiveOp::all_reduce, 100, Dtype::fp32, 4) == 25);
  CHECK(collective_count(CollectiveOp::all_reduce, 100, Dtype::bf16, 4) == 50);
}

TEST_CASE("options are validated together") {
  CollectiveBenchOptions o;
  o.iters = 0;
  o.dtype = Dtype::fp8;
  CHECK_THROWS_WITH_AS(validate(o), doctest::Contains("iters = 0"), ConfigError);
  CHECK_THROWS_WITH_AS(validate(o), doctest::Contains("dtype = fp8"), ConfigError);
  CHECK_NOTHROW(validate(CollectiveBenchOptions{}));
}

TEST_CASE("fit recovers alpha and busbw from data with 3% noise") {
  // 8 ranks of H100-like NVLink: alpha 20 us, busbw 360 GB/s.
  for (const char* op : {"all-reduce", "all-gather", "broadcast"}) {
    const CollectiveSeries s = synthetic(op, 8, 20e-6, 360e9, 0.03, 12345);
    const CollectiveFitResult r = fit_collective(s);
    CAPTURE(op);
    CHECK(r.fit.op == op);
    CHECK(r.fit.num_ranks == 8);
    CHECK(r.fit.level == "intra-node");
    CHECK(r.fit.alpha_s == doctest::Approx(20e-6).epsilon(0.05));
    CHECK(r.fit.busbw_bytes_per_s == doctest::Approx(360e9).epsilon(0.05));
    CHECK(r.quality.max_rel_error_large_fraction < 0.15);
    CHECK(r.quality.mean_rel_error_small_fraction < 0.05);
    CHECK(r.quality.num_points == 28);
  }
}

TEST_CASE("fit resists an outlier") {
  CollectiveSeries s = synthetic("all-reduce", 4, 10e-6, 200e9, 0.0, 1);
  s.points[5].time_s *= 10; // one 10x spike (e.g. a preempted iteration)
  const CollectiveFitResult r = fit_collective(s);
  CHECK(r.fit.alpha_s == doctest::Approx(10e-6).epsilon(0.05));
  CHECK(r.fit.busbw_bytes_per_s == doctest::Approx(200e9).epsilon(0.05));
}

TEST_CASE("P = 1 fits the local rate with factor 1") {
  // all-reduce factor at P = 1 is 0; the fit uses bytes / time (a local copy) instead.
  const CollectiveSeries s = synthetic("all-reduce", 1, 5e-6, 1500e9, 0.03, 7);
  const CollectiveFitResult r = fit_collective(s);
  CHECK(r.quality.bandwidth_factor == 1.0);
  CHECK(r.fit.num_ranks == 1);
  CHECK(r.fit.alpha_s == doctest::Approx(5e-6).epsilon(0.05));
  CHECK(r.fit.busbw_bytes_per_s == doctest::Approx(1500e9).epsilon(0.05));
}

TEST_CASE("degenerate input throws ConfigError naming the field") {
  CollectiveSeries one{"all-reduce", "intra-node", 2, {{1024, 1e-5}, {1024, 1.1e-5}}};
  CHECK_THROWS_WITH_AS((void)fit_collective(one), doctest::Contains("bytes"), ConfigError);
  CollectiveSeries neg{"all-reduce", "intra-node", 2, {{1024, 1e-5}, {2048, -1}}};
  CHECK_THROWS_WITH_AS((void)fit_collective(neg), doctest::Contains("points[1].time_s"),
                       ConfigError);
  CollectiveSeries zero{"all-reduce", "intra-node", 2, {{1024, 0}, {2048, 1e-5}}};
  CHECK_THROWS_WITH_AS((void)fit_collective(zero), doctest::Contains("time_s"), ConfigError);
  CollectiveSeries ranks{"all-reduce", "intra-node", 0, {{1024, 1e-5}, {2048, 2e-5}}};
  CHECK_THROWS_WITH_AS((void)fit_collective(ranks), doctest::Contains("num_ranks"), ConfigError);
  CollectiveSeries flat{"all-reduce", "intra-node", 2, {{1024, 2e-5}, {2048, 1e-5}}};
  CHECK_THROWS_WITH_AS((void)fit_collective(flat), doctest::Contains("time_s"), ConfigError);
}

TEST_CASE("reads the JSON written by bench collectives") {
  CollectiveReport report;
  report.device.num_ranks = 2;
  for (double bytes : {1024.0, 1048576.0, 16777216.0}) {
    CollectiveRow row;
    row.op = "all-gather";
    row.bytes = bytes;
    row.num_ranks = 2;
    row.time_s = 1e-5 + bytes * 0.5 / 100e9;
    row.in_place_time_s = std::nan("");
    report.rows.push_back(row);
  }
  const nlohmann::json doc = to_json(report);
  CHECK(doc["results"][0]["in_place_time_s"].is_null());
  auto series = read_collective_series(doc, "mem.json", "intra-node");
  REQUIRE(series.size() == 1);
  CHECK(series[0].points.size() == 3);
  const CollectiveFitResult r = fit_collective(series[0]);
  CHECK(r.fit.alpha_s == doctest::Approx(1e-5).epsilon(1e-6));
  CHECK(r.fit.busbw_bytes_per_s == doctest::Approx(100e9).epsilon(1e-6));

  nlohmann::json bad = doc;
  bad["results"][1]["wrong"] = 3;
  CHECK_THROWS_WITH_AS((void)read_collective_series(bad, "mem.json", "intra-node"),
                       doctest::Contains("results[1].wrong"), ConfigError);
  bad = doc;
  bad["results"][2].erase("time_s");
  CHECK_THROWS_WITH_AS((void)read_collective_series(bad, "mem.json", "intra-node"),
                       doctest::Contains("results[2].time_s"), ConfigError);
}
