// Published validation as a test: every Megatron-LM Table 1 row within 10% (mean <= 5%),
// Eq. 4's day counts, and the planner beating or matching each published layout.
#include <doctest/doctest.h>

#include <cmath>

#include "hardware/load.hpp"
#include "simulate/plan.hpp"
#include "validate/published/megatron.hpp"

using namespace trainsim;

TEST_CASE("Megatron-LM Table 1: every row within 10%, mean absolute error <= 5%") {
  double sum = 0;
  for (const auto& run : val::megatron_table1()) {
    CAPTURE(run.name);
    const auto p = val::predict_megatron(run);
    CHECK(std::fabs(p.error_pct) <= 10.0);
    CHECK(p.step.breakdown_s.total() == doctest::Approx(p.step.step_time_s).epsilon(1e-12));
    sum += std::fabs(p.error_pct);
  }
  CHECK(sum / static_cast<double>(val::megatron_table1().size()) <= 5.0);
}

TEST_CASE("Megatron-LM Eq. 4 worked examples") {
  // GPT-3 175B, 1024 GPUs, 300B tokens at 140 TFLOP/s: ~34 days; 1T, 3072 GPUs, 450B at 163: ~84.
  CHECK(val::megatron_eq4_seconds(300e9, 175e9, 1024, 140e12) / 86400 ==
        doctest::Approx(33.9).epsilon(0.01));
  CHECK(val::megatron_eq4_seconds(450e9, 1008e9, 3072, 163e12) / 86400 ==
        doctest::Approx(84.0).epsilon(0.01));
}

TEST_CASE("the planner finds the published layout feasible and picks one at least as fast") {
  for (const auto& run : val::megatron_table1()) {
    CAPTURE(run.name);
    const auto published = val::predict_megatron(run);
    const auto& m = published.model;
    hw::ClusterSpec cluster = hw::load_cluster("dgx-a100");
    cluster.num_nodes = run.num_gpus / cluster.gpus_per_node;
    const auto gpu = hw::load_gpu("a100-80g");
    const auto prof = hw::default_profile("a100-80g");
    sim::PlanSearchOptions o;
    o.memory_bytes = gpu.memory_bytes;
    o.step.dp_overlap = run.torch_ddp;
    o.top_k = 1;
    o.threads = 2;
    const auto best = sim::search_plans(m, cluster, gpu, prof, published.setup, o);
    REQUIRE(!best.plans.empty());
    CHECK(best.plans.front().step_time_s <= published.step.step_time_s * (1 + 1e-12));
    // Pin every dimension to the published layout: it must be among the feasible plans.
    o.fix_tp = run.tp;
    o.fix_pp = run.pp;
    o.fix_micro_batch = run.micro_batch;
    o.fix_interleave = run.interleave;
    o.fix_recompute = 2;
    o.fix_zero = 0;
    o.fix_sp = 0;
    o.fix_cp = 1;
    const auto pinned = sim::search_plans(m, cluster, gpu, prof, published.setup, o);
    REQUIRE(pinned.feasible == 1);
    CHECK(pinned.plans.front().step_time_s ==
          doctest::Approx(published.step.step_time_s).epsilon(1e-12));
  }
}
