// The internal guard of the printers: no NaN or infinity is ever printed; a non-finite field
// throws std::logic_error naming it (main reports "internal error", exit 2).
#include <cmath>
#include <doctest/doctest.h>
#include <limits>

#include "cli/estimate_print.hpp"
#include "cli/output.hpp"
#include "hardware/load.hpp"
#include "model/load.hpp"
#include "simulate/step.hpp"

using namespace trainsim;
using namespace trainsim::cli;

TEST_CASE("check_finite names the first non-finite number by its path") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_NOTHROW(check_finite({{"a", 1.5}, {"b", {1, 2, 3}}, {"name", "nan"}}));
  CHECK_THROWS_WITH_AS(check_finite({{"rows", {{{"time_s", 1.0}}, {{"time_s", nan}}}}}),
                       doctest::Contains("rows[1].time_s = nan: not finite"), std::logic_error);
  CHECK_THROWS_WITH_AS(check_finite({{"breakdown_s", {{"bubble", -HUGE_VAL}}}}),
                       doctest::Contains("breakdown_s.bubble = -inf"), std::logic_error);
}

TEST_CASE("a StepEstimate with a NaN part is refused by its printer, in every format") {
  const auto m = model::load_model("gpt2");
  Machine mc;
  mc.gpu = hw::load_gpu("a100-80g");
  mc.cluster = hw::single_node_cluster(mc.gpu, 1);
  mc.profile = hw::default_profile("a100-80g");
  model::TrainingSetup s;
  s.seq_len = 1024;
  const model::ParallelPlan p;
  sim::StepEstimate e = sim::estimate_step(m, mc.cluster, mc.gpu, mc.profile, p, s);
  OutputFiles files; // as run_cli makes for each command
  for (Format f : {Format::table, Format::csv, Format::json}) {
    OutputOptions out;
    out.format = f;
    out.output = "/dev/null";
    Sink sink(out);
    CHECK_NOTHROW(print_estimate(sink, m, mc, p, s, e, 1e9));
    sim::StepEstimate bad = e;
    bad.breakdown_s.bubble = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH_AS(print_estimate(sink, m, mc, p, s, bad, 1e9),
                         doctest::Contains("breakdown_s.bubble = nan: not finite"),
                         std::logic_error);
    bad = e;
    bad.mfu = HUGE_VAL;
    CHECK_THROWS_WITH_AS(print_estimate(sink, m, mc, p, s, bad, 0),
                         doctest::Contains("mfu = inf: not finite"), std::logic_error);
  }
}
