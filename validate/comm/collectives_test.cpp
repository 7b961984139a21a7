// Tests for the pure helpers of the collective benchmarks: busbw factors, op lists, element
// counts, size sweeps, option validation, that the benchmark's ops are the model's, and that
// the fit (simulate/fit/collective_fit) reads the JSON the benchmark writes.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "common/errors.hpp"
#include "simulate/fit/collective_fit.hpp"
#include "validate/comm/collectives.hpp"

using namespace trainsim;
using namespace trainsim::val;
using fitting::CollectiveFitResult;
using fitting::fit_collective;
using fitting::read_collective_series;

TEST_CASE("busbw factors follow nccl-tests") {
  // all-reduce at 8 ranks: 2 * 7 / 8 = 1.75; all-gather at 4 ranks: 3 / 4 = 0.75.
  CHECK(busbw_factor(CollectiveOp::all_reduce, 8) == doctest::Approx(1.75).epsilon(1e-12));
  CHECK(busbw_factor(CollectiveOp::all_gather, 4) == doctest::Approx(0.75).epsilon(1e-12));
  CHECK(busbw_factor(CollectiveOp::reduce_scatter, 2) == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(busbw_factor(CollectiveOp::all_to_all, 8) == doctest::Approx(0.875).epsilon(1e-12));
  CHECK(busbw_factor(CollectiveOp::broadcast, 8) == 1.0);
  CHECK(busbw_factor(CollectiveOp::send_recv, 2) == 1.0);
  CHECK(busbw_factor(CollectiveOp::all_reduce, 1) == 0.0); // P = 1: nothing crosses a link
  CHECK_THROWS_AS((void)fitting::busbw_factor("allreduce", 2), ConfigError);
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

TEST_CASE("one collective model: the benchmark's ops are the simulator's and agree by name") {
  static_assert(std::is_same_v<CollectiveOp, sim::Collective>);
  for (CollectiveOp op : kAllCollectiveOps) {
    const auto name = std::string(collective_name(op));
    CHECK(name == std::string(sim::to_string(op)));
    REQUIRE(parse_collective(name).has_value());
    CHECK(*parse_collective(name) == op);
    for (std::int64_t p : {1, 2, 3, 8, 64}) {
      CHECK(fitting::busbw_factor(name, p) == sim::busbw_factor(op, p));
    }
  }
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
