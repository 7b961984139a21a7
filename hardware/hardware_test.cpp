// Every GPU, cluster and profile preset loads and validates; bad presets name the field.
#include <doctest/doctest.h>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "hardware/load.hpp"

using namespace trainsim;
using namespace trainsim::hw;

TEST_CASE("every GPU preset loads, validates and round-trips") {
  const auto names = list_presets("gpus");
  CHECK(names.size() >= 10);
  for (const auto& name : names) {
    CAPTURE(name);
    const GpuSpec g = load_gpu(name);
    CHECK(g.name == name);
    CHECK_FALSE(g.source.empty());
    const GpuSpec again = gpu_from_json(gpu_to_json(g), "round-trip");
    CHECK(again.peak_flops_per_s[Dtype::bf16] == doctest::Approx(g.peak_flops_per_s[Dtype::bf16]));
    CHECK(again.memory_bytes == doctest::Approx(g.memory_bytes));
  }
  // H100/H200 SXM dense bf16 is 989.5 TFLOP/s (half the sparsity figure).
  CHECK(load_gpu("h100-sxm").peak_flops_per_s[Dtype::bf16] == 989.5e12);
  CHECK(load_gpu("h200").hbm_bandwidth_bytes_per_s == 4.8e12);
}

TEST_CASE("every cluster preset loads; its GPU exists") {
  for (const auto& name : list_presets("clusters")) {
    CAPTURE(name);
    const ClusterSpec c = load_cluster(name);
    CHECK_NOTHROW((void)load_gpu(c.gpu));
    CHECK(c.gpus_per_node == 8);
  }
}

TEST_CASE("every profile preset loads and validates") {
  for (const auto& name : list_presets("profiles")) {
    CAPTURE(name);
    const HardwareProfile p = load_profile(name);
    const HardwareProfile again = profile_from_json(profile_to_json(p), "round-trip");
    CHECK(again.gemm_peak_fraction[Dtype::bf16] ==
          doctest::Approx(p.gemm_peak_fraction[Dtype::bf16]));
    CHECK(again.launch_overhead_s == doctest::Approx(p.launch_overhead_s));
    CHECK(again.host_gemm_launch_s == doctest::Approx(p.host_gemm_launch_s));
    CHECK(again.gpu_launch_gap_s == doctest::Approx(p.gpu_launch_gap_s));
    CHECK(again.overlap_compute_rate == doctest::Approx(p.overlap_compute_rate));
    CHECK(again.overlap_comm_rate == doctest::Approx(p.overlap_comm_rate));
  }
  CHECK(default_profile("v100").name == load_profile("default").name);
}

TEST_CASE("bad GPU preset: unknown dtype, missing and negative fields") {
  const auto j = parse_json_text(R"({"name": "g", "source": "s",
    "peak_tflops": {"bf16": 100, "fp4": 3}, "memory_gb": -1, "pcie_bandwidth_gb_per_s": 32,
    "num_sms": 10})",
                                 "g.json");
  try {
    (void)gpu_from_json(j, "g.json");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("peak_tflops.fp4: unknown dtype") != std::string::npos);
    CHECK(msg.find("hbm_bandwidth_gb_per_s: missing required field") != std::string::npos);
  }
}

TEST_CASE("bad cluster preset") {
  const auto j = parse_json_text(R"({"name": "c", "source": "s", "gpu": "h100-sxm",
    "gpus_per_node": 0, "intra_node_bandwidth_gb_per_s": 450})",
                                 "c.json");
  CHECK_THROWS_WITH_AS(cluster_from_json(j, "c.json"), doctest::Contains("gpus_per_node = 0"),
                       ConfigError);
}

TEST_CASE("unknown GPU preset suggests near names") {
  CHECK_THROWS_WITH_AS(load_gpu("h100"), doctest::Contains("did you mean"), ConfigError);
}

TEST_CASE("profile: host launch and overlap fields are optional and range-checked") {
  nlohmann::json j = profile_to_json(default_profile("h200"));
  j.erase("host_launch_us");
  j.erase("overlap_comm_rate");
  const HardwareProfile p = profile_from_json(j, "p.json");
  CHECK(p.host_launch_s == 0);        // not measured: steps use launch_overhead_s
  CHECK(p.overlap_comm_rate == 1.0);  // not measured: no interference
  j["overlap_compute_rate"] = 0;
  j["host_gemm_launch_us"] = -3;
  try {
    (void)profile_from_json(j, "p.json");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("overlap_compute_rate = 0: must be in (0, 1]") != std::string::npos);
    CHECK(msg.find("host_gemm_launch_us = -3") != std::string::npos);
  }
}
