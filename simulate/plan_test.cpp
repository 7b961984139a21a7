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

TEST_CASE("closed-form equal buckets: the same plans and step times as the per-bucket walk") {
  // Several searches (dense and MoE, one node and many, data-parallel heavy) with the closed
  // form and with every bucket priced and walked one by one, as explicit lists are.
  struct Case {
    const char* model;
    const char* cluster;
    std::int64_t nodes, batch, seq;
    double bucket_bytes;
  };
  for (const Case& k : {Case{"llama3-8b", "dgx-h100", 8, 256, 4096, 25.0 * 1024 * 1024},
                        Case{"llama3-8b", "dgx-h100", 2, 64, 2048, 1.0 * 1024 * 1024},
                        Case{"gpt3-175b", "dgx-a100", 64, 1536, 2048, 25.0 * 1024 * 1024},
                        Case{"mixtral-8x7b", "dgx-h100", 4, 128, 4096, 100.0 * 1024 * 1024},
                        Case{"cs336-xl", "dgx-h200", 1, 32, 1024, 10.0 * 1024 * 1024}}) {
    CAPTURE(k.model);
    Search a;
    a.m = model::load_model(k.model);
    a.cluster = hw::load_cluster(k.cluster);
    a.gpu = hw::load_gpu(a.cluster.gpu);
    a.prof = hw::default_profile(a.cluster.gpu);
    a.cluster.num_nodes = k.nodes;
    a.s.global_batch_size = k.batch;
    a.s.seq_len = k.seq;
    a.o.memory_bytes = a.gpu.memory_bytes;
    a.o.top_k = 50;
    a.o.step.bucket_bytes = k.bucket_bytes;
    const auto fast = a.run();
    a.o.step.closed_form_buckets = false;
    const auto walk = a.run();
    CHECK(fast.feasible == walk.feasible);
    REQUIRE(fast.plans.size() == walk.plans.size());
    REQUIRE(!fast.plans.empty());
    for (std::size_t i = 0; i < fast.plans.size(); ++i) {
      CHECK(fast.plans[i].step_time_s == doctest::Approx(walk.plans[i].step_time_s).epsilon(1e-9));
      CHECK(fast.plans[i].plan.tp == walk.plans[i].plan.tp);
      CHECK(fast.plans[i].plan.pp == walk.plans[i].plan.pp);
      CHECK(fast.plans[i].plan.dp == walk.plans[i].plan.dp);
      CHECK(fast.plans[i].plan.zero_stage == walk.plans[i].plan.zero_stage);
      CHECK(fast.plans[i].micro_batch_size == walk.plans[i].micro_batch_size);
    }
  }
}

TEST_CASE("guard: the work per evaluated plan stays constant (collective evaluations)") {
  // Phase 2 prices at most three collectives per plan (pipeline send, one gradient bucket, the
  // ZeRO all-gather), whatever the model size: pricing every bucket of a 1T model made the
  // search ~115x slower once. Deterministic (a count, not a time).
  Search a;
  a.m = model::load_model("megatron-1t");
  a.cluster = hw::load_cluster("dgx-a100");
  a.gpu = hw::load_gpu("a100-80g");
  a.prof = hw::default_profile("a100-80g");
  a.cluster.num_nodes = 384;
  a.s.global_batch_size = 3072;
  a.s.seq_len = 2048;
  a.s.precision = model::Precision::fp16_mixed;
  a.s.attention = model::AttentionImpl::naive;
  a.o.memory_bytes = a.gpu.memory_bytes;
  const auto r = a.run();
  REQUIRE(r.feasible > 1000);
  CHECK(r.collective_evaluations <= 3 * r.feasible);
  CHECK(r.collective_evaluations > 0);
}
