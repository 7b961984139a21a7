// DeepSpeed's own model-state estimators reproduced exactly (values by hand from the formulas
// in deepspeed/runtime/zero/stage_1_and_2.py and stage3.py), config reading, and the
// ZeRO-Infinity headline case (Rajbhandari et al. 2021, Sec. 1: a trillion parameters
// fine-tuned on one DGX-2 node) placed by offload.
#include <doctest/doctest.h>

#include "common/errors.hpp"
#include "simulate/deepspeed.hpp"

using namespace trainsim;
using namespace trainsim::sim;

TEST_CASE("estimate_zero2_model_states_mem_needs: 7e9 params, 1 node of 8 GPUs") {
  // No offload: GPU 2P + int(18P/8) = 14e9 + 15.75e9; CPU 4P x 8 x 1.5 = 336e9.
  auto e = estimate_zero2_model_states(7e9, 8, 1, false);
  CHECK(e.gpu_bytes == 29'750'000'000);
  CHECK(e.cpu_bytes == 336'000'000'000);
  // Offload: GPU 2P = 14e9; CPU P x max(4 x 8, 16) x 1.5 = 336e9.
  e = estimate_zero2_model_states(7e9, 8, 1, true);
  CHECK(e.gpu_bytes == 14'000'000'000);
  CHECK(e.cpu_bytes == 336'000'000'000);
  // Two nodes, offload: CPU P x max(4 x 16, 16) x 1.5 = 672e9 per node (as DeepSpeed says).
  CHECK(estimate_zero2_model_states(7e9, 8, 2, true).cpu_bytes == 672'000'000'000);
}

TEST_CASE("estimate_zero3_model_states_mem_needs: 7e9 params, largest layer 5e8, 8 GPUs") {
  // Offload parameters and optimizer, zero_init: GPU 4L = 2e9; CPU 18P x 1.5 = 189e9.
  auto e = estimate_zero3_model_states(7e9, 5e8, 8, 1, true, true, true);
  CHECK(e.gpu_bytes == 2'000'000'000);
  CHECK(e.cpu_bytes == 189'000'000'000);
  // Optimizer only, zero_init: GPU 4L + int(2P/8) = 3.75e9; CPU 16P x 1.5 = 168e9.
  e = estimate_zero3_model_states(7e9, 5e8, 8, 1, true, false, true);
  CHECK(e.gpu_bytes == 3'750'000'000);
  CHECK(e.cpu_bytes == 168'000'000'000);
  // No offload, zero_init: GPU 4L + int(18P/8) = 17.75e9; CPU 4L x 8 x 1.5 = 24e9.
  e = estimate_zero3_model_states(7e9, 5e8, 8, 1, false, false, true);
  CHECK(e.gpu_bytes == 17'750'000'000);
  CHECK(e.cpu_bytes == 24'000'000'000);
  // Without zero_init: CPU P x max(4 x 8, 18) x 1.5 = 336e9 (offload both).
  CHECK(estimate_zero3_model_states(7e9, 5e8, 8, 1, true, true, false).cpu_bytes ==
        336'000'000'000);
  CHECK(e.largest_layer_bytes == 2'000'000'000);
}

TEST_CASE("ZeRO-Infinity headline: 1T parameters on one DGX-2 needs NVMe, not host RAM") {
  // DGX-2: 16 V100 32 GB, 1.5 TB host RAM, 8 x 3.84 TB NVMe (NVIDIA DGX-2 datasheet). A 1T
  // GPT-like model of hidden 25,600: the largest layer is the 4h x h FFN matrix, 2.62e9 params.
  const double P = 1e12, L = 4.0 * 25600 * 25600;
  DeepSpeedConfig cpu;
  cpu.zero_stage = 3;
  cpu.offload_optimizer = cpu.offload_param = OffloadDevice::cpu;
  const auto on_cpu = offload_placement(cpu, P, L, 16, 1, 16e9, 25e9);
  CHECK(on_cpu.gpu_bytes <= 32e9);   // 4L = 10.5 GB per GPU: fits
  CHECK(on_cpu.host_bytes > 1.5e12); // 18 P x 1.5 = 27 TB of host RAM: does not fit
  DeepSpeedConfig nvme = cpu;
  nvme.offload_optimizer = nvme.offload_param = OffloadDevice::nvme;
  const auto on_nvme = offload_placement(nvme, P, L, 16, 1, 16e9, 25e9);
  CHECK(on_nvme.nvme_bytes == doctest::Approx(18e12)); // 16 + 2 B/param on NVMe
  CHECK(on_nvme.nvme_bytes <= 8 * 3.84e12);            // fits the node's 30.7 TB
  CHECK(on_nvme.host_bytes <= 1.5e12);                 // host RAM keeps buffers only
  CHECK(on_nvme.gpu_bytes <= 32e9);
  CHECK(on_nvme.pcie_s > 0);
  CHECK(on_nvme.nvme_s > 0);
}

TEST_CASE("DeepSpeed config: what trainsim reads, and clear errors for the rest") {
  const auto c = deepspeed_config_from_json(
      nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true},
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
        "offload_param": {"device": "nvme", "nvme_path": "/local"}, "overlap_comm": true,
        "reduce_bucket_size": 5e8}})"),
      "ds.json");
  CHECK(c.zero_stage == 3);
  CHECK(c.micro_batch == 4);
  CHECK(c.precision == model::Precision::bf16_mixed);
  CHECK(c.offload_optimizer == OffloadDevice::cpu);
  CHECK(c.offload_param == OffloadDevice::nvme);
  CHECK(c.overlap_comm);
  CHECK_THROWS_WITH_AS(
      (void)deepspeed_config_from_json(
          nlohmann::json::parse(
              R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true}})"),
          "ds.json"),
      doctest::Contains("zero_optimization.zero_quantized_weights: not modelled"), ConfigError);
  CHECK_THROWS_WITH_AS(
      (void)deepspeed_config_from_json(
          nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": "auto"})"), "ds.json"),
      doctest::Contains("train_micro_batch_size_per_gpu = \"auto\""), ConfigError);
  CHECK_THROWS_WITH_AS(
      (void)deepspeed_config_from_json(
          nlohmann::json::parse(
              R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})"),
          "ds.json"),
      doctest::Contains("offload_param: needs stage 3"), ConfigError);
}
