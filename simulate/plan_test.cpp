// Plan search: deterministic across thread counts, consistent with estimate_step, counts
// every candidate exactly once, honours --fix and the objective.
#include <doctest/doctest.h>

#include "hardware/load.hpp"
#include "model/load.hpp"
#include "simulate/plan.hpp"

using namespace trainsim;
using namespace trainsim::sim;

namespace {
struct Search {
  model::ModelSpec m = model::load_model("llama3-8b");
  hw::ClusterSpec cluster = hw::load_cluster("dgx-h100");
  hw::GpuSpec gpu = hw::load_gpu("h100-sxm");
  hw::HardwareProfile prof = hw::default_profile("h100-sxm");
  model::TrainingSetup s;
  PlanSearchOptions o;
  Search() {
    cluster.num_nodes = 8;
    s.seq_len = 4096;
    s.global_batch_size = 256;
    o.memory_bytes = gpu.memory_bytes;
    o.top_k = 20;
  }
  PlanSearchResult run() const { return search_plans(m, cluster, gpu, prof, s, o); }
};
} // namespace

TEST_CASE("divisors") {
  CHECK(divisors(12) == std::vector<std::int64_t>{1, 2, 3, 4, 6, 12});
  CHECK(divisors(1) == std::vector<std::int64_t>{1});
}

TEST_CASE("identical results single- and multi-threaded") {
  Search a;
  a.o.threads = 1;
  const auto r1 = a.run();
  a.o.threads = 4;
  const auto r4 = a.run();
  CHECK(r1.space_size == r4.space_size);
  CHECK(r1.evaluated == r4.evaluated);
  CHECK(r1.feasible == r4.feasible);
  CHECK(r1.rejected == r4.rejected);
  REQUIRE(r1.plans.size() == r4.plans.size());
  for (std::size_t i = 0; i < r1.plans.size(); ++i) {
    CHECK(r1.plans[i].step_time_s == r4.plans[i].step_time_s);
    CHECK(r1.plans[i].plan.tp == r4.plans[i].plan.tp);
    CHECK(r1.plans[i].plan.pp == r4.plans[i].plan.pp);
    CHECK(r1.plans[i].micro_batch_size == r4.plans[i].micro_batch_size);
    CHECK(r1.plans[i].plan.zero_stage == r4.plans[i].plan.zero_stage);
  }
}

TEST_CASE("every candidate is counted once; plans are sorted and agree with estimate_step") {
  Search a;
  const auto r = a.run();
  std::int64_t rejected = 0;
  for (auto n : r.rejected)
    rejected += n;
  CHECK(r.space_size == r.feasible + rejected);
  CHECK(r.evaluated == r.feasible + r.rejected[static_cast<std::size_t>(Reject::does_not_fit)]);
  REQUIRE(!r.plans.empty());
  for (std::size_t i = 1; i < r.plans.size(); ++i)
    CHECK(r.plans[i - 1].step_time_s <= r.plans[i].step_time_s);
  for (const auto& c : r.plans) {
    model::TrainingSetup s = a.s;
    s.micro_batch_size = c.micro_batch_size;
    const auto e = estimate_step(a.m, a.cluster, a.gpu, a.prof, c.plan, s, a.o.step);
    CHECK(e.step_time_s == doctest::Approx(c.step_time_s).epsilon(1e-12));
    CHECK(e.memory.total == doctest::Approx(c.per_gpu_bytes_total).epsilon(1e-12));
    CHECK(c.per_gpu_bytes_total <= a.gpu.memory_bytes);
  }
}

TEST_CASE("fixed dimensions are respected; memory objective minimises memory") {
  Search a;
  a.o.fix_tp = 2;
  a.o.fix_recompute = 2;
  for (const auto& c : a.run().plans) {
    CHECK(c.plan.tp == 2);
    CHECK(c.plan.recompute == model::Recompute::full);
  }
  Search b;
  b.o.objective = Objective::memory;
  const auto r = b.run();
  for (std::size_t i = 1; i < r.plans.size(); ++i)
    CHECK(r.plans[i - 1].per_gpu_bytes_total <= r.plans[i].per_gpu_bytes_total);
}

TEST_CASE("no feasible plan: everything rejected with reasons") {
  Search a;
  a.m = model::load_model("llama3-405b");
  a.cluster.num_nodes = 1; // 8 GPUs cannot hold 405B parameters
  const auto r = a.run();
  CHECK(r.plans.empty());
  CHECK(r.feasible == 0);
  CHECK(r.rejected[static_cast<std::size_t>(Reject::does_not_fit)] > 0);
}
