// Memory accounting: ZeRO's worked example, the CS336 lecture's largest model on 8 GPUs,
// and invariants (ZeRO never adds memory; ZeRO-3 states fall with dp; parts sum to totals).
#include <doctest/doctest.h>

#include "hardware/load.hpp"
#include "model/count.hpp"
#include "model/load.hpp"
#include "simulate/framework.hpp"
#include "simulate/memory.hpp"

using namespace trainsim;
using namespace trainsim::sim;
using model::Optimizer;
using model::Precision;

TEST_CASE("ZeRO paper: 7.5B parameters on 64 GPUs, mixed-precision Adam (K = 12)") {
  // 16 Psi = 120 GB; 4 Psi + 12 Psi/64 = 31.4 GB; 2 Psi + 14 Psi/64 = 16.6 GB; 16 Psi/64 = 1.88 GB.
  const double psi = 7.5e9;
  CHECK(model_state_bytes(psi, Precision::bf16_mixed, Optimizer::adamw, 64, 0).total == 120e9);
  CHECK(model_state_bytes(psi, Precision::bf16_mixed, Optimizer::adamw, 64, 1).total / 1e9 ==
        doctest::Approx(31.4).epsilon(0.002));
  CHECK(model_state_bytes(psi, Precision::bf16_mixed, Optimizer::adamw, 64, 2).total / 1e9 ==
        doctest::Approx(16.6).epsilon(0.003));
  CHECK(model_state_bytes(psi, Precision::bf16_mixed, Optimizer::adamw, 64, 3).total / 1e9 ==
        doctest::Approx(1.875).epsilon(1e-12));
}

TEST_CASE("CS336 lecture 2: the largest model on 8 x 80 GB with AdamW") {
  // All states sharded over 8 GPUs: 640 GB / 16 B = 40B params; at 12 B/param ~53B.
  CHECK(max_params(80e9, 8, Precision::bf16_mixed, Optimizer::adamw, 3) == doctest::Approx(40e9));
  CHECK(max_params(80e9, 8, Precision::bf16, Optimizer::adamw, 3) / 1e9 ==
        doctest::Approx(53.33).epsilon(1e-3));
  CHECK(max_params(80e9, 8, Precision::fp32, Optimizer::adamw, 3) == doctest::Approx(40e9));
}

TEST_CASE("bytes per parameter by precision policy") {
  CHECK(state_bytes_per_param(Precision::fp32, Optimizer::adamw).total() == 16);
  CHECK(state_bytes_per_param(Precision::bf16_mixed, Optimizer::adamw).total() == 16);
  CHECK(state_bytes_per_param(Precision::bf16, Optimizer::adamw).total() == 12);
  CHECK(state_bytes_per_param(Precision::bf16_mixed, Optimizer::sgd).total() == 12);
}

TEST_CASE("invariants of the full breakdown") {
  const auto m = model::load_model("llama3-8b");
  const auto prof = hw::default_profile("h100-sxm");
  model::TrainingSetup s;
  s.seq_len = 4096;
  model::ParallelPlan p;
  p.dp = 8;
  double previous = 1e300;
  for (std::int64_t z = 0; z <= 3; ++z) {
    p.zero_stage = z;
    const auto b = estimate_memory(m, p, s, prof);
    CHECK(b.total == doctest::Approx(b.weights + b.gradients + b.optimizer + b.activations +
                                     b.buffers + b.overhead));
    // Stage 3 adds gather buffers but sheds far more weight bytes.
    CHECK(b.total <= previous);
    previous = b.total;
  }
  p.zero_stage = 3;
  double states = 1e300;
  for (std::int64_t dp : {1, 2, 4, 8, 16, 64}) {
    p.dp = dp;
    const auto b = estimate_memory(m, p, s, prof);
    CHECK(b.weights + b.gradients + b.optimizer <= states);
    states = b.weights + b.gradients + b.optimizer;
  }
}

TEST_CASE("recompute and flash never add activation memory") {
  const auto m = model::load_model("gpt3-175b");
  const auto prof = hw::default_profile("a100-80g");
  model::TrainingSetup s;
  s.seq_len = 2048;
  s.attention = model::AttentionImpl::naive;
  model::ParallelPlan p;
  p.tp = 8;
  p.pp = 8;
  p.dp = 1;
  double prev = 1e300;
  for (auto r : {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
    p.recompute = r;
    const double a = estimate_memory(m, p, s, prof).activations;
    CHECK(a < prev);
    prev = a;
  }
  p.recompute = model::Recompute::none;
  const double naive = estimate_memory(m, p, s, prof).activations;
  s.attention = model::AttentionImpl::flash;
  CHECK(estimate_memory(m, p, s, prof).activations < naive);
}

TEST_CASE("max micro-batch is the boundary of fitting") {
  const auto m = model::load_model("llama3-8b");
  const auto prof = hw::default_profile("h100-sxm");
  model::TrainingSetup s;
  s.seq_len = 2048;
  model::ParallelPlan p;
  p.dp = 8;
  p.zero_stage = 3;
  const double mem = 80e9;
  const auto b = max_micro_batch(m, p, s, prof, mem);
  REQUIRE(b >= 1);
  s.micro_batch_size = b;
  CHECK(estimate_memory(m, p, s, prof).total <= mem);
  s.micro_batch_size = b + 1;
  CHECK(estimate_memory(m, p, s, prof).total > mem);
}

TEST_CASE("max micro-batch of a pipeline keeps the step's micro-batches in flight") {
  // pp 4 with 8 micro-batches per step: the first stage holds 4 in flight at any micro-batch
  // size, so the boundary is where 4 of them no longer fit, not 1.
  const auto m = model::load_model("llama3-8b");
  const auto prof = hw::default_profile("h100-sxm");
  const model::ParallelPlan p = [] {
    model::ParallelPlan q;
    q.pp = 4;
    q.dp = 2;
    q.zero_stage = 1;
    return q;
  }();
  model::TrainingSetup s;
  s.seq_len = 4096;
  s.global_batch_size = 1 * 2 * 8; // micro-batch 1
  const auto b = max_micro_batch(m, p, s, prof, 80e9);
  REQUIRE(b >= 1);
  const double mem = 80e9;
  for (const std::int64_t mb : {b, b + 1}) {
    s.micro_batch_size = mb;
    s.global_batch_size = mb * 2 * 8;
    const auto e = estimate_memory(m, p, s, prof);
    CHECK(e.in_flight_micro_batches == doctest::Approx(4));
    CHECK((e.total <= mem) == (mb == b));
  }
  // With one micro-batch per step (no global batch given) the stage holds one.
  s.micro_batch_size = 1;
  s.global_batch_size = 0;
  CHECK(max_micro_batch(m, p, s, prof, mem) > b);
}

namespace {
// A model preset on a GPU preset with the plan, setup and options a test sets.
struct StepConfig {
  model::ModelSpec m;
  hw::HardwareProfile prof;
  model::ParallelPlan p;
  model::TrainingSetup s;
  MemoryOptions o;
  StepConfig(const char* model, const char* gpu)
      : m(model::load_model(model)), prof(hw::default_profile(gpu)) {}
};

// Eager PyTorch (the pytorch profile) training cs336-large at s1024 with full recompute on an
// H200 (as recorded in validate/results/allocator-traces-2026-12-05-steps8).
struct EagerLargeFull : StepConfig {
  explicit EagerLargeFull(model::AttentionImpl attention) : StepConfig("cs336-large", "h200") {
    p.recompute = model::Recompute::full;
    s.seq_len = 1024;
    s.attention = attention;
    o.framework = std::make_shared<const FrameworkProfile>(load_framework("pytorch"));
  }
};
} // namespace

TEST_CASE("a framework that simulates its allocator: its max micro-batch fits under the same cap") {
  // The step at max_micro_batch runs on a GPU of that memory when the allocator is capped at it
  // (it returns its cache there, as PyTorch's does): `trainsim memory` gives the verdict of the
  // asked micro-batch that way. Uncapped, the reserved bytes of that step may exceed the GPU.
  EagerLargeFull c(model::AttentionImpl::naive);
  const auto& m = c.m;
  const auto& prof = c.prof;
  const auto& p = c.p;
  auto& s = c.s;
  const auto& o = c.o;
  REQUIRE(o.framework->caching_allocator);
  bool uncapped_beyond = false;
  for (const double mem : {24e9, 40e9, 80e9}) {
    CAPTURE(mem);
    const auto b = max_micro_batch(m, p, s, prof, mem, o);
    REQUIRE(b >= 1);
    s.micro_batch_size = b;
    MemoryOptions capped = o;
    capped.device_bytes = mem;
    CHECK(estimate_memory(m, p, s, prof, capped).total <= mem);
    uncapped_beyond = uncapped_beyond || estimate_memory(m, p, s, prof, o).total > mem;
    // Every smaller micro-batch fits too, and the next does not: fitting is not monotone under
    // the allocator (at 80 GB this step fits at 107 and 110-117 but not 108), so the answer
    // is the one below the first that does not fit.
    bool all_below = true;
    for (std::int64_t below = 1; below < b; ++below) {
      s.micro_batch_size = below;
      all_below = all_below && estimate_memory(m, p, s, prof, capped).total <= mem;
    }
    CHECK(all_below);
    s.micro_batch_size = b + 1;
    CHECK(estimate_memory(m, p, s, prof, capped).total > mem);
  }
  CHECK(uncapped_beyond); // the case the cap exists for: the uncapped step reserves more
}

TEST_CASE("a loop's verdict plays four steps with the cache kept; the recorded probes two") {
  // Eager cs336-large, flash, full recompute, b24 s1024 under a 22 GB cap. A training loop's
  // options (the defaults) play MemoryOptions::kLoopSteps with what the initialisation cached;
  // the recorded OOM probes' emptied the cache and played two steps.
  EagerLargeFull c(model::AttentionImpl::flash);
  c.s.micro_batch_size = 24;
  c.s.global_batch_size = 24;
  c.o.allocator_cap_bytes = 22e9;
  const MemoryBreakdown loop = estimate_memory(c.m, c.p, c.s, c.prof, c.o);
  REQUIRE(loop.allocator_step);
  CHECK(loop.allocator_step->steps == MemoryOptions::kLoopSteps);
  CHECK_FALSE(loop.allocator_step->empty_cache_before_steps);
  c.o.allocator_steps = MemoryOptions::kProbeSteps;
  c.o.empty_cache_before_steps = true;
  const MemoryBreakdown probe = estimate_memory(c.m, c.p, c.s, c.prof, c.o);
  REQUIRE(probe.allocator_step);
  CHECK(probe.allocator_step->steps == MemoryOptions::kProbeSteps);
  CHECK(probe.allocator_step->empty_cache_before_steps);
  // PyTorch's own requests for this step need 21.0 GB for two steps and 22.3 GB from the third
  // on (validate/results/allocator-traces-2026-12-05-steps8); the generated step settles by its
  // second, so both protocols give it the same peaks (docs/frameworks.md, "Under a cap: the
  // OOM boundary").
  CHECK(loop.peak_reserved() == doctest::Approx(probe.peak_reserved()));
  CHECK(loop.peak_reserved() <= 22e9);
}

TEST_CASE("full recompute: the end of backward holds every gradient and one re-made layer") {
  // Eager PyTorch (the pytorch profile), cs336-medium with naive attention under full
  // recompute at micro-batch 16, seq 1024: the checkpoints (24 x 64 MiB) are fewer bytes than
  // the gradients (1.7 GB), so the peak is in layer 0's backward, where the layer is re-made
  // and its scores' gradients are alive beside every gradient (allocator trace
  // pytorch-cs336-medium-bf16-mixed-naive-full-b16-s1024: 11.50 GB allocated at that moment).
  const auto m = model::load_model("cs336-medium");
  model::ParallelPlan p;
  p.recompute = model::Recompute::full;
  model::TrainingSetup s;
  s.micro_batch_size = 16;
  s.global_batch_size = 16;
  s.seq_len = 1024;
  s.attention = model::AttentionImpl::naive;
  MemoryOptions o;
  o.framework = std::make_shared<const FrameworkProfile>(load_framework("pytorch"));
  const MemoryBreakdown b = estimate_memory(m, p, s, hw::default_profile("h200"), o);
  CHECK(b.gradients > 0);
  CHECK(b.activations > 0);
  CHECK(b.peak_allocated() == doctest::Approx(11.50e9).epsilon(0.05));
}

// Llama 3.1 8B on four pipeline stages of 8 layers, one sequence of 2048 per micro-batch.
struct FourStages {
  model::ModelSpec m = model::load_model("llama3.1-8b");
  hw::HardwareProfile prof = hw::default_profile("h100-sxm");
  model::ParallelPlan p;
  model::TrainingSetup s;
  FourStages() {
    p.pp = 4;
    p.stage_layers = {8, 8, 8, 8};
    s.seq_len = 2048;
    s.micro_batch_size = 1;
  }
};

TEST_CASE("FSDP under pipeline parallelism keeps the stage gathered and its gradients in fp32") {
  // torchtitan (reshard_after_forward = False with pp) and PyTorch's pipelining (no gradient
  // sync before the last micro-batch): 2 B per parameter of the stage gathered plus 4 B of
  // accumulated fp32 gradients, in place of two layers gathered at a time. Only with pp > 1,
  // ZeRO-3 over more than one GPU and more than one micro-batch.
  FourStages t;
  auto& [m, prof, p, s] = t;
  p.dp = 8;
  p.zero_stage = 3;
  p.recompute = model::Recompute::full;
  s.global_batch_size = 8 * 8; // 8 micro-batches per stage
  FrameworkProfile fw = load_framework("fsdp");
  REQUIRE(fw.pp_unsharded_stage);
  MemoryOptions with, without;
  with.framework = std::make_shared<const FrameworkProfile>(fw);
  fw.pp_unsharded_stage = false;
  without.framework = std::make_shared<const FrameworkProfile>(fw);
  const auto a = estimate_memory(m, p, s, prof, with);
  const auto b = estimate_memory(m, p, s, prof, without);
  const double params = a.params_on_gpu;
  const double layer = model::count_params(m).per_layer;
  CHECK(a.stage == b.stage);
  CHECK(a.buffers - b.buffers == doctest::Approx(6 * params - 2 * 2 * layer).epsilon(1e-9));
  // One micro-batch per step, or pp = 1: unchanged.
  s.global_batch_size = 8;
  CHECK(estimate_memory(m, p, s, prof, with).buffers ==
        doctest::Approx(estimate_memory(m, p, s, prof, without).buffers));
}

TEST_CASE("interleaved pipeline: the first stage holds 1 + (p-1)/(pv) times 1F1B's, never more "
          "micro-batches than the step has") {
  // Korthikanti et al. 2022 Sec. 4.2.3 for many micro-batches; with as many micro-batches as
  // stages the first rank runs every forward before its first backward: all of them, as 1F1B.
  FourStages t;
  auto& [m, prof, p, s] = t;
  p.dp = 1;
  p.interleave = 2;
  s.global_batch_size = 64; // 64 micro-batches
  const auto many = estimate_memory(m, p, s, prof, {});
  CHECK(many.in_flight_micro_batches == doctest::Approx(4 * (1 + 3.0 / 8)));
  s.global_batch_size = 4; // as many micro-batches as stages
  const auto few = estimate_memory(m, p, s, prof, {});
  CHECK(few.in_flight_micro_batches == doctest::Approx(4));
}

namespace {
// Llama 3 8B (32 layers) on 8 H100 by data parallelism, 4096 tokens, Megatron-Core.
struct MegatronLlama8b : StepConfig {
  MegatronLlama8b() : StepConfig("llama3-8b", "h100-sxm") {
    p.dp = 8;
    s.seq_len = 4096;
    o.framework = std::make_shared<const FrameworkProfile>(load_framework("megatron"));
  }
};
} // namespace

TEST_CASE("activation offload: n layers to host, one layer's worth double-buffered on the GPU") {
  MegatronLlama8b x;
  auto& [m, prof, p, s, o] = x;
  const auto none = estimate_memory(m, p, s, prof, o);
  s.offload_activation_layers = 10;
  const auto ten = estimate_memory(m, p, s, prof, o);
  s.offload_activation_layers = 1;
  const auto one = estimate_memory(m, p, s, prof, o);
  const double per_layer = ten.host_activation_bytes / 10;
  CHECK(per_layer > 0);
  CHECK(none.host_activation_bytes == 0);
  CHECK(none.activations - ten.activations == doctest::Approx(9 * per_layer).epsilon(1e-12));
  CHECK(one.activations == doctest::Approx(none.activations).epsilon(1e-12));
  CHECK(one.host_activation_bytes == doctest::Approx(per_layer).epsilon(1e-12));
  CHECK(ten.weights == none.weights);
  CHECK(ten.total < none.total);
}

TEST_CASE("full recompute of some layers: saved bytes mix the two kinds of layer") {
  MegatronLlama8b x;
  auto& [m, prof, p, s, o] = x;
  p.recompute = model::Recompute::none;
  const auto none = estimate_memory(m, p, s, prof, o);
  p.recompute = model::Recompute::full;
  const auto full = estimate_memory(m, p, s, prof, o);
  s.recompute_layers = 24;
  const auto most = estimate_memory(m, p, s, prof, o);
  s.recompute_layers = 16;
  const auto half = estimate_memory(m, p, s, prof, o);
  // Each plain layer keeps what no recompute keeps instead of its input: 16 of them add twice
  // what 8 add (the re-made layer in backward is full recompute's in both).
  CHECK(half.activations - full.activations ==
        doctest::Approx(2 * (most.activations - full.activations)).epsilon(1e-9));
  CHECK(most.activations > full.activations);
  CHECK(most.activations < none.activations);
  CHECK(most.weights == full.weights);
  // PyTorch's caching allocator: the simulated peak moves the same way (a model whose peak is
  // the activations', not the optimizer step's).
  const auto small = model::load_model("llama3.2-1b");
  o.framework = std::make_shared<const FrameworkProfile>(load_framework("pytorch"));
  p.dp = 1;
  s.micro_batch_size = 8;
  s.recompute_layers = 0;
  const auto eager_full = estimate_memory(small, p, s, prof, o);
  s.recompute_layers = 8;
  const auto eager_half = estimate_memory(small, p, s, prof, o);
  p.recompute = model::Recompute::none;
  s.recompute_layers = 0;
  const auto eager_none = estimate_memory(small, p, s, prof, o);
  CHECK(eager_half.peak_allocated() > eager_full.peak_allocated());
  CHECK(eager_half.peak_allocated() < eager_none.peak_allocated());
  CHECK(eager_half.peak_reserved() > eager_full.peak_reserved());
  CHECK(eager_half.peak_reserved() < eager_none.peak_reserved());
}

TEST_CASE("the least full recompute that fits: the boundary between two layer counts") {
  MegatronLlama8b x;
  auto& [m, prof, p, s, o] = x;
  s.micro_batch_size = 2;
  s.seq_len = 8192;
  for (const char* framework : {"megatron", "fsdp"}) { // analytic; caching allocator
    CAPTURE(framework);
    o.framework = std::make_shared<const FrameworkProfile>(load_framework(framework));
    p.zero_stage = 3;
    auto total = [&](model::Recompute rc, std::int64_t n) {
      model::ParallelPlan q = p;
      model::TrainingSetup t = s;
      q.recompute = rc;
      t.recompute_layers = n;
      MemoryOptions capped = o;
      capped.device_bytes = 84.94e9;
      return estimate_memory(m, q, t, prof, capped).total;
    };
    const double none = total(model::Recompute::none, 0), all = total(model::Recompute::full, 0);
    REQUIRE(all < none);
    // A capacity between the two: some layers, not all, must be re-run.
    const double cap = 0.5 * (none + all);
    MemoryOptions mo = o;
    mo.device_bytes = 84.94e9;
    const std::int64_t n = min_recompute_layers(m, p, s, prof, cap, mo);
    REQUIRE(n > 0);
    REQUIRE(n < 32);
    mo.allocator_cap_bytes = 0;
    auto fits = [&](std::int64_t k) {
      model::ParallelPlan q = p;
      model::TrainingSetup t = s;
      q.recompute = model::Recompute::full;
      t.recompute_layers = k;
      MemoryOptions c = o;
      c.device_bytes = cap;
      return estimate_memory(m, q, t, prof, c).total <= cap;
    };
    CHECK(fits(n));
    CHECK_FALSE(fits(n - 1));
    CHECK(min_recompute_layers(m, p, s, prof, none * 1.01, mo) == 0);
    CHECK(min_recompute_layers(m, p, s, prof, all * 0.5, mo) == -1);
  }
}

TEST_CASE("Megatron-Core: FP8 primary weights and the gradient buffers' dtype") {
  // Megatron-Bridge's FP8 recipes keep the FP8 linears' parameters as FP8 tensors alone
  // (fp8_param_gather): 2 B less per such parameter than a 16-bit weight beside its FP8
  // copies. Its main_grad buffers are fp32 (4 B) unless the run reduces in bf16 (2 B).
  const auto m = model::load_model("llama3-8b");
  const auto prof = hw::default_profile("h100-sxm");
  model::ParallelPlan p;
  p.dp = 8;
  p.zero_stage = 1;
  model::TrainingSetup s;
  s.seq_len = 4096;
  s.precision = Precision::fp8_current;
  FrameworkProfile fw = load_framework("megatron");
  REQUIRE(fw.fp8_param_gather);
  REQUIRE(fw.megatron_main_grads);
  MemoryOptions with, without;
  with.framework = std::make_shared<const FrameworkProfile>(fw);
  fw.fp8_param_gather = false;
  without.framework = std::make_shared<const FrameworkProfile>(fw);
  const auto a = estimate_memory(m, p, s, prof, with);
  const auto b = estimate_memory(m, p, s, prof, without);
  const double linear = static_cast<double>(m.num_layers) * model::count_params(m).per_layer;
  CHECK((b.weights - a.weights) / 2 == doctest::Approx(linear).epsilon(1e-3)); // norms aside
  CHECK(a.gradients == doctest::Approx(4 * a.params_on_gpu).epsilon(1e-12));
  CHECK(a.activations == b.activations);
  // Without FP8 nothing changes.
  s.precision = Precision::bf16_mixed;
  CHECK(estimate_memory(m, p, s, prof, with).weights ==
        estimate_memory(m, p, s, prof, without).weights);
  // The gradient buffers in bf16: half the bytes; fp32 is the default.
  s.grad_reduce_bytes = 2;
  const auto bf16 = estimate_memory(m, p, s, prof, with);
  s.grad_reduce_bytes = 4;
  const auto fp32 = estimate_memory(m, p, s, prof, with);
  s.grad_reduce_bytes = 0;
  const auto dflt = estimate_memory(m, p, s, prof, with);
  CHECK(bf16.gradients == doctest::Approx(fp32.gradients / 2).epsilon(1e-12));
  CHECK(fp32.gradients == dflt.gradients);
  // A framework without Megatron-Core's buffers ignores it.
  MemoryOptions fsdp;
  fsdp.framework = std::make_shared<const FrameworkProfile>(load_framework("fsdp"));
  s.grad_reduce_bytes = 2;
  const auto f2 = estimate_memory(m, p, s, prof, fsdp);
  s.grad_reduce_bytes = 0;
  CHECK(f2.gradients == estimate_memory(m, p, s, prof, fsdp).gradients);
}
