// The named benchmark suites: op names round-trip, calibration and held-out share no case, every
// suite has fp8 GEMMs at cuBLASLt's multiples of 16, fp8-shapes and fp8-held-out share no case
// with the others, an unknown suite is a ConfigError.
#include <doctest/doctest.h>

#include "common/errors.hpp"
#include "validate/bench/bench.hpp"

using namespace trainsim;
using namespace trainsim::fitting;
using namespace trainsim::val;

TEST_CASE("op names round-trip; suites differ; unknown suite is a ConfigError") {
  for (BenchOp op : {BenchOp::gemm, BenchOp::attention, BenchOp::empty, BenchOp::rmsnorm})
    CHECK(parse_op(op_name(op)) == op);
  CHECK_FALSE(parse_op("conv").has_value());
  const auto cal = suite_cases("calibration"), held = suite_cases("held-out");
  CHECK(cal.size() > 20);
  CHECK(held.size() > 20);
  int shared = 0;
  for (const auto& a : cal)
    for (const auto& b : held)
      if (case_name(a) == case_name(b) && a.op != BenchOp::empty && a.op != BenchOp::copy)
        ++shared;
  CHECK(shared == 0);
  // fp8 GEMMs in every suite (fitted, scored, perf), always at cuBLASLt's multiples of 16.
  for (const auto& suite :
       {cal, held, suite_cases("perf"), suite_cases("fp8-shapes"), suite_cases("fp8-held-out")}) {
    int fp8 = 0;
    for (const auto& c : suite)
      if (c.dtype == Dtype::fp8) {
        ++fp8;
        CHECK(c.op == BenchOp::gemm);
        CHECK(c.gemm_impl == GemmImpl::cublaslt);
        CHECK((c.m % 16 == 0 && c.n % 16 == 0 && c.k % 16 == 0));
      }
    CHECK(fp8 >= 1);
  }
  // fp8-shapes and fp8-held-out: FP8 GEMMs only, none of them a case of another suite.
  const auto fp8 = suite_cases("fp8-shapes"), fp8_held = suite_cases("fp8-held-out");
  CHECK(fp8.size() == 20);
  CHECK(fp8_held.size() == 12);
  for (const auto* s : {&fp8, &fp8_held})
    for (const auto& c : *s) {
      CHECK(c.dtype == Dtype::fp8);
      for (const auto* o : {&cal, &held, s == &fp8 ? &fp8_held : &fp8})
        for (const auto& x : *o)
          CHECK(case_name(c) != case_name(x));
    }
  for (const auto& name : suite_names())
    CHECK_FALSE(suite_cases(name).empty());
  CHECK_THROWS_AS(static_cast<void>(suite_cases("fast")), ConfigError);
}
