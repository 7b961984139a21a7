// Step simulator: collective formulas, pipeline bubble, ZeRO-3 traffic, roofline bounds and
// invariants (more bandwidth or peak never slows a step; the breakdown sums to the step).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/errors.hpp"
#include "hardware/load.hpp"
#include "model/load.hpp"
#include "simulate/collectives.hpp"
#include "simulate/costs.hpp"
#include "simulate/roofline.hpp"
#include "simulate/step.hpp"

using namespace trainsim;
using namespace trainsim::sim;

namespace {
hw::ClusterSpec node_of(const char* cluster, std::int64_t nodes) {
  auto c = hw::load_cluster(cluster);
  c.num_nodes = nodes;
  return c;
}
} // namespace

TEST_CASE("nccl-tests bus-bandwidth factors") {
  CHECK(busbw_factor(Collective::all_reduce, 8) == doctest::Approx(1.75)); // 2*7/8
  CHECK(busbw_factor(Collective::all_gather, 8) == doctest::Approx(0.875));
  CHECK(busbw_factor(Collective::reduce_scatter, 4) == doctest::Approx(0.75));
  CHECK(busbw_factor(Collective::broadcast, 8) == 1.0);
  CHECK(busbw_factor(Collective::all_reduce, 1) == 0.0);
}

TEST_CASE("ring all-reduce: 2(P-1) alpha + 2(P-1)/P n / B; P = 1 costs nothing") {
  const auto cluster = node_of("dgx-h100", 1);
  const auto prof = hw::default_profile("h100-sxm");
  const double n = 1e9;
  const auto c = collective_cost(Collective::all_reduce, n, {8, 8}, cluster, prof, Algorithm::ring);
  const double B = 450e9 * prof.intra_node_busbw_fraction;
  CHECK(c.time_s == doctest::Approx(14 * prof.intra_node_step_latency_s + 1.75 * n / B));
  CHECK(c.level == LinkLevel::intra_node);
  CHECK(collective_cost(Collective::all_reduce, n, {1, 1}, cluster, prof).time_s == 0.0);
  // Reduce-scatter + all-gather = all-reduce volume.
  const auto rs = collective_cost(Collective::reduce_scatter, n, {8, 8}, cluster, prof);
  const auto ag = collective_cost(Collective::all_gather, n, {8, 8}, cluster, prof);
  CHECK(rs.bandwidth_s + ag.bandwidth_s == doctest::Approx(c.bandwidth_s));
  // The notes' ring check: going from 2 to 4 to 6 ranks scales bandwidth time 1 : 1.5 : 1.67.
  const double t2 =
      collective_cost(Collective::all_reduce, n, {2, 2}, cluster, prof, Algorithm::ring)
          .bandwidth_s;
  const double t4 =
      collective_cost(Collective::all_reduce, n, {4, 4}, cluster, prof, Algorithm::ring)
          .bandwidth_s;
  const double t6 =
      collective_cost(Collective::all_reduce, n, {6, 6}, cluster, prof, Algorithm::ring)
          .bandwidth_s;
  CHECK(t4 / t2 == doctest::Approx(1.5));
  CHECK(t6 / t2 == doctest::Approx(5.0 / 3.0));
}

TEST_CASE("a collective spanning nodes is bound by the network") {
  const auto cluster = node_of("dgx-h100", 4);
  const auto prof = hw::default_profile("h100-sxm");
  const auto inside = collective_cost(Collective::all_reduce, 1e9, {8, 8}, cluster, prof);
  const auto across = collective_cost(Collective::all_reduce, 1e9, {32, 1}, cluster, prof);
  CHECK(across.level == LinkLevel::inter_node);
  CHECK(across.busbw_bytes_per_s == doctest::Approx(50e9 * prof.inter_node_busbw_fraction));
  CHECK(across.time_s > inside.time_s);
  // Tree all-reduce: fewer latency steps, more bandwidth time than ring for large P.
  const auto tree =
      collective_cost(Collective::all_reduce, 8, {32, 1}, cluster, prof, Algorithm::tree);
  const auto ring =
      collective_cost(Collective::all_reduce, 8, {32, 1}, cluster, prof, Algorithm::ring);
  CHECK(tree.latency_s < ring.latency_s);
}

TEST_CASE("an all-to-all across nodes: each member's off-node share goes through its own NIC") {
  // 64 ranks on 8 nodes of 8: a member sends 56/64 of its bytes off the node, over one NIC,
  // whatever the ring bandwidth of the node's 8 NICs would be for a ring collective.
  const auto cluster = node_of("dgx-h100", 8);
  const auto prof = hw::default_profile("h100-sxm");
  const double n = 1e9, nic = 50e9 * prof.inter_node_busbw_fraction;
  const auto a2a = collective_cost(Collective::all_to_all, n, {64, 8}, cluster, prof);
  CHECK(a2a.level == LinkLevel::inter_node);
  CHECK(a2a.bandwidth_s == doctest::Approx(n * 56.0 / 64.0 / nic));
  // Two nodes: half the bytes leave; a ring all-gather of the same bytes still gets 8 NICs.
  const auto two =
      collective_cost(Collective::all_to_all, n, {16, 8}, node_of("dgx-h100", 2), prof);
  CHECK(two.bandwidth_s == doctest::Approx(n * 8.0 / 16.0 / nic));
  const auto ag = collective_cost(Collective::all_gather, n, {64, 8}, cluster, prof);
  CHECK(ag.bandwidth_s < a2a.bandwidth_s);
}

TEST_CASE("a measured collective fit: the regime covering the message size is used") {
  const auto cluster = node_of("dgx-h200", 1);
  auto prof = hw::default_profile("h200");
  hw::CollectiveFit f;
  f.op = Collective::all_reduce;
  f.level = LinkLevel::intra_node;
  f.num_ranks = 2;
  // Below 1 MiB: 7 us + n / 150 GB/s; from 1 MiB: 20 us + n / 320 GB/s (all-reduce factor at
  // P = 2 is 2 * 1 / 2 = 1).
  f.regimes = {{0, 7e-6, 150e9}, {1048576, 20e-6, 320e9}};
  f.alpha_s = 20e-6;
  f.busbw_bytes_per_s = 320e9;
  prof.collective_fits = {f};
  auto cost = [&](double bytes) {
    return collective_cost(Collective::all_reduce, bytes, {2, 2}, cluster, prof, Algorithm::ring);
  };
  // 64 KiB: 7 us + 65536 / 150e9 s = 7.437 us.
  CHECK(cost(65536).from_fit);
  CHECK(cost(65536).time_s == doctest::Approx(7e-6 + 65536 / 150e9).epsilon(1e-12));
  // The boundary belongs to the upper regime; one byte below it, to the lower one.
  CHECK(cost(1048575).latency_s == 7e-6);
  CHECK(cost(1048575).busbw_bytes_per_s == 150e9);
  CHECK(cost(1048576).latency_s == 20e-6);
  CHECK(cost(1048576).busbw_bytes_per_s == 320e9);
  // 1 GiB: 20 us + 2^30 / 320e9 s = 20 us + 3355.44 us.
  CHECK(cost(1073741824).time_s == doctest::Approx(20e-6 + 1073741824 / 320e9).epsilon(1e-12));
  // An op without a fit keeps the datasheet model.
  CHECK_FALSE(collective_cost(Collective::all_gather, 65536, {2, 2}, cluster, prof).from_fit);
  // A fit without regimes (built in code) is the one line (alpha_s, busbw_bytes_per_s).
  prof.collective_fits[0].regimes.clear();
  CHECK(cost(65536).latency_s == 20e-6);
}

TEST_CASE("roofline: ReLU is memory-bound, a big GEMM compute-bound") {
  const auto gpu = hw::load_gpu("h100-sxm");
  const auto prof = hw::default_profile("h100-sxm");
  const auto big = gemm_cost(8192, 8192, 8192, Dtype::bf16, gpu, prof);
  CHECK(big.compute_bound);
  // peak fraction x wave quantization (tiles over 132 SMs) x k / (k + k_half).
  const double tiles = std::ceil(8192 / prof.gemm_tile_m) * std::ceil(8192 / prof.gemm_tile_n);
  const double waves = std::ceil(tiles / 132);
  CHECK(big.efficiency == doctest::Approx(prof.gemm_peak_fraction[Dtype::bf16] * tiles /
                                          (waves * 132) * 8192 / (8192 + prof.gemm_k_half)));
  const auto skinny = gemm_cost(16, 8192, 8192, Dtype::bf16, gpu, prof);
  CHECK(skinny.efficiency < big.efficiency);
  model::Op relu;
  relu.name = "relu";
  relu.kind = model::OpKind::elementwise;
  relu.fwd_exec_flops = 1 << 20;
  relu.fwd_bytes = 4.0 * (1 << 20); // bf16 in + out: intensity 0.25 FLOP/byte
  const auto c = op_cost(relu, Pass::forward, gpu, prof);
  CHECK_FALSE(c.compute_bound);
}

namespace {
struct Job {
  model::ModelSpec m = model::load_model("llama3-8b");
  hw::ClusterSpec cluster = node_of("dgx-h100", 2);
  hw::GpuSpec gpu = hw::load_gpu("h100-sxm");
  hw::HardwareProfile prof = hw::default_profile("h100-sxm");
  model::ParallelPlan plan;
  model::TrainingSetup setup;
  Job() {
    plan.tp = 2;
    plan.pp = 2;
    plan.dp = 4;
    setup.seq_len = 4096;
    setup.micro_batch_size = 1;
    setup.global_batch_size = 64;
  }
  StepEstimate run(const StepOptions& o = {}) const {
    return estimate_step(m, cluster, gpu, prof, plan, setup, o);
  }
};
} // namespace

TEST_CASE("GEMM k_half scales with the dtype's compute rate; attention with its loop length") {
  const auto gpu = hw::load_gpu("h200");
  auto prof = hw::default_profile("h200");
  prof.gemm_k_half = 256;
  // fp32 runs at peak_fp32 / peak_bf16 of the bf16 rate: its k_half shrinks by that ratio.
  const double r = gpu.peak_flops_per_s[Dtype::fp32] / gpu.peak_flops_per_s[Dtype::bf16];
  const auto b = gemm_cost(4096, 4096, 64, Dtype::bf16, gpu, prof);
  const auto f = gemm_cost(4096, 4096, 64, Dtype::fp32, gpu, prof);
  CHECK(b.efficiency / prof.gemm_peak_fraction[Dtype::bf16] ==
        doctest::Approx(gemm_cost(4096, 4096, 4096, Dtype::bf16, gpu, prof).efficiency /
                        prof.gemm_peak_fraction[Dtype::bf16] * (64.0 / (64 + 256)) /
                        (4096.0 / (4096 + 256))));
  CHECK(f.efficiency / prof.gemm_peak_fraction[Dtype::fp32] ==
        doctest::Approx(b.efficiency / prof.gemm_peak_fraction[Dtype::bf16] * (64 + 256) /
                        (64 + 256 * r)));
  // FlashAttention: efficiency x loop / (loop + kv_half), loop = keys (half when causal).
  prof.attention_fwd_peak_fraction = 0.3;
  prof.attention_kv_half = 0;
  const auto full = model::flash_attention_op("a", Dtype::bf16, 8, 16, 512, 512, 128, 16, false);
  const auto causal = model::flash_attention_op("a", Dtype::bf16, 8, 16, 512, 512, 128, 16, true);
  const double e0 = op_cost(full, Pass::forward, gpu, prof).efficiency;
  CHECK(op_cost(causal, Pass::forward, gpu, prof).efficiency == doctest::Approx(e0));
  prof.attention_kv_half = 256;
  CHECK(op_cost(full, Pass::forward, gpu, prof).efficiency ==
        doctest::Approx(e0 * 512 / (512 + 256)));
  CHECK(op_cost(causal, Pass::forward, gpu, prof).efficiency ==
        doctest::Approx(e0 * 256 / (256 + 256)));
}

TEST_CASE("the breakdown sums to the step time; MFU <= HFU <= 1") {
  Job j;
  for (auto r : {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
    j.plan.recompute = r;
    const auto e = j.run();
    CHECK(e.breakdown_s.total() == doctest::Approx(e.step_time_s).epsilon(1e-12));
    CHECK(e.mfu <= e.hfu);
    CHECK(e.hfu < 1.0);
    CHECK(e.tokens_per_step == 64.0 * 4096);
  }
}

TEST_CASE("selective recompute with flash re-runs the attention core's forward, nothing more") {
  Job j; // flash attention (the default)
  const auto none = j.run();
  j.plan.recompute = model::Recompute::selective;
  const auto sel = j.run();
  // The re-run is the core's forward: more than nothing, far less than a layer's forward.
  CHECK(none.breakdown_s.recompute == 0);
  CHECK(sel.breakdown_s.recompute > 0);
  CHECK(sel.breakdown_s.recompute < 0.5 * sel.breakdown_s.forward);
  CHECK(sel.hfu > none.hfu);
  CHECK(sel.mfu == doctest::Approx(none.mfu * none.step_time_s / sel.step_time_s));
  CHECK(sel.memory.total == doctest::Approx(none.memory.total)); // what it drops stays saved
  j.plan.recompute = model::Recompute::full; // the whole layer's forward re-runs
  CHECK(j.run().breakdown_s.recompute > 2 * sel.breakdown_s.recompute);
}

TEST_CASE("FP8: MFU is over the fp8 peak and stays <= 1; GPUs without FP8 units refuse it") {
  Job j;
  j.setup.micro_batch_size = 4; // large GEMMs: near the fp8 roofline
  for (auto p : {model::Precision::fp8_delayed, model::Precision::fp8_current}) {
    j.setup.precision = p;
    const auto e = j.run();
    CHECK(e.peak_flops_per_s == j.gpu.peak_flops_per_s[Dtype::fp8]);
    CHECK(e.mfu == doctest::Approx(e.achieved_flops_per_s_per_gpu / e.peak_flops_per_s));
    CHECK(e.mfu <= e.hfu);
    CHECK(e.hfu < 1.0);
  }
  j.setup.precision = model::Precision::bf16_mixed;
  CHECK(j.run().peak_flops_per_s == j.gpu.peak_flops_per_s[Dtype::bf16]);
  // mxfp8 needs per-block scaling in the tensor cores (b200 has it, h100 not).
  j.setup.precision = model::Precision::mxfp8;
  CHECK_THROWS_WITH_AS(j.run(), doctest::Contains("mx_block_scaling"), ConfigError);
  CHECK_NOTHROW(check_precision_supported(hw::load_gpu("b200"), model::Precision::mxfp8));
  j.gpu = hw::load_gpu("a100-80g");
  j.setup.precision = model::Precision::fp8_delayed;
  CHECK_THROWS_WITH_AS(j.run(), doctest::Contains("a100-80g has no FP8 tensor cores"), ConfigError);
  CHECK_NOTHROW(check_precision_supported(j.gpu, model::Precision::bf16_mixed));
}

TEST_CASE("pipeline bubble: (p-1)/m of the pipelined work, divided by v when interleaved") {
  Job j;
  j.plan.tp = 1;
  j.plan.dp = 2;
  j.plan.pp = 8;
  j.setup.global_batch_size = 32; // m = 16 micro-batches
  const auto e = j.run();
  REQUIRE(e.micro_batches == 16);
  const double work = e.breakdown_s.forward + e.breakdown_s.backward + e.breakdown_s.recompute +
                      e.breakdown_s.tp_comm + e.breakdown_s.cp_comm + e.breakdown_s.ep_comm;
  CHECK(e.breakdown_s.bubble / work == doctest::Approx(7.0 / 16.0));
  j.plan.interleave = 2;
  const auto ei = j.run();
  CHECK(ei.breakdown_s.bubble / work == doctest::Approx(7.0 / 32.0));
  CHECK(ei.breakdown_s.pp_comm == doctest::Approx(2 * e.breakdown_s.pp_comm));
}

TEST_CASE("TP overlap hides the framework's share of the TP collectives, no more") {
  // tp_overlap_hidden_fraction 1 hides them all (up to the layer's compute), 0 none: the step
  // of a run without overlap; a share in between exposes the rest.
  Job j;
  j.plan.tp = 8;
  j.plan.pp = 1;
  j.plan.dp = 2;
  j.plan.sequence_parallel = true;
  auto with = [&](double hidden, bool overlap) {
    auto fw = std::make_shared<FrameworkProfile>(load_framework("fsdp"));
    fw->tp_overlap_hidden_fraction = hidden;
    StepOptions o;
    o.tp_overlap = overlap;
    o.framework = fw;
    return j.run(o).breakdown_s.tp_comm;
  };
  const double exposed = with(1, false);
  REQUIRE(exposed > 0);
  CHECK(with(0, true) == doctest::Approx(exposed));
  // The layers' collectives shrink linearly with the share (the embedding's and the head's
  // are not overlapped).
  const double quarter = with(0.25, true), half = with(0.5, true);
  CHECK(quarter < exposed);
  CHECK(exposed - quarter == doctest::Approx(quarter - half));
  CHECK(with(1, true) < 0.25 * exposed); // all hidden but what exceeds the layer's compute
  CHECK(with(0.25, false) == doctest::Approx(exposed)); // no overlap: the share is unused
}

TEST_CASE("ZeRO-3 moves 1.5x the data-parallel volume of all-reduce (one micro-batch)") {
  Job j;
  j.plan = {};
  j.plan.dp = 16;
  j.setup.global_batch_size = 16;
  j.plan.zero_stage = 0;
  const double ar = j.run().dp_volume_bytes;
  j.plan.zero_stage = 1;
  CHECK(j.run().dp_volume_bytes == doctest::Approx(ar));
  j.plan.zero_stage = 3;
  CHECK(j.run().dp_volume_bytes / ar == doctest::Approx(1.5));
}

TEST_CASE("context parallel: gradients are reduced and ZeRO shards over dp x cp") {
  // Context-parallel ranks hold the same weights: dp 1 x cp 8 reduces as many gradient bytes,
  // over as many ranks, as dp 8 x cp 1, and ZeRO-3 shards the model states 8 ways in both.
  Job j;
  j.plan = {};
  j.plan.zero_stage = 3;
  j.setup.seq_len = 32768;
  j.setup.global_batch_size = 0;
  j.plan.cp = 8;
  const StepEstimate cp = j.run();
  j.plan.cp = 1;
  j.plan.dp = 8;
  j.setup.seq_len = 4096;
  const StepEstimate dp = j.run();
  CHECK(cp.dp_volume_bytes > 0);
  CHECK(cp.dp_volume_bytes == doctest::Approx(dp.dp_volume_bytes));
  CHECK(cp.memory.weights == doctest::Approx(dp.memory.weights));
  CHECK(cp.memory.optimizer == doctest::Approx(dp.memory.optimizer));
  CHECK(cp.memory.gradients == doctest::Approx(dp.memory.gradients));
}

TEST_CASE("more bandwidth or more peak never makes a step slower") {
  Job j;
  j.plan.recompute = model::Recompute::selective;
  const double base = j.run().step_time_s;
  {
    Job k = j;
    k.gpu.peak_flops_per_s[Dtype::bf16] *= 2;
    CHECK(k.run().step_time_s <= base);
  }
  {
    Job k = j;
    k.gpu.hbm_bandwidth_bytes_per_s *= 2;
    CHECK(k.run().step_time_s <= base);
  }
  {
    Job k = j;
    k.cluster.intra_node_bandwidth_bytes_per_s *= 2;
    k.cluster.inter_node_bandwidth_bytes_per_s *= 2;
    CHECK(k.run().step_time_s <= base);
  }
}

TEST_CASE("bucketed overlap hides data-parallel communication; one huge bucket cannot") {
  Job j;
  j.plan = {};
  j.plan.dp = 16;
  j.setup.global_batch_size = 16;
  StepOptions overlapped;
  overlapped.bucket_bytes = 25.0 * 1024 * 1024;
  StepOptions one_bucket;
  one_bucket.bucket_bytes = 1e15;
  StepOptions none;
  none.dp_overlap = false;
  StepOptions one_bucket_serial = one_bucket;
  one_bucket_serial.dp_overlap = false;
  const double a = j.run(overlapped).breakdown_s.dp_comm;
  const double b = j.run(one_bucket).breakdown_s.dp_comm;
  const double c = j.run(none).breakdown_s.dp_comm;
  CHECK(a < b);
  // One bucket is ready only when backward ends: nothing overlaps.
  CHECK(b == doctest::Approx(j.run(one_bucket_serial).breakdown_s.dp_comm));
  // Without overlap, many small buckets pay their latency on top: slower still.
  CHECK(c >= b);
}

TEST_CASE("queued launches: a short op costs the host's issue time, a long one body + GPU gap") {
  const auto gpu = hw::load_gpu("h200");
  auto prof = hw::default_profile("h200");
  const auto small = gemm_cost(256, 256, 256, Dtype::bf16, gpu, prof);
  const auto big = gemm_cost(8192, 8192, 8192, Dtype::bf16, gpu, prof);
  // Not measured (host fields 0): a queued op costs what it costs alone.
  CHECK(small.queued_s == doctest::Approx(small.time_s));
  prof.host_launch_s = 5e-6;
  prof.host_gemm_launch_s = 12e-6;
  prof.gpu_launch_gap_s = 1.5e-6;
  const auto small_q = gemm_cost(256, 256, 256, Dtype::bf16, gpu, prof);
  const auto big_q = gemm_cost(8192, 8192, 8192, Dtype::bf16, gpu, prof);
  CHECK(small_q.queued_s == doctest::Approx(12e-6)); // host-bound: cuBLAS's issue time
  CHECK(big_q.queued_s ==
        doctest::Approx(std::max(big_q.compute_s, big_q.memory_s) + 1.5e-6)); // GPU-bound
  CHECK(big_q.time_s == doctest::Approx(big.time_s)); // the op alone is unchanged
  model::Op relu;
  relu.name = "relu";
  relu.kind = model::OpKind::elementwise;
  relu.fwd_exec_flops = 1 << 10;
  relu.fwd_bytes = 4.0 * (1 << 10);
  CHECK(op_cost(relu, Pass::forward, gpu, prof).queued_s == doctest::Approx(5e-6)); // our kernel
}

TEST_CASE("overlapped buckets: equal buckets without interference match the closed form") {
  for (double c : {0.5e-3, 2e-3}) {
    const std::vector<double> s(8, c), bytes(8, 1.0);
    const BucketOverlap o = overlap_buckets(s, bytes, 10e-3, true, 1.0, 1.0);
    CHECK(o.exposed_s == doctest::Approx(exposed_bucketed_s(8, c, 10e-3, true)));
    CHECK(o.slowdown_s == 0);
    CHECK(overlap_buckets(s, bytes, 10e-3, false, 0.5, 0.5).exposed_s == doctest::Approx(8 * c));
  }
}

TEST_CASE("overlapped buckets: interference stretches communication and slows compute") {
  // One bucket of 4 ms ready at the window's middle (it holds the first half of the bytes; the
  // second, empty-cost bucket ends at the window). At comm rate 0.5 it needs 8 ms of wall
  // time but only 5 ms of window remain: 2.5 ms of its work is done beside compute, 1.5 ms after.
  const std::vector<double> s{4e-3, 0.0}, bytes{1.0, 1.0};
  const BucketOverlap o = overlap_buckets(s, bytes, 10e-3, true, 0.8, 0.5);
  CHECK(o.overlapped_s == doctest::Approx(5e-3));
  CHECK(o.exposed_s == doctest::Approx(1.5e-3));
  CHECK(o.slowdown_s == doctest::Approx(0.2 * 5e-3));
  // Rates 1: the bucket finishes at 9 ms, nothing exposed, nothing slowed.
  const BucketOverlap free = overlap_buckets(s, bytes, 10e-3, true, 1.0, 1.0);
  CHECK(free.exposed_s == doctest::Approx(0.0));
  CHECK(free.slowdown_s == doctest::Approx(0.0));
}

TEST_CASE("data parallel: the slowdown of overlapped buckets lands in backward") {
  Job j;
  j.plan = {};
  j.plan.dp = 8;
  j.setup.global_batch_size = 8;
  const StepEstimate free = j.run();
  j.prof.overlap_compute_rate = 0.75;
  j.prof.overlap_comm_rate = 0.7;
  const StepEstimate shared = j.run();
  CHECK(shared.dp_overlap_slowdown_s > 0);
  CHECK(shared.breakdown_s.backward ==
        doctest::Approx(free.breakdown_s.backward + shared.dp_overlap_slowdown_s));
  CHECK(shared.step_time_s > free.step_time_s);
  CHECK(shared.breakdown_s.total() == doctest::Approx(shared.step_time_s));
}

TEST_CASE("overlap_equal_buckets equals the per-bucket walk on equal buckets") {
  for (double nb : {1.0, 2.0, 7.0, 64.0, 1000.0})
    for (double c : {1e-6, 1e-4, 1e-3, 5e-2})
      for (double w : {0.0, 1e-3, 0.1, 2.0})
        for (double rate : {1.0, 0.713})
          for (bool overlap : {true, false}) {
            CAPTURE(nb);
            CAPTURE(c);
            CAPTURE(w);
            const std::vector<double> s(static_cast<std::size_t>(nb), c),
                bytes(static_cast<std::size_t>(nb), 1e6);
            const BucketOverlap walk = overlap_buckets(s, bytes, w, overlap, 0.762, rate);
            const BucketOverlap closed = overlap_equal_buckets(nb, c, w, overlap, 0.762, rate);
            CHECK(closed.exposed_s == doctest::Approx(walk.exposed_s).epsilon(1e-9));
            CHECK(closed.overlapped_s == doctest::Approx(walk.overlapped_s).epsilon(1e-9));
            CHECK(closed.slowdown_s == doctest::Approx(walk.slowdown_s).epsilon(1e-9));
          }
}

TEST_CASE("op roles, not names, drive the accounting: renamed ops give the same results") {
  for (const char* name : {"llama3-8b", "mixtral-8x7b", "gpt2", "deepseek-v3", "gpt-oss-20b",
                           "gemma2-9b", "qwen3-30b-a3b", "olmo2-7b", "phi3-mini", "nemotron-4-15b"})
    for (auto attention : {model::AttentionImpl::flash, model::AttentionImpl::naive}) {
      CAPTURE(name);
      const auto m = model::load_model(name);
      model::ParallelPlan plan;
      plan.tp = 2;
      plan.cp = 2;
      if (m.is_moe()) { // the all-to-all ops carry roles too
        plan.ep = 2;
        plan.dp = 2;
      }
      model::TrainingSetup setup;
      setup.seq_len = 1024;
      setup.attention = attention;
      const auto ops = model::build_ops(m, model::make_op_context(plan, setup));
      auto renamed = ops;
      std::vector<std::vector<model::Op>*> lists{&renamed.embedding, &renamed.head, &renamed.mtp};
      for (auto& kind : renamed.layers)
        lists.push_back(&kind.ops);
      for (auto* list : lists)
        for (auto& op : *list) {
          CHECK(op.role != model::OpRole::other); // every model op has a role
          op.name = "renamed." + op.name;
        }
      const auto a = account_micro_batch(m, ops, plan, setup);
      const auto b = account_micro_batch(m, renamed, plan, setup);
      for (int r = 0; r < 3; ++r) {
        CHECK(a.layer_act[r] == b.layer_act[r]);
        CHECK(a.layer_recompute_flops[r] == b.layer_recompute_flops[r]);
      }
      CHECK(a.layer_expert_params == b.layer_expert_params);
      CHECK(a.head_act == b.head_act);
      CHECK(a.layer_act[2] > 0); // full recompute keeps the layer input
      const auto cluster = hw::load_cluster("dgx-h100");
      const auto gpu = hw::load_gpu("h100-sxm");
      const auto prof = hw::default_profile("h100-sxm");
      const auto ta = time_micro_batch(m, ops, plan, setup, gpu, prof, cluster);
      const auto tb = time_micro_batch(m, renamed, plan, setup, gpu, prof, cluster);
      CHECK(ta.layer_cp == tb.layer_cp);
      CHECK(ta.layer_ep == tb.layer_ep);
      CHECK(ta.head_fwd == tb.head_fwd);
      CHECK(ta.layer_recompute[1] == tb.layer_recompute[1]);
      if (attention == model::AttentionImpl::naive)
        CHECK(ta.layer_recompute[1] > 0);
    }
}

// Mixtral 8x7B on one H100 node, experts over all 8 GPUs (dp 8, ep 8), sequences of 4096.
struct MixtralEp8 {
  model::ModelSpec m = model::load_model("mixtral-8x7b");
  hw::ClusterSpec cluster = node_of("dgx-h100", 1);
  hw::GpuSpec gpu = hw::load_gpu("h100-sxm");
  hw::HardwareProfile prof = hw::default_profile("h100-sxm");
  model::ParallelPlan plan = [] {
    model::ParallelPlan p;
    p.dp = 8;
    p.ep = 8;
    return p;
  }();
  model::TrainingSetup setup = [] {
    model::TrainingSetup t;
    t.seq_len = 4096;
    return t;
  }();
};

TEST_CASE("expert parallel: dispatch + combine all-to-alls both ways; the busiest rank sets it") {
  MixtralEp8 x;
  auto& [m, cluster, gpu, prof, plan, setup] = x;
  auto layer_ep = [&](const model::TrainingSetup& s) {
    const auto ops = model::build_ops(m, model::make_op_context(plan, s));
    return time_micro_batch(m, ops, plan, s, gpu, prof, cluster).layer_ep;
  };
  // Balanced: 4 all-to-alls (dispatch, combine; forward, backward) of each rank's routed
  // tokens, b s top_k h bytes.
  const double routed = 4096.0 * 2 * 4096 * 2;
  const double one =
      collective_cost(Collective::all_to_all, routed, place_groups(plan, cluster).ep, cluster, prof)
          .time_s;
  CHECK(layer_ep(setup) == doctest::Approx(4 * one).epsilon(1e-12));
  // Imbalance: the busiest rank receives 1.5x, and everyone waits for it.
  auto hot = setup;
  hot.moe_imbalance_factor = 1.5;
  const double hot_one = collective_cost(Collective::all_to_all, 1.5 * routed,
                                         place_groups(plan, cluster).ep, cluster, prof)
                             .time_s;
  CHECK(layer_ep(hot) == doctest::Approx(4 * hot_one).epsilon(1e-12));
  CHECK(layer_ep(hot) > layer_ep(setup));
  // And its experts run 1.5x the rows: the layer's compute grows, model FLOPs do not.
  const auto ops = model::build_ops(m, model::make_op_context(plan, setup));
  const auto hot_ops = model::build_ops(m, model::make_op_context(plan, hot));
  CHECK(time_micro_batch(m, hot_ops, plan, hot, gpu, prof, cluster).layer_fwd >
        time_micro_batch(m, ops, plan, setup, gpu, prof, cluster).layer_fwd);
  CHECK(model::sum_over_layers(hot_ops, model::sum_fwd_flops) ==
        doctest::Approx(model::sum_over_layers(ops, model::sum_fwd_flops)).epsilon(1e-12));
}

TEST_CASE("mixed layer kinds: per-layer means x layers are the sums over kinds") {
  // DeepSeek-V3: 3 dense and 58 MoE layers; the accounting's per-layer figures are means.
  const auto m = model::load_model("deepseek-v3");
  model::ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 8;
  plan.ep = 8;
  model::TrainingSetup setup;
  setup.seq_len = 4096;
  const auto ops = model::build_ops(m, model::make_op_context(plan, setup));
  REQUIRE(ops.layers.size() == 2);
  const auto a = account_micro_batch(m, ops, plan, setup);
  const double saved =
      3 * model::saved_bytes(ops.layers[0].ops) + 58 * model::saved_bytes(ops.layers[1].ops);
  CHECK(61 * a.layer_act[0] == doctest::Approx(saved).epsilon(1e-12));
  CHECK(a.layer_saved_all == model::saved_bytes(ops.layers[1].ops)); // the larger kind
  double experts = 0;
  for (const auto& op : ops.layers[1].ops)
    if (model::is_routed_expert(op.role))
      experts += op.params;
  CHECK(61 * a.layer_expert_params == doctest::Approx(58 * experts).epsilon(1e-12));
  // The MTP module's weights sit with the head, its routed experts split over ep.
  double mtp_experts = 0;
  for (const auto& op : ops.mtp)
    if (model::is_routed_expert(op.role))
      mtp_experts += op.params;
  CHECK(a.head_params == doctest::Approx(model::sum_params(ops.head) + model::sum_params(ops.mtp) -
                                         mtp_experts * 7 / 8)
                             .epsilon(1e-12));
  const auto cluster = node_of("dgx-h100", 1);
  const auto gpu = hw::load_gpu("h100-sxm");
  const auto prof = hw::default_profile("h100-sxm");
  const auto t = time_micro_batch(m, ops, plan, setup, gpu, prof, cluster);
  CHECK(t.layer_ep > 0);
  CHECK(t.layer_fwd > 0);
}

TEST_CASE("combined 1F1B (ep_overlap): each all-to-all hides behind the other pass's compute") {
  MixtralEp8 x;
  auto& [m, cluster, gpu, prof, plan, setup] = x;
  setup.micro_batch_size = 1;
  setup.global_batch_size = 32; // m = 4 micro-batches per rank
  const auto ops = model::build_ops(m, model::make_op_context(plan, setup));
  const auto t = time_micro_batch(m, ops, plan, setup, gpu, prof, cluster);
  // The all-to-alls split by pass: dispatch and combine, 2 each way, of b s top_k h bytes.
  const double one = collective_cost(Collective::all_to_all, 4096.0 * 2 * 4096 * 2,
                                     place_groups(plan, cluster).ep, cluster, prof)
                         .time_s;
  CHECK(t.layer_ep_a2a_fwd == doctest::Approx(2 * one).epsilon(1e-12));
  CHECK(t.layer_ep_a2a_bwd == doctest::Approx(2 * one).epsilon(1e-12));
  CHECK(t.layer_ep >= t.layer_ep_a2a_fwd + t.layer_ep_a2a_bwd);

  StepOptions off, on;
  on.ep_overlap = true;
  const auto a = estimate_step(m, cluster, gpu, prof, plan, setup, off);
  const auto b = estimate_step(m, cluster, gpu, prof, plan, setup, on);
  CHECK_FALSE(a.ep_overlap);
  CHECK(b.ep_overlap);
  // Without a pipeline every forward but the first runs merged with a backward: m - 1 pairs,
  // each hiding, per layer, the forward's all-to-alls up to the backward's compute and the
  // backward's up to the forward's.
  CHECK(b.ep_merged_pairs == 3);
  const double per_layer =
      std::min(t.layer_ep_a2a_fwd, t.layer_bwd) + std::min(t.layer_ep_a2a_bwd, t.layer_fwd);
  CHECK(per_layer > 0);
  const double hidden = 3 * static_cast<double>(m.num_layers) * per_layer;
  CHECK(b.ep_hidden_s == doctest::Approx(hidden).epsilon(1e-9));
  CHECK(a.breakdown_s.ep_comm - b.breakdown_s.ep_comm == doctest::Approx(hidden).epsilon(1e-9));
  CHECK(a.step_time_s - b.step_time_s == doctest::Approx(hidden).epsilon(1e-9));
  CHECK(b.breakdown_s.total() == doctest::Approx(b.step_time_s).epsilon(1e-12));
  CHECK(b.breakdown_s.ep_comm > 0); // the dispatcher's fixed cost and the unmerged passes stay
  // Where Megatron-Core does not run it, the option changes nothing and the rule says why.
  CHECK(ep_overlap_rule(plan).empty());
  auto dense = plan;
  dense.ep = 1;
  CHECK_FALSE(ep_overlap_rule(dense).empty());
  auto full = plan;
  full.recompute = model::Recompute::full;
  CHECK(ep_overlap_rule(full).find("full recompute") != std::string::npos);
  const auto fa = estimate_step(m, cluster, gpu, prof, full, setup, off);
  const auto fb = estimate_step(m, cluster, gpu, prof, full, setup, on);
  CHECK_FALSE(fb.ep_overlap);
  CHECK(fa.step_time_s == fb.step_time_s);
  auto piped = plan;
  piped.dp = 4;
  piped.pp = 2;
  piped.ep = 4;
  CHECK(ep_overlap_rule(piped).find("interleave") != std::string::npos);
  piped.interleave = 2;
  CHECK(ep_overlap_rule(piped).empty());
}

// Mixtral on one node, dense data parallelism (dp 8, no ep), under the megatron profile.
struct MegatronDp8 : MixtralEp8 {
  StepOptions o;
  MegatronDp8() {
    plan.ep = 1;
    setup.global_batch_size = 16;
    o.framework = std::make_shared<const FrameworkProfile>(load_framework("megatron"));
  }
  [[nodiscard]] StepEstimate step() const {
    return estimate_step(m, cluster, gpu, prof, plan, setup, o);
  }
};

TEST_CASE("Megatron-Core's gradient dtype sets the bytes data parallelism reduces") {
  MegatronDp8 x;
  const auto dflt = x.step();
  x.setup.grad_reduce_bytes = 2;
  const auto bf16 = x.step();
  x.setup.grad_reduce_bytes = 4;
  const auto fp32 = x.step();
  CHECK(bf16.dp_bytes == dflt.dp_bytes); // mixed precision reduced its 16-bit gradients
  CHECK(fp32.dp_bytes == doctest::Approx(2 * bf16.dp_bytes).epsilon(1e-12));
  CHECK(fp32.breakdown_s.dp_comm > bf16.breakdown_s.dp_comm);
  CHECK(fp32.memory.gradients == doctest::Approx(2 * bf16.memory.gradients).epsilon(1e-12));
}

// The saved tensors of one layer of `ops` whose id contains `part`, in bytes.
double saved_with(const std::vector<model::Op>& layer, const std::string& part) {
  double b = 0;
  for (const auto& op : layer)
    for (const auto& t : op.saved)
      if (t.id.find(part) != std::string::npos)
        b += t.bytes;
  return b;
}

TEST_CASE("Megatron-Core's recompute modules: what each drops and re-runs in an MoE layer") {
  MegatronDp8 x; // Mixtral: every layer MoE, flash attention; megatron: activation factor 1
  x.plan.ep = 8;
  x.plan.recompute = model::Recompute::selective;
  const auto ops = model::build_ops(x.m, model::make_op_context(x.plan, x.setup));
  REQUIRE(ops.layers.size() == 1);
  const auto& l = ops.layers.front().ops;
  const double act_out = saved_with(l, "moe.experts.act.out");
  const double norm_out = saved_with(l, "mlp.fc1.in"); // the pre-MLP norm's output (router)
  REQUIRE(act_out > 0);
  REQUIRE(norm_out > 0);
  auto with = [&](std::uint32_t modules) {
    x.setup.recompute_modules = modules;
    return account_micro_batch(x.m, ops, x.plan, x.setup, *x.o.framework);
  };
  auto times = [&](std::uint32_t modules) {
    x.setup.recompute_modules = modules;
    return time_micro_batch(x.m, ops, x.plan, x.setup, x.gpu, x.prof, x.cluster, *x.o.framework);
  };
  const int sel = static_cast<int>(model::Recompute::selective);
  const auto core = with(model::kRecomputeCoreAttn);
  // moe_act drops the experts' activation output (fc2's saved input), nothing else.
  CHECK(core.layer_act[sel] -
            with(model::kRecomputeCoreAttn | model::kRecomputeMoeAct).layer_act[sel] ==
        doctest::Approx(act_out));
  // layernorm drops the pre-MLP norm's output (the router's saved input): Transformer Engine
  // fuses the input norm into QKV, so that one has nothing to drop.
  CHECK(core.layer_act[sel] -
            with(model::kRecomputeCoreAttn | model::kRecomputeLayernorm).layer_act[sel] ==
        doctest::Approx(norm_out));
  // moe keeps the block's input (that norm output) and drops the rest of the block.
  const auto moe = with(model::kRecomputeCoreAttn | model::kRecomputeMoe);
  CHECK(core.layer_act[sel] - moe.layer_act[sel] ==
        doctest::Approx(saved_with(l, "moe.")).epsilon(1e-12));
  // mlp is a dense layer's; this model has none.
  CHECK(with(model::kRecomputeCoreAttn | model::kRecomputeMlp).layer_act[sel] ==
        core.layer_act[sel]);
  // Re-run time: the activation's forward; the whole block's forward, whose all-to-alls run
  // again; the flops follow.
  const auto tc = times(model::kRecomputeCoreAttn);
  const auto ta = times(model::kRecomputeCoreAttn | model::kRecomputeMoeAct);
  const auto tm = times(model::kRecomputeCoreAttn | model::kRecomputeMoe);
  double act_fwd = 0;
  for (const auto& op : l)
    if (op.role == model::OpRole::expert_act)
      act_fwd += framework_op_time(op, Pass::forward, x.gpu, x.prof, *x.o.framework).gpu_s;
  CHECK(ta.layer_recompute[sel] - tc.layer_recompute[sel] == doctest::Approx(act_fwd));
  CHECK(tm.layer_recompute[sel] > 10 * act_fwd);
  CHECK(tc.layer_ep_rerun_selective == 0);
  CHECK(tm.layer_ep_rerun_selective == doctest::Approx(tm.layer_ep_a2a_fwd));
  CHECK(moe.layer_recompute_flops[sel] > core.layer_recompute_flops[sel]);
  // The default reproduces selective recompute as it was: the attention core.
  CHECK(with(model::kRecomputeCoreAttn).layer_act[sel] ==
        with(model::kRecomputeCoreAttn).layer_act[static_cast<int>(model::Recompute::none)]);
  // In the step: less memory, more time, and nothing changes under another policy.
  x.setup.recompute_modules = model::kRecomputeCoreAttn;
  const auto step_core = x.step();
  x.setup.recompute_modules = model::kRecomputeCoreAttn | model::kRecomputeMoe;
  const auto step_moe = x.step();
  CHECK(step_moe.memory.activations < step_core.memory.activations);
  CHECK(step_moe.breakdown_s.recompute > step_core.breakdown_s.recompute);
  CHECK(step_moe.breakdown_s.ep_comm > step_core.breakdown_s.ep_comm);
  x.plan.recompute = model::Recompute::none;
  const auto none_moe = x.step();
  x.setup.recompute_modules = model::kRecomputeCoreAttn;
  const auto none_core = x.step();
  CHECK(none_moe.step_time_s == none_core.step_time_s);
  CHECK(none_moe.memory.total == none_core.memory.total);
}

TEST_CASE("Megatron-Core's recompute modules in a dense layer: mlp, and naive attention's core") {
  Job j;
  j.setup.attention = model::AttentionImpl::naive;
  j.plan.recompute = model::Recompute::selective;
  const auto ops = model::build_ops(j.m, model::make_op_context(j.plan, j.setup));
  const auto& l = ops.layers.front().ops;
  const auto fw = load_framework("megatron");
  const int sel = static_cast<int>(model::Recompute::selective);
  auto act = [&](std::uint32_t modules) {
    j.setup.recompute_modules = modules;
    return account_micro_batch(j.m, ops, j.plan, j.setup, fw).layer_act[sel];
  };
  double quadratic = 0, in_mlp = 0;
  std::vector<std::string> seen; // one allocation per id (the probabilities: softmax and P V)
  for (const auto& op : l)
    for (const auto& t : op.saved) {
      if (std::find(seen.begin(), seen.end(), t.id) != seen.end())
        continue;
      seen.push_back(t.id);
      quadratic += t.quadratic ? t.bytes : 0;
      in_mlp +=
          t.id.find("mlp.") != std::string::npos && t.id.find("mlp.norm.in") == std::string::npos
              ? t.bytes
              : 0;
    }
  REQUIRE(quadratic > 0);
  // Without core_attn the scores stay; mlp drops what the MLP saved beyond its input (the
  // residual stream before the fused norm), the norm's statistics included.
  CHECK(act(model::kRecomputeMlp) - act(model::kRecomputeCoreAttn) ==
        doctest::Approx(quadratic - in_mlp));
  CHECK(act(model::kRecomputeCoreAttn | model::kRecomputeMlp) ==
        doctest::Approx(act(model::kRecomputeCoreAttn) - in_mlp));
  // layernorm has nothing to re-make where Transformer Engine fuses both norms.
  CHECK(act(model::kRecomputeCoreAttn | model::kRecomputeLayernorm) ==
        act(model::kRecomputeCoreAttn));
}

TEST_CASE("activation offload: host copies hide behind the pass unless the link is too slow") {
  MegatronDp8 x;
  const auto none = x.step();
  x.setup.offload_activation_layers = 16;
  const auto fast = x.step();
  CHECK(fast.offload_bytes_per_micro_batch ==
        doctest::Approx(fast.memory.host_activation_bytes).epsilon(1e-12));
  CHECK(fast.offload_transfer_s ==
        doctest::Approx(fast.offload_bytes_per_micro_batch / x.gpu.pcie_bandwidth_bytes_per_s));
  CHECK(fast.offload_transfer_s < fast.breakdown_s.forward / fast.micro_batches);
  CHECK(fast.breakdown_s.offload == 0);
  CHECK(fast.step_time_s == doctest::Approx(none.step_time_s).epsilon(1e-12));
  // The profile's measured share of the link (host_link_bw_fraction) stretches the copies.
  x.prof.host_link_bw_fraction = 0.5;
  const auto half = x.step();
  CHECK(half.offload_transfer_s == doctest::Approx(2 * fast.offload_transfer_s));
  x.prof.host_link_bw_fraction = 1;
  // A link 1000x slower: each way exposed beyond the forward, and beyond backward + recompute.
  x.gpu.pcie_bandwidth_bytes_per_s /= 1000;
  const auto slow = x.step();
  const double mb = static_cast<double>(slow.micro_batches);
  const double fwd = slow.breakdown_s.forward / mb;
  const double bwd = (slow.breakdown_s.backward + slow.breakdown_s.recompute) / mb;
  CHECK(slow.offload_transfer_s > fwd + bwd);
  CHECK(slow.breakdown_s.offload ==
        doctest::Approx(mb * (2 * slow.offload_transfer_s - fwd - bwd)).epsilon(1e-9));
  CHECK(slow.step_time_s == doctest::Approx(none.step_time_s + slow.breakdown_s.offload));
}

TEST_CASE("full recompute of some layers: the step moves linearly between none and full") {
  // One pipeline stage: each re-run layer adds full recompute's per-layer cost (its re-run
  // forward and collectives, the checkpoint wrapper), the others cost what no recompute costs.
  MegatronDp8 x;
  x.plan.recompute = model::Recompute::none;
  const auto none = x.step();
  x.plan.recompute = model::Recompute::full;
  const auto full = x.step();
  x.setup.recompute_layers = 8; // of 32
  const auto quarter = x.step();
  x.setup.recompute_layers = 32;
  const auto all = x.step();
  CHECK(all.step_time_s == doctest::Approx(full.step_time_s).epsilon(1e-12));
  CHECK(full.step_time_s > none.step_time_s);
  CHECK(quarter.step_time_s ==
        doctest::Approx(none.step_time_s + 0.25 * (full.step_time_s - none.step_time_s))
            .epsilon(1e-9));
  CHECK(quarter.breakdown_s.recompute ==
        doctest::Approx(0.25 * full.breakdown_s.recompute).epsilon(1e-12));
  CHECK(quarter.hardware_flops_per_step ==
        doctest::Approx(none.hardware_flops_per_step +
                        0.25 * (full.hardware_flops_per_step - none.hardware_flops_per_step))
            .epsilon(1e-12));
  CHECK(quarter.memory.activations > full.memory.activations);
  CHECK(quarter.memory.activations < none.memory.activations);
}

TEST_CASE("combined 1F1B: merged pairs are the passes less the first rank's warm-up") {
  model::ParallelPlan p;
  p.ep = 2;
  CHECK(ep_merged_chunk_pairs(p, 1) == 0); // one micro-batch: nothing to merge with
  CHECK(ep_merged_chunk_pairs(p, 8) == 7);
  p.pp = 4;
  p.interleave = 2;
  // 8 x 2 chunk passes less (4 - 1) x 2 + (2 - 1) x 4 + 1 = 11 warm-up forwards.
  CHECK(ep_merged_chunk_pairs(p, 8) == 5);
  CHECK(ep_merged_chunk_pairs(p, 4) == 0); // all in warm-up
  p.pp = 8;
  p.interleave = 4; // the Qwen3 235B H100 layout: 128 micro-batches
  CHECK(ep_merged_chunk_pairs(p, 128) == 512 - (14 + 24 + 1));
}

TEST_CASE("training time: tokens over throughput, with the top-down 6ND cross-check") {
  Job j;
  const auto e = j.run();
  const double n = 8e9, tokens = 1e12;
  const auto t = training_time(e, n, tokens, j.plan.num_gpus());
  CHECK(t.seconds == doctest::Approx(tokens / e.tokens_per_s).epsilon(1e-12));
  CHECK(t.days == doctest::Approx(t.seconds / 86400).epsilon(1e-12));
  CHECK(t.gpu_hours == doctest::Approx(t.seconds * 16 / 3600).epsilon(1e-12)); // tp2 pp2 dp4
  CHECK(t.days_top_down_6nd ==
        doctest::Approx(6 * n * tokens / (16 * e.peak_flops_per_s * e.mfu) / 86400).epsilon(1e-12));
  CHECK(days_to_train(tokens, e.tokens_per_step, e.step_time_s) ==
        doctest::Approx(t.days).epsilon(1e-12));
  CHECK(training_time(e, n, 0, 16).days == 0);
}

TEST_CASE(
    "MoE: expert gradients are reduced and sharded over dp x cp / ep, the rest over dp x cp") {
  // Mixtral 8x7B on 2 DGX H100 nodes, dp 16 x ep 8: each expert has 2 replicas (one per node),
  // each dense parameter 16.
  const auto m = model::load_model("mixtral-8x7b");
  const auto cluster = node_of("dgx-h100", 2);
  const auto gpu = hw::load_gpu("h100-sxm");
  const auto prof = hw::default_profile("h100-sxm");
  model::ParallelPlan plan;
  plan.dp = 16;
  plan.ep = 8;
  plan.zero_stage = 1;
  model::TrainingSetup setup;
  setup.seq_len = 4096;
  setup.micro_batch_size = 1;
  setup.global_batch_size = 16;
  const auto est = estimate_step(m, cluster, gpu, prof, plan, setup, {});
  const double all = est.memory.params_on_gpu, experts = est.memory.expert_params_on_gpu;
  REQUIRE(experts > 0);
  REQUIRE(experts < all);
  const auto per = state_bytes_per_param(setup.precision, setup.optimizer);
  CHECK(est.memory.optimizer ==
        doctest::Approx(per.optimizer * ((all - experts) / 16 + experts / 2)));
  // Reduce-scatter + all-gather volumes, each over its own group.
  const double grads = all * per.gradients, weights = all * per.weights, e = experts / all;
  CHECK(est.dp_volume_bytes ==
        doctest::Approx(busbw_factor(Collective::all_gather, 16) * (1 - e) * (grads + weights) +
                        busbw_factor(Collective::all_gather, 2) * e * (grads + weights)));
  const auto pl = place_groups(plan, cluster);
  CHECK(pl.edp.size == 2);
  CHECK(pl.edp.per_node == 1);
}

TEST_CASE("MoE parallel folding: ep over tp x dp, experts whole, their own gradient group") {
  // Qwen3-30B-A3B (128 experts) on 2 DGX H100 nodes at tp 2 x dp 8, ep 16 with etp 1
  // (Megatron-Core's MoE parallel folding): the ep group is all 16 ranks, so no expert has a
  // replica (edp 1).
  const auto m = model::load_model("qwen3-30b-a3b");
  const auto cluster = node_of("dgx-h100", 2);
  const auto gpu = hw::load_gpu("h100-sxm");
  const auto prof = hw::default_profile("h100-sxm");
  model::ParallelPlan plan;
  plan.tp = 2;
  plan.dp = 8;
  plan.ep = 16;
  plan.sequence_parallel = true;
  plan.zero_stage = 1;
  model::TrainingSetup setup;
  setup.seq_len = 4096;
  setup.micro_batch_size = 1;
  setup.global_batch_size = 8;
  // Without folding ep must divide dp; with etp = 1, tp x dp x cp.
  CHECK_THROWS_WITH_AS(model::validate(plan, m, setup, 16, "flags"),
                       doctest::Contains("ep = 16: must divide dp = 8"), ConfigError);
  plan.etp = 1;
  model::validate(plan, m, setup, 16, "flags");
  CHECK(plan.experts_folded());
  CHECK(plan.expert_tp() == 1);
  CHECK(plan.expert_dp_cp() == 1);
  const auto pl = place_groups(plan, cluster);
  CHECK(pl.ep.size == 16);
  CHECK(pl.ep.per_node == 8); // consecutive ranks: a node's 8 GPUs, then the next node's
  CHECK(pl.edp.size == 1);
  const auto est = estimate_step(m, cluster, gpu, prof, plan, setup, {});
  // Each GPU holds 128 / 16 of each layer's experts, each whole (etp 1).
  double layer_experts = 0;
  const auto ops = model::build_ops(m, model::make_op_context(plan, setup));
  for (const auto& op : ops.layers.front().ops)
    if (model::is_routed_expert(op.role))
      layer_experts += op.params;
  CHECK(est.memory.expert_params_on_gpu == doctest::Approx(48 * layer_experts / 16));
  CHECK(layer_experts == doctest::Approx(128.0 * 3 * 2048 * 768)); // whole experts
  // Optimizer states: the experts have no replica to shard over, the rest shard over dp 8.
  const double all = est.memory.params_on_gpu, experts = est.memory.expert_params_on_gpu;
  const auto per = state_bytes_per_param(setup.precision, setup.optimizer);
  CHECK(est.memory.optimizer == doctest::Approx(per.optimizer * ((all - experts) / 8 + experts)));
  // Dense gradients are reduced over dp 8; the experts' over no one.
  const double grads = all * per.gradients, weights = all * per.weights, e = experts / all;
  CHECK(est.dp_volume_bytes ==
        doctest::Approx(busbw_factor(Collective::all_gather, 8) * (1 - e) * (grads + weights)));
  // Rules: etp must be 1 or tp, and folding needs sequence parallelism.
  plan.etp = 4;
  CHECK_THROWS_WITH_AS(model::validate(plan, m, setup, 16, "flags"),
                       doctest::Contains("etp = 4: must be 0 (= tp), tp = 2, or 1"), ConfigError);
  plan.etp = 1;
  plan.sequence_parallel = false;
  CHECK_THROWS_WITH_AS(model::validate(plan, m, setup, 16, "flags"),
                       doctest::Contains("folded experts need sequence parallelism"), ConfigError);
}

TEST_CASE("torchtitan's per-op checkpointing keeps every other matmul's output and attention's") {
  // Llama 3 8B, one GPU, micro-batch 1 x 4096 tokens. Execution order of a layer's aten.mm:
  // wq (kept), wk (re-run), wv (kept), wo (re-run), w1 (kept), w3 (re-run), w2 (kept).
  const auto m = model::load_model("llama3-8b");
  model::ParallelPlan plan;
  model::TrainingSetup setup;
  setup.seq_len = 4096;
  const double T = 4096, d = 4096, kv = 1024, ffn = 14336;
  const auto ops = model::build_ops(m, model::make_op_context(plan, setup));
  const auto a = account_micro_batch(m, ops, plan, setup);
  const int op = static_cast<int>(model::Recompute::selective_op);
  const int full = static_cast<int>(model::Recompute::full);
  // Kept beyond the layer's input: Q, V, w1 and w2 outputs and attention's output (bf16),
  // and its fp32 logsumexp.
  const double kept = 2 * T * (d + kv + ffn + d) + 2 * T * d + 4 * T * 32;
  CHECK(a.layer_act[op] - a.layer_act[full] == doctest::Approx(kept).epsilon(1e-12));
  // Re-run: wk, wo, w3 and every op that is not a matmul or attention.
  double elementwise = 0, attention = 0;
  for (const auto& o : ops.layers.front().ops)
    if (o.kind != model::OpKind::gemm && o.role != model::OpRole::attention_core)
      elementwise += o.fwd_flops;
    else if (o.role == model::OpRole::attention_core)
      attention += o.fwd_flops;
  const double rerun_mm = 2 * T * d * (kv + d + ffn);
  CHECK(a.layer_recompute_flops[op] == doctest::Approx(rerun_mm + elementwise).epsilon(1e-12));
  CHECK(a.layer_recompute_flops[op] < a.layer_recompute_flops[full]);
  // FP8 linears (torchao's Float8Linear: torch.mm on a float8 subclass) are aten.mm to the
  // policy (validate/results/runs-2026-12-03/sac-float8/): the same outputs kept, in bf16, and
  // the same matmuls re-run, beside every op that is not a matmul or attention.
  auto fp8 = setup;
  fp8.precision = model::Precision::fp8_current;
  const auto ops8 = model::build_ops(m, model::make_op_context(plan, fp8));
  const auto a8 = account_micro_batch(m, ops8, plan, fp8);
  CHECK(a8.layer_act[op] - a8.layer_act[full] == doctest::Approx(kept).epsilon(1e-12));
  double elementwise8 = 0;
  for (const auto& o : ops8.layers.front().ops)
    if (o.kind != model::OpKind::gemm && o.role != model::OpRole::attention_core)
      elementwise8 += o.fwd_flops;
  CHECK(a8.layer_recompute_flops[op] == doctest::Approx(rerun_mm + elementwise8).epsilon(1e-12));
  // Time sits between none and full, and so does memory.
  const auto gpu = hw::load_gpu("h100-sxm");
  const auto prof = hw::default_profile("h100-sxm");
  const auto cluster = node_of("dgx-h100", 1);
  const auto t = time_micro_batch(m, ops, plan, setup, gpu, prof, cluster);
  CHECK(t.layer_recompute[op] > 0);
  CHECK(t.layer_recompute[op] < t.layer_recompute[full]);
  CHECK(a.layer_act[op] < a.layer_act[static_cast<int>(model::Recompute::none)]);
}

TEST_CASE("eager per-op checkpointing pays its dispatch mode on every forward kernel, twice") {
  // The policy's TorchDispatchMode sees every op of a layer's forward and of its re-run: with
  // a host cost per kernel of that mode, the layer's host time grows by that cost times the
  // forward's kernels, in the forward and again in backward; the GPU time does not move.
  const auto m = model::load_model("cs336-small");
  model::ParallelPlan plan;
  plan.recompute = model::Recompute::selective_op;
  model::TrainingSetup setup;
  setup.seq_len = 512;
  const auto ops = model::build_ops(m, model::make_op_context(plan, setup));
  const auto gpu = hw::load_gpu("h200");
  const auto prof = hw::default_profile("h200");
  const auto cluster = node_of("dgx-h200", 1);
  FrameworkProfile fw = load_framework("pytorch");
  fw.host_s_per_sac_kernel = 0;
  const auto t0 = time_micro_batch(m, ops, plan, setup, gpu, prof, cluster, fw);
  fw.host_s_per_sac_kernel = 50e-6;
  const auto t1 = time_micro_batch(m, ops, plan, setup, gpu, prof, cluster, fw);
  double kernels = 0;
  for (const auto& o : ops.layers.front().ops)
    if (!model::is_communication(o.kind))
      kernels += framework_op_time(o, Pass::forward, gpu, prof, fw).kernels;
  CHECK(kernels > 10);
  CHECK(t1.layer_sac_dispatch_host == doctest::Approx(50e-6 * kernels).epsilon(1e-12));
  StepOptions so;
  so.framework = std::make_shared<const FrameworkProfile>(fw);
  const StageCosts c1 = stage_costs(t1, plan, so);
  fw.host_s_per_sac_kernel = 0;
  so.framework = std::make_shared<const FrameworkProfile>(fw);
  const StageCosts c0 = stage_costs(t0, plan, so);
  CHECK(c1.layer.host_fwd - c0.layer.host_fwd == doctest::Approx(50e-6 * kernels));
  CHECK(c1.layer.host_bwd - c0.layer.host_bwd == doctest::Approx(50e-6 * kernels));
  CHECK(c1.layer.fwd == c0.layer.fwd);
  CHECK(c1.layer.rc == c0.layer.rc);
  // Other policies do not pay it.
  auto full = plan;
  full.recompute = model::Recompute::full;
  fw.host_s_per_sac_kernel = 50e-6;
  so.framework = std::make_shared<const FrameworkProfile>(fw);
  const StageCosts f1 = stage_costs(t1, full, so);
  CHECK(f1.layer.host_fwd == doctest::Approx(c0.layer.host_fwd));
}
