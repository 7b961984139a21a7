// Uneven pipeline stages in the step and memory models: Llama 3 405B's 7,8x14,7 on 16 stages
// by hand (per-stage parameters, the fullest stage, the slowest stage and the bubble), and an
// explicit even split identical to none. The plan search's splits: plan_test.cpp.
#include <doctest/doctest.h>

#include <vector>

#include "hardware/load.hpp"
#include "model/count.hpp"
#include "model/load.hpp"
#include "simulate/memory.hpp"
#include "simulate/step.hpp"

using namespace trainsim;
using namespace trainsim::sim;

namespace {
std::vector<std::int64_t> llama3_405b_split() { // 7, 8 x 14, 7
  std::vector<std::int64_t> s(16, 8);
  s.front() = s.back() = 7;
  return s;
}

// Llama 3 405B on 8192 H100s as trained (Dubey et al. 2024, Table 4): tp 8, pp 16, dp 64,
// sequence 8192, micro-batch 1, 2048 sequences per step (m = 32 micro-batches).
struct Llama405 {
  model::ModelSpec m = model::load_model("llama3-405b");
  hw::ClusterSpec cluster = hw::load_cluster("dgx-h100");
  hw::GpuSpec gpu = hw::load_gpu("h100-sxm");
  hw::HardwareProfile prof = hw::default_profile("h100-sxm");
  model::ParallelPlan plan;
  model::TrainingSetup setup;
  Llama405() {
    cluster.num_nodes = 1024;
    plan.tp = 8;
    plan.pp = 16;
    plan.dp = 64;
    plan.sequence_parallel = true;
    plan.stage_layers = llama3_405b_split();
    setup.seq_len = 8192;
    setup.micro_batch_size = 1;
    setup.global_batch_size = 2048;
  }
  [[nodiscard]] MicroBatchAccounting accounting() const {
    return account_micro_batch(m, model::build_ops(m, model::make_op_context(plan, setup)), plan,
                               setup);
  }
};
} // namespace

TEST_CASE("Llama 3 405B, 7,8x14,7: parameters per stage by hand") {
  const Llama405 j;
  const auto a = j.accounting();
  // One layer on one GPU of tp 8: attention h (h + 2 kv d) + h^2 = 16384 x 18432 + 16384^2 =
  // 570,425,344; SwiGLU 3 h ffn = 3 x 16384 x 53248 = 2,617,245,696; both split over tp:
  // 3,187,671,040 / 8 = 398,458,880; plus two RMSNorm weights 2 h = 32,768 (replicated):
  // 398,491,648. Embedding V h / tp = 128256 x 16384 / 8 = 262,668,288; head the same plus
  // the final norm h: 262,684,672.
  auto params = [&](std::int64_t stage) {
    return compose_memory({a, j.m, j.plan, j.setup, j.prof, {}, stage}).params_on_gpu;
  };
  CHECK(params(0) == 7 * 398491648.0 + 262668288.0); // 3,052,109,824
  CHECK(params(1) == 8 * 398491648.0);               // 3,187,933,184
  CHECK(params(7) == 8 * 398491648.0);
  CHECK(params(15) == 7 * 398491648.0 + 262684672.0); // 3,052,126,208
  // Over the 16 stages and 8 tp ranks, less the 7 extra copies of every norm, the model:
  // 405,853,388,800 parameters (Llama 3.1 model card).
  double sum = 0;
  for (std::int64_t i = 0; i < 16; ++i)
    sum += params(i);
  const double norms = 126 * 2 * 16384.0 + 16384.0;
  CHECK(sum * 8 - 7 * norms == model::count_params(j.m).total);
  CHECK(model::count_params(j.m).total == 405853388800.0);
}

TEST_CASE("Llama 3 405B, 7,8x14,7: the fullest stage is the second (8 layers, 15 in flight)") {
  const Llama405 j;
  const auto a = j.accounting();
  const MemoryOptions mo;
  // 1F1B with m = 32 >= 16: stage i holds 16 - i micro-batches. Stage 0 keeps 16 x 7 = 112
  // layers' activations (Llama's embedding saves nothing: no dropout), stage 1 15 x 8 = 120,
  // the last 1 x 7 plus the head's. Stage 1 also holds the most parameters (8 layers).
  const auto full = compose_memory_fullest(a, j.m, j.plan, j.setup, j.prof, mo);
  CHECK(full.stage == 1);
  CHECK(full.stage_num_layers == 8);
  CHECK(full.in_flight_micro_batches == 15);
  const double layer_act = a.layer_act[static_cast<int>(model::Recompute::none)];
  CHECK(full.activations == doctest::Approx(120 * layer_act).epsilon(1e-12));
  // Mixed-precision AdamW, ZeRO-0: 2 + 2 + 12 bytes per parameter of stage 1.
  CHECK(full.weights == 2 * 8 * 398491648.0);
  CHECK(full.gradients == 2 * 8 * 398491648.0);
  CHECK(full.optimizer == 12 * 8 * 398491648.0);
  const auto first = compose_memory({a, j.m, j.plan, j.setup, j.prof, mo, 0});
  CHECK(a.emb_act == 0);
  CHECK(first.activations == doctest::Approx(16 * 7 * layer_act).epsilon(1e-12));
  CHECK(first.total < full.total);
  // estimate_memory reports the same stage.
  CHECK(estimate_memory(j.m, j.plan, j.setup, j.prof).stage == 1);
}

TEST_CASE("Llama 3 405B, 7,8x14,7: the slowest stage paces the pipeline; bubble (p-1) x it") {
  const Llama405 j;
  const auto e = estimate_step(j.m, j.cluster, j.gpu, j.prof, j.plan, j.setup);
  const auto ops = model::build_ops(j.m, model::make_op_context(j.plan, j.setup));
  const auto t = time_micro_batch(j.m, ops, j.plan, j.setup, j.gpu, j.prof, j.cluster);
  const StageCosts k = stage_costs(t, j.plan, {});
  // The LM head and loss (2 V h / tp FLOPs per token forward, about 0.66 of a layer's) cost
  // less than a layer: 8 layers outweigh 7 layers + head, so stage 1 is the slowest.
  REQUIRE(k.last_extra.total() < k.layer.total());
  CHECK(e.slowest_stage == 1);
  CHECK(e.slowest_stage_layers == 8);
  const double stage = 8 * k.layer.total();
  CHECK(e.micro_batch_stage_s == doctest::Approx(stage).epsilon(1e-12));
  // 1F1B: (m + p - 1) x the slowest stage: m x its parts, and the bubble (p - 1) x it.
  CHECK(e.micro_batches == 32);
  CHECK(e.breakdown_s.bubble == doctest::Approx(15 * stage).epsilon(1e-12));
  CHECK(e.breakdown_s.forward == doctest::Approx(32 * 8 * k.layer.fwd).epsilon(1e-12));
  CHECK(e.breakdown_s.tp_comm == doctest::Approx(32 * 8 * k.layer.tp).epsilon(1e-12));
  CHECK(e.breakdown_s.total() == doctest::Approx(e.step_time_s).epsilon(1e-12));
  // Interleaved with 8 chunks (Llama 3's first chunk holds only the embedding): bubble / 8.
  auto interleaved = j.plan;
  interleaved.interleave = 8;
  const auto ei = estimate_step(j.m, j.cluster, j.gpu, j.prof, interleaved, j.setup);
  CHECK(ei.breakdown_s.bubble == doctest::Approx(15.0 / 8 * stage).epsilon(1e-12));
}

TEST_CASE("a head-heavy split is slower: the last stage with 8 layers and the head paces it") {
  const Llama405 j;
  auto heavy = j.plan;
  heavy.stage_layers.front() = 6;
  heavy.stage_layers.back() = 8; // 6, 8 x 14, 8
  const auto balanced = estimate_step(j.m, j.cluster, j.gpu, j.prof, j.plan, j.setup);
  const auto e = estimate_step(j.m, j.cluster, j.gpu, j.prof, heavy, j.setup);
  CHECK(e.slowest_stage == 15);
  CHECK(e.slowest_stage_layers == 8);
  CHECK(e.micro_batch_stage_s > balanced.micro_batch_stage_s);
  CHECK(e.step_time_s > balanced.step_time_s);
}

TEST_CASE("an explicit even split gives exactly the results of no split") {
  struct Case {
    const char* model;
    std::int64_t tp, pp, dp, v, zero;
    model::Recompute rc;
  };
  for (const Case& c : {Case{"llama3-70b", 8, 4, 2, 1, 1, model::Recompute::none},
                        Case{"gpt3-175b", 8, 8, 1, 4, 0, model::Recompute::full},
                        Case{"mixtral-8x7b", 2, 4, 1, 2, 3, model::Recompute::selective}}) {
    CAPTURE(c.model);
    const auto m = model::load_model(c.model);
    auto cluster = hw::load_cluster("dgx-h100");
    cluster.num_nodes = c.tp * c.pp * c.dp / 8;
    const auto gpu = hw::load_gpu("h100-sxm");
    const auto prof = hw::default_profile("h100-sxm");
    model::TrainingSetup s;
    s.seq_len = 2048;
    s.global_batch_size = 64;
    model::ParallelPlan even;
    even.tp = c.tp;
    even.pp = c.pp;
    even.dp = c.dp;
    even.interleave = c.v;
    even.zero_stage = c.zero;
    even.recompute = c.rc;
    auto listed = even;
    listed.stage_layers.assign(static_cast<std::size_t>(c.pp), m.num_layers / c.pp);
    const auto a = estimate_step(m, cluster, gpu, prof, even, s);
    const auto b = estimate_step(m, cluster, gpu, prof, listed, s);
    CHECK(a.step_time_s == b.step_time_s);
    CHECK(a.breakdown_s.forward == b.breakdown_s.forward);
    CHECK(a.breakdown_s.bubble == b.breakdown_s.bubble);
    CHECK(a.breakdown_s.dp_comm == b.breakdown_s.dp_comm);
    CHECK(a.memory.total == b.memory.total);
    CHECK(a.memory.stage == b.memory.stage);
    CHECK(a.slowest_stage == b.slowest_stage);
    CHECK(a.mfu == b.mfu);
  }
}

TEST_CASE("saved activations scale with the micro-batch (the plan search relies on it)") {
  // search_plans rejects a (ZeRO, recompute) choice at every larger micro-batch once it did not
  // fit: that holds when every saved tensor and send grows with the micro-batch.
  const auto prof = hw::default_profile("h100-sxm");
  for (const char* name : {"gpt2", "llama3-8b", "mixtral-8x7b", "gpt3-175b"}) {
    CAPTURE(name);
    const auto m = model::load_model(name);
    model::ParallelPlan p;
    p.tp = 2;
    p.sequence_parallel = true;
    model::TrainingSetup one, three;
    one.seq_len = three.seq_len = 1024;
    three.micro_batch_size = 3;
    const auto a1 =
        account_micro_batch(m, model::build_ops(m, model::make_op_context(p, one)), p, one);
    const auto a3 =
        account_micro_batch(m, model::build_ops(m, model::make_op_context(p, three)), p, three);
    for (int r = 0; r < 3; ++r)
      CHECK(a3.layer_act[r] == doctest::Approx(3 * a1.layer_act[r]).epsilon(1e-12));
    CHECK(a3.layer_saved_all == doctest::Approx(3 * a1.layer_saved_all).epsilon(1e-12));
    CHECK(a3.emb_act == doctest::Approx(3 * a1.emb_act).epsilon(1e-12));
    CHECK(a3.head_act == doctest::Approx(3 * a1.head_act).epsilon(1e-12));
    CHECK(a3.pp_send_bytes == doctest::Approx(3 * a1.pp_send_bytes).epsilon(1e-12));
    CHECK(a3.layer_dense_params == a1.layer_dense_params);
  }
}
