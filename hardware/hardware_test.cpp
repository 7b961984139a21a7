// Every GPU, cluster and profile preset loads and validates; bad presets name the field.
#include <doctest/doctest.h>
#include <limits>

#include "common/errors.hpp"
#include "common/json_io.hpp"
#include "common/presets.hpp"
#include "hardware/load.hpp"
#include "hardware/topology.hpp"

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
    // DGX/HGX nodes hold 8 GPUs; an NVL72 rack is one 72-GPU NVLink domain.
    CHECK(c.gpus_per_node == (name == "gb200-nvl72" ? 72 : 8));
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

namespace {
// A valid profile document (the h200 preset) with `fits` as its collective_fits.
nlohmann::json profile_with_fits(const nlohmann::json& fits) {
  nlohmann::json j = profile_to_json(load_profile("h200"));
  j["collective_fits"] = fits;
  return j;
}
} // namespace

TEST_CASE("collective fits: the one-line format of older profiles loads as one regime") {
  const auto j = profile_with_fits(nlohmann::json::parse(R"([{"op": "all-reduce",
    "level": "intra-node", "alpha_us": 7.5, "busbw_gb_per_s": 300, "num_ranks": 2}])"));
  const HardwareProfile p = profile_from_json(j, "old.json");
  REQUIRE(p.collective_fits.size() == 1);
  const CollectiveFit& f = p.collective_fits[0];
  CHECK(f.regimes.empty()); // one line: every size uses (alpha_s, busbw_bytes_per_s)
  CHECK(regime_for(f, 8).min_bytes == 0);
  CHECK(regime_for(f, 4294967296.0).alpha_s == doctest::Approx(7.5e-6).epsilon(1e-12));
  CHECK(regime_for(f, 8).busbw_bytes_per_s == doctest::Approx(300e9).epsilon(1e-12));
  CHECK(f.alpha_s == doctest::Approx(7.5e-6).epsilon(1e-12));
  CHECK(f.busbw_bytes_per_s == doctest::Approx(300e9).epsilon(1e-12));
  // Written back in the same one-line form.
  const nlohmann::json out = profile_to_json(p)["collective_fits"][0];
  CHECK(out.contains("alpha_us"));
  CHECK_FALSE(out.contains("regimes"));
}

TEST_CASE("collective fits: regimes load, pick by size and round-trip") {
  const auto j = profile_with_fits(nlohmann::json::parse(R"([{"op": "all-reduce",
    "level": "intra-node", "num_ranks": 2, "quality": {"anything": 1}, "regimes": [
      {"min_bytes": 0, "alpha_us": 7, "busbw_gb_per_s": 160},
      {"min_bytes": 1482911, "alpha_us": 20, "busbw_gb_per_s": 295},
      {"min_bytes": 189812532, "alpha_us": 129, "busbw_gb_per_s": 348}]}])"));
  const HardwareProfile p = profile_from_json(j, "new.json");
  const CollectiveFit& f = p.collective_fits.at(0);
  REQUIRE(f.regimes.size() == 3);
  // The summary fields are the largest-size regime.
  CHECK(f.alpha_s == doctest::Approx(129e-6).epsilon(1e-12));
  CHECK(f.busbw_bytes_per_s == doctest::Approx(348e9).epsilon(1e-12));
  CHECK(regime_for(f, 8).alpha_s == doctest::Approx(7e-6).epsilon(1e-12));
  CHECK(regime_for(f, 1482910).alpha_s == doctest::Approx(7e-6).epsilon(1e-12));
  CHECK(regime_for(f, 1482911).alpha_s == doctest::Approx(20e-6).epsilon(1e-12));
  CHECK(regime_for(f, 4294967296.0).alpha_s == doctest::Approx(129e-6).epsilon(1e-12));
  // 1 MiB at P = 2 (factor 1): 7 us + 1048576 B / 160 GB/s = 7 us + 6.5536 us.
  CHECK(collective_fit_time_s(f, 1048576, 1.0) == doctest::Approx(13.5536e-6).epsilon(1e-9));
  const HardwareProfile again = profile_from_json(profile_to_json(p), "round-trip");
  REQUIRE(again.collective_fits.at(0).regimes.size() == 3);
  CHECK(again.collective_fits[0].regimes[1].min_bytes == 1482911);
  CHECK(again.collective_fits[0].regimes[2].busbw_bytes_per_s == doctest::Approx(348e9));
}

TEST_CASE("collective fits: malformed regimes are rejected naming the field and the rule") {
  auto load = [](const char* fits) {
    return profile_from_json(profile_with_fits(nlohmann::json::parse(fits)), "bad.json");
  };
  CHECK_THROWS_WITH_AS(load(R"([{"op": "all-reduce", "level": "intra-node", "regimes": [
      {"min_bytes": 8, "alpha_us": 7, "busbw_gb_per_s": 160}]}])"),
                       doctest::Contains("collective_fits[0] (all-reduce intra-node).regimes[0]"
                                         ".min_bytes = 8: must be 0"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(load(R"([{"op": "all-reduce", "level": "intra-node", "regimes": [
      {"min_bytes": 0, "alpha_us": 7, "busbw_gb_per_s": 160},
      {"min_bytes": 4096, "alpha_us": 9, "busbw_gb_per_s": 200},
      {"min_bytes": 1024, "alpha_us": 20, "busbw_gb_per_s": 300}]}])"),
                       doctest::Contains("regimes[2].min_bytes = 1024: must be greater than "
                                         "regimes[1].min_bytes = 4096"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(load(R"([{"op": "all-gather", "level": "intra-node", "regimes": [
      {"min_bytes": 0, "alpha_us": -1, "busbw_gb_per_s": 160},
      {"min_bytes": 4096, "alpha_us": 9, "busbw_gb_per_s": 0}]}])"),
                       doctest::Contains("regimes[0]: alpha_us = -1: must be in [0, 1e+06] us"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(
      load(R"([{"op": "all-gather", "level": "intra-node", "regimes": [
      {"min_bytes": 0, "alpha_us": 1, "busbw_gb_per_s": 160},
      {"min_bytes": 4096, "alpha_us": 9, "busbw_gb_per_s": 0}]}])"),
      doctest::Contains("regimes[1]: busbw_gb_per_s = 0: must be in [0.001, 1e+06] GB/s"),
      ConfigError);
  CHECK_THROWS_WITH_AS(load(R"([{"op": "all-reduce", "level": "intra-node", "alpha_us": 7,
      "busbw_gb_per_s": 300, "regimes": [{"min_bytes": 0, "alpha_us": 7,
      "busbw_gb_per_s": 300}]}])"),
                       doctest::Contains("not both"), ConfigError);
  CHECK_THROWS_WITH_AS(load(R"([{"op": "all-reduce", "level": "intra-node", "regimes": []}])"),
                       doctest::Contains("collective_fits[0]: regimes: expected a non-empty array"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(load(R"([{"op": "all-reduce", "level": "intra-node", "regimes": [
      {"min_bytes": 0, "alpha_us": 7, "busbw_gb_per_s": 300, "colour": 1}]}])"),
                       doctest::Contains("collective_fits[0].regimes[0]"), ConfigError);
  CHECK_THROWS_WITH_AS(
      load(R"([{"op": "all-reduce", "level": "intra-node", "alpha_us": 7,
      "busbw_gb_per_s": -3}])"),
      doctest::Contains("collective_fits[0]: busbw_gb_per_s = -3: must be in [0.001, 1e+06] GB/s"),
      ConfigError);
  CHECK_THROWS_WITH_AS(load(R"([{"op": "all-reduce", "level": "intra-node", "alpha_us": 7}])"),
                       doctest::Contains("busbw_gb_per_s: missing required field"), ConfigError);
  // The op and the level are parsed once at load: an unknown name is an error, not a fit that
  // never matches.
  CHECK_THROWS_WITH_AS(load(R"([{"op": "allreduce", "level": "intra-node", "alpha_us": 7,
      "busbw_gb_per_s": 300}])"),
                       doctest::Contains("bad.json: collective_fits[0]: op = 'allreduce': unknown "
                                         "collective"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(load(R"([{"op": "all-reduce", "level": "none", "alpha_us": 7,
      "busbw_gb_per_s": 300}])"),
                       doctest::Contains("collective_fits[0]: level = 'none': must be intra-node "
                                         "or inter-node"),
                       ConfigError);
}

TEST_CASE("collectives: names round-trip and nccl-tests' busbw factors") {
  for (Collective c : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                       Collective::broadcast, Collective::all_to_all, Collective::send_recv}) {
    Collective back = Collective::send_recv == c ? Collective::all_reduce : Collective::send_recv;
    REQUIRE(parse_collective(to_string(c), back));
    CHECK(back == c);
  }
  Collective untouched = Collective::broadcast;
  CHECK_FALSE(parse_collective("allreduce", untouched));
  CHECK(untouched == Collective::broadcast);
  for (LinkLevel l : {LinkLevel::none, LinkLevel::intra_node, LinkLevel::inter_node}) {
    LinkLevel back = l == LinkLevel::none ? LinkLevel::inter_node : LinkLevel::none;
    REQUIRE(parse_link_level(to_string(l), back));
    CHECK(back == l);
  }
  LinkLevel level = LinkLevel::none;
  CHECK_FALSE(parse_link_level("intra_node", level));
  CHECK(busbw_factor(Collective::all_reduce, 8) == doctest::Approx(1.75)); // 2 * 7 / 8
  CHECK(busbw_factor(Collective::all_to_all, 4) == doctest::Approx(0.75)); // 3 / 4
  CHECK(busbw_factor(Collective::send_recv, 2) == 1.0);
}

TEST_CASE("collective fits: op and level load as names and are written back as the same names") {
  const auto j = profile_with_fits(nlohmann::json::parse(R"([{"op": "reduce-scatter",
    "level": "inter-node", "alpha_us": 9, "busbw_gb_per_s": 40, "num_ranks": 16}])"));
  const HardwareProfile p = profile_from_json(j, "names.json");
  CHECK(p.collective_fits.at(0).op == Collective::reduce_scatter);
  CHECK(p.collective_fits.at(0).level == LinkLevel::inter_node);
  const nlohmann::json out = profile_to_json(p)["collective_fits"][0];
  CHECK(out["op"] == "reduce-scatter");
  CHECK(out["level"] == "inter-node");
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
  CHECK(p.host_launch_s == 0);       // not measured: steps use launch_overhead_s
  CHECK(p.overlap_comm_rate == 1.0); // not measured: no interference
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

TEST_CASE("GPU and cluster numbers outside their physical ranges are refused, naming the field") {
  // Issue 18, row 4: a peak of 1e308 TFLOP/s (1e320 FLOP/s overflows to inf) or a bandwidth of
  // 1e-300 GB/s printed -nan and "inf days". Each is refused at load with the value as written.
  auto gpu_with = [](const char* key, const nlohmann::json& value) {
    nlohmann::json j = gpu_to_json(load_gpu("h100-sxm"));
    if (std::string(key).rfind("peak_tflops.", 0) == 0)
      j["peak_tflops"][std::string(key).substr(12)] = value;
    else
      j[key] = value;
    return gpu_from_json(j, "g.json");
  };
  CHECK_THROWS_WITH_AS(gpu_with("peak_tflops.bf16", 1e308),
                       "g.json: peak_tflops.bf16 = 1e+308: must be 0 or in [0.01, 100000] TFLOP/s",
                       ConfigError);
  CHECK_THROWS_WITH_AS(gpu_with("hbm_bandwidth_gb_per_s", 1e-300),
                       "g.json: hbm_bandwidth_gb_per_s = 1e-300: must be in [1, 1e+06] GB/s",
                       ConfigError);
  CHECK_THROWS_WITH_AS(gpu_with("memory_gb", 1e300), doctest::Contains("memory_gb = 1e+300"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(gpu_with("nvlink_bandwidth_gb_per_s", 1e-9),
                       doctest::Contains("nvlink_bandwidth_gb_per_s = 1e-09: must be 0 or in"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(gpu_with("num_sms", 1000000000),
                       doctest::Contains("num_sms = 1000000000: must be in [1, 100000]"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(gpu_with("l2_mb", -1), doctest::Contains("l2_mb = -1"), ConfigError);
  CHECK_NOTHROW(gpu_with("peak_tflops.fp8", 0)); // 0: the GPU lacks the dtype

  // The same rules hold for a struct built or overridden in code (validate runs again).
  GpuSpec g = load_gpu("h100-sxm");
  g.pcie_bandwidth_bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(validate(g, "flags"),
                       doctest::Contains("pcie_bandwidth_gb_per_s = nan: must be a finite number"),
                       ConfigError);

  nlohmann::json c = cluster_to_json(load_cluster("dgx-h100"));
  c["inter_node_bandwidth_gb_per_s"] = 1e-300;
  CHECK_THROWS_WITH_AS((void)cluster_from_json(c, "c.json"),
                       doctest::Contains("inter_node_bandwidth_gb_per_s = 1e-300: must be 0 or in "
                                         "[0.01, 100000] GB/s"),
                       ConfigError);
  c = cluster_to_json(load_cluster("dgx-h100"));
  c["intra_node_bandwidth_gb_per_s"] = 1e300;
  CHECK_THROWS_WITH_AS((void)cluster_from_json(c, "c.json"),
                       doctest::Contains("intra_node_bandwidth_gb_per_s = 1e+300"), ConfigError);
}

TEST_CASE("profile numbers outside their ranges are refused") {
  nlohmann::json j = profile_to_json(load_profile("h200"));
  j["context_overhead_mb"] = 1e300;
  CHECK_THROWS_WITH_AS((void)profile_from_json(j, "p.json"),
                       doctest::Contains("context_overhead_mb = 1e+300: must be in [0, 1e+06] MB"),
                       ConfigError);
  j = profile_to_json(load_profile("h200"));
  j["gemm_tile_m"] = 1e12;
  CHECK_THROWS_WITH_AS((void)profile_from_json(j, "p.json"),
                       doctest::Contains("gemm_tile_m = 1000000000000: must be in [1, 65536]"),
                       ConfigError);
}

TEST_CASE("nvidia-smi topo -m: GPU pairs and their links; a file without GPU rows is refused") {
  // As nvidia-smi prints it: tabs, an underlined (ANSI) header, CPU affinity columns.
  const std::string two = "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
                          "GPU0\t X \tNV18\tSYS\t0-31\t0\n"
                          "GPU1\tNV18\t X \tSYS\t0-31\t0\n"
                          "NIC0\tSYS\tSYS\t X \n\nLegend:\n  X    = Self\n";
  const auto links = topology_links(two, "topo.txt");
  REQUIRE(links.size() == 1);
  CHECK(links[0] == "GPU0<->GPU1 NV18");
  CHECK_THROWS_WITH_AS((void)topology_links("Legend:\n  X = Self\n", "topo.txt"),
                       doctest::Contains("--topology topo.txt: no GPU rows"), ConfigError);
}
