// Calibration: the fit recovers a known profile from synthetic measurements, predictions use
// the model's op factories, and malformed measurement files name the field.
#include <doctest/doctest.h>

#include <random>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "hardware/load.hpp"
#include "simulate/fit/kernel_fit.hpp"

using namespace trainsim;
using namespace trainsim::fitting;

namespace {

KernelShape gemm(std::int64_t m, std::int64_t n, std::int64_t k, Dtype dt) {
  KernelShape s;
  s.op = BenchOp::gemm;
  s.dtype = dt;
  s.m = m;
  s.n = n;
  s.k = k;
  return s;
}

MeasurementSet synthetic(const hw::GpuSpec& gpu, const hw::HardwareProfile& truth, double noise) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> eps(0.0, noise);
  std::vector<KernelShape> shapes;
  for (Dtype dt : {Dtype::bf16, Dtype::fp32})
    for (std::int64_t n : {512, 1024, 2048, 4096, 8192})
      shapes.push_back(gemm(n, n, n, dt));
  shapes.push_back(gemm(32768, 256, 4096, Dtype::bf16));
  shapes.push_back(gemm(8192, 8192, 512, Dtype::bf16));
  for (BenchOp op : {BenchOp::relu, BenchOp::add, BenchOp::copy}) {
    KernelShape s;
    s.op = op;
    s.num_elements = std::int64_t{1} << 27;
    shapes.push_back(s);
  }
  for (bool bwd : {false, true}) {
    KernelShape s;
    s.op = BenchOp::rmsnorm;
    s.rows = 16384;
    s.cols = 4096;
    s.backward = bwd;
    shapes.push_back(s);
    for (std::int64_t seq : {512, 1024, 4096})
      for (bool causal : {false, true}) {
        KernelShape a;
        a.op = BenchOp::attention;
        a.batch_size = 2;
        a.num_heads = 16;
        a.seq_len = seq;
        a.head_dim = 128;
        a.causal = causal;
        a.backward = bwd;
        shapes.push_back(a);
      }
  }
  KernelShape empty;
  empty.op = BenchOp::empty;
  shapes.push_back(empty);
  MeasurementSet ms;
  for (const auto& s : shapes) {
    KernelMeasurement m;
    m.name = case_name(s);
    m.shape = s;
    m.median_s = predict_kernel_s(s, gpu, truth) * (1 + eps(rng));
    ms.items.push_back(m);
  }
  return ms;
}

} // namespace

TEST_CASE("the fit recovers a known profile from synthetic measurements") {
  const auto gpu = hw::load_gpu("h200");
  hw::HardwareProfile truth = hw::load_profile("default");
  truth.gemm_peak_fraction[Dtype::bf16] = 0.71;
  truth.gemm_peak_fraction[Dtype::fp32] = 0.85;
  truth.gemm_tile_m = 128;
  truth.gemm_tile_n = 256;
  truth.gemm_k_half = 96;
  truth.elementwise_bw_fraction = 0.83;
  truth.reduction_bw_fraction = 0.66;
  truth.copy_bw_fraction = 0.87;
  truth.attention_fwd_peak_fraction = 0.29;
  truth.attention_bwd_peak_fraction = 0.07;
  truth.attention_kv_half = 256;
  truth.launch_overhead_s = 4e-6;
  const auto ms = synthetic(gpu, truth, 0.01);
  FitReport report;
  const auto fit = fit_profile(ms, gpu, hw::load_profile("default"), report);
  CHECK(fit.gemm_peak_fraction[Dtype::bf16] == doctest::Approx(0.71).epsilon(0.02));
  CHECK(fit.gemm_peak_fraction[Dtype::fp32] == doctest::Approx(0.85).epsilon(0.02));
  CHECK(fit.elementwise_bw_fraction == doctest::Approx(0.83).epsilon(0.03));
  CHECK(fit.reduction_bw_fraction == doctest::Approx(0.66).epsilon(0.03));
  CHECK(fit.copy_bw_fraction == doctest::Approx(0.87).epsilon(0.03));
  CHECK(fit.attention_fwd_peak_fraction == doctest::Approx(0.29).epsilon(0.03));
  CHECK(fit.attention_bwd_peak_fraction == doctest::Approx(0.07).epsilon(0.03));
  CHECK(fit.attention_kv_half == doctest::Approx(256).epsilon(0.13)); // grid step 32
  CHECK(fit.launch_overhead_s == doctest::Approx(4e-6).epsilon(0.05));
  // Unmeasured dtypes keep the base profile's value.
  CHECK(fit.gemm_peak_fraction[Dtype::fp8] ==
        hw::load_profile("default").gemm_peak_fraction[Dtype::fp8]);
  CHECK(report.lines.size() >= 6);
  // Predictions with the fitted profile reproduce the measurements closely.
  const auto cmp = compare_kernels(ms, gpu, hw::load_profile("default"), fit);
  CHECK(mape(cmp, true) < 3.0);
}

TEST_CASE("predictions come from the op factories (GEMM 2mnk at the profile's efficiency)") {
  const auto gpu = hw::load_gpu("h200");
  const auto prof = hw::load_profile("default");
  const auto s = gemm(8192, 8192, 8192, Dtype::bf16);
  const auto ops = kernel_ops(s);
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].op.fwd_exec_flops == 2.0 * 8192 * 8192 * 8192);
  CHECK(predict_kernel_s(s, gpu, prof) ==
        doctest::Approx(sim::gemm_cost(8192, 8192, 8192, Dtype::bf16, gpu, prof).time_s));
  KernelShape naive;
  naive.op = BenchOp::attention;
  naive.impl = AttentionImpl::naive;
  naive.batch_size = 1;
  naive.num_heads = 2;
  naive.seq_len = 256;
  naive.head_dim = 64;
  CHECK(kernel_ops(naive).size() == 3);
}

TEST_CASE("malformed measurement files name the field") {
  auto doc = nlohmann::json::parse(R"({"measurements": [{"name": "x", "op": "gemm", "dtype": "bf16",
    "median_s": 1e-3, "m": 64, "n": 64}]})");
  CHECK_THROWS_WITH_AS(read_measurements(doc, "m.json"), doctest::Contains("k: missing"),
                       ConfigError);
  doc = nlohmann::json::parse(R"({"measurements": [{"name": "x", "op": "conv", "median_s": 1}]})");
  CHECK_THROWS_WITH_AS(read_measurements(doc, "m.json"), doctest::Contains("op = \"conv\""),
                       ConfigError);
  doc = nlohmann::json::parse(R"({"results": []})");
  CHECK_THROWS_WITH_AS(read_measurements(doc, "m.json"), doctest::Contains("measurements"),
                       ConfigError);
  doc = nlohmann::json::parse(R"({"measurements": [{"name": "x", "op": "relu", "median_s": 1e-3,
    "num_elements": 10, "check_passed": false}]})");
  CHECK_THROWS_WITH_AS(read_measurements(doc, "m.json"), doctest::Contains("check_passed = false"),
                       ConfigError);
}

TEST_CASE("the recorded H200 measurements load") {
  const auto ms = load_measurements(std::string(TRAINSIM_SOURCE_DIR) +
                                    "/validate/results/fixtures/h200-calibration.json");
  CHECK(ms.items.size() > 50);
}

TEST_CASE("launch and overlap probes set the queued-launch and interference fields") {
  hw::HardwareProfile p = hw::default_profile("h200");
  FitReport report;
  const auto launch = nlohmann::json::parse(R"({"ops": [
    {"name": "empty", "host_us": 5.0, "gpu_us": 1.4},
    {"name": "add.bf16.2048x768", "host_us": 5.2, "gpu_us": 3.1},
    {"name": "rmsnorm.fwd.bf16.2048x768", "host_us": 5.4, "gpu_us": 4.5},
    {"name": "gemm.cublas.bf16.a", "host_us": 12.0, "gpu_us": 7},
    {"name": "gemm.cublas.bf16.b", "host_us": 9.0, "gpu_us": 13},
    {"name": "gemm.cublas.bf16.c", "host_us": 13.0, "gpu_us": 12},
    {"name": "gemm.cublaslt.bf16.a", "host_us": 99.0, "gpu_us": 7}]})");
  apply_launch_probe(launch, "l.json", p, report);
  CHECK(p.host_launch_s == doctest::Approx(5.2e-6));     // median of our kernels
  CHECK(p.host_gemm_launch_s == doctest::Approx(12e-6)); // median of cublasGemmEx, not Lt
  CHECK(p.gpu_launch_gap_s == doctest::Approx(1.4e-6));  // the empty kernel's GPU side
  CHECK_THROWS_WITH_AS(apply_launch_probe(nlohmann::json::parse(R"({"ops": [{"name": "empty",
    "host_us": 5, "gpu_us": 1}]})"),
                                          "l.json", p, report),
                       doctest::Contains("need at least one gemm.cublas.* op"), ConfigError);
  CHECK_THROWS_WITH_AS(apply_launch_probe(nlohmann::json::parse(R"({"ops": [{"name": "empty",
    "host_us": -5, "gpu_us": 1}]})"),
                                          "l.json", p, report),
                       doctest::Contains("host_us = -5"), ConfigError);

  const auto overlap = nlohmann::json::parse(R"({"num_gpus": 2,
    "compute_rate_gemm": 0.81, "comm_rate_gemm": 0.74,
    "step_like": {"compute_rate_gemm": 0.76, "comm_rate_gemm": 0.71}})");
  apply_overlap_probe(overlap, "o.json", p, report);
  CHECK(p.overlap_compute_rate == doctest::Approx(0.76)); // the step-like scenario wins
  CHECK(p.overlap_comm_rate == doctest::Approx(0.71));
  CHECK_THROWS_WITH_AS(apply_overlap_probe(nlohmann::json::parse(R"({"num_gpus": 2,
    "compute_rate_gemm": 1.7, "comm_rate_gemm": 0.7})"),
                                           "o.json", p, report),
                       doctest::Contains("compute_rate_gemm = 1.7"), ConfigError);

  // The host link: the slower direction of pinned copies alone, of the preset's one-way link.
  const auto link = nlohmann::json::parse(R"({"d2h_alone_gb_per_s": 54.0,
    "h2d_alone_gb_per_s": 56.0, "gemm_slowdown_beside_d2h_pct": 6.5,
    "gemm_slowdown_beside_h2d_pct": 0.3})");
  apply_host_link_probe(link, "h.json", 64e9, p, report);
  CHECK(p.host_link_bw_fraction == doctest::Approx(54.0 / 64));
  CHECK(report.lines.back().find("+6.5% (device to host)") != std::string::npos);
  CHECK_THROWS_WITH_AS(apply_host_link_probe(nlohmann::json::parse(R"({"d2h_alone_gb_per_s": 54})"),
                                             "h.json", 64e9, p, report),
                       doctest::Contains("h.json: h2d_alone_gb_per_s: missing"), ConfigError);
  CHECK_THROWS_WITH_AS(apply_host_link_probe(link, "h.json", 16e9, p, report),
                       doctest::Contains("the probe is not of this GPU"), ConfigError);
  CHECK_THROWS_WITH_AS(apply_host_link_probe(link, "h.json", 0, p, report),
                       doctest::Contains("no host link bandwidth"), ConfigError);
}

TEST_CASE("the recorded probes load") {
  hw::HardwareProfile p = hw::default_profile("h200");
  FitReport report;
  const std::string dir = std::string(TRAINSIM_SOURCE_DIR) + "/validate/results/fixtures/";
  apply_launch_probe(load_json_file(dir + "h200-launch-probe.json"), "launch", p, report);
  apply_overlap_probe(load_json_file(dir + "overlap-probe-x2.json"), "overlap", p, report);
  apply_host_link_probe(load_json_file(dir + "h200-host-link-probe.json"), "link",
                        hw::load_gpu("h200").pcie_bandwidth_bytes_per_s, p, report);
  CHECK(p.host_gemm_launch_s > p.host_launch_s); // cuBLAS's host path is the longer one
  CHECK(p.overlap_compute_rate < 1.0);
  CHECK(p.host_link_bw_fraction < 1.0); // PCIe 5 x16 moves ~55 of its 64 GB/s
  CHECK(p.host_link_bw_fraction == hw::default_profile("h200").host_link_bw_fraction);
}

TEST_CASE("fuzz: probe files set valid fields or fail with a ConfigError naming the file") {
  const std::string dir = std::string(TRAINSIM_SOURCE_DIR) + "/validate/results/fixtures/";
  const nlohmann::json launch = load_json_file(dir + "h200-launch-probe.json");
  const nlohmann::json overlap = load_json_file(dir + "overlap-probe-x2.json");
  const nlohmann::json link = load_json_file(dir + "h200-host-link-probe.json");
  const std::vector<nlohmann::json> values = {-1,
                                              0,
                                              0.5,
                                              1.2,
                                              1e300,
                                              "x",
                                              nullptr,
                                              nlohmann::json::array({1}),
                                              nlohmann::json::object({{"a", 1}})};
  std::mt19937_64 rng(29);
  auto mutate = [&](nlohmann::json j) {
    // Edit a top-level field, a field of "step_like", or a field of one "ops" entry.
    nlohmann::json* target = &j;
    if (j.contains("ops") && j["ops"].is_array() && !j["ops"].empty() && rng() % 2)
      target = &j["ops"][rng() % j["ops"].size()];
    else if (j.contains("step_like") && rng() % 2)
      target = &j["step_like"];
    if (!target->is_object() || target->empty())
      return j;
    auto it = target->begin();
    std::advance(it, static_cast<long>(rng() % target->size()));
    if (rng() % 4 == 0)
      target->erase(it.key());
    else
      (*target)[it.key()] = values[rng() % values.size()];
    return j;
  };
  int ok = 0, bad = 0;
  for (int i = 0; i < 1000; ++i) {
    hw::HardwareProfile p = hw::default_profile("h200");
    FitReport report;
    try {
      if (i % 3 == 1)
        apply_launch_probe(mutate(launch), "probe.json", p, report);
      else if (i % 3 == 2)
        apply_host_link_probe(mutate(link), "probe.json", 64e9, p, report);
      else
        apply_overlap_probe(mutate(overlap), "probe.json", p, report);
      hw::validate(p, "fuzzed profile"); // whatever was accepted keeps the profile valid
      ++ok;
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find("probe.json") != std::string::npos);
      ++bad;
    }
  }
  CHECK(ok > 0);
  CHECK(bad > 0);
}
