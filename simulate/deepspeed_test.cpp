// DeepSpeed's own model-state estimators reproduced exactly (values by hand from the formulas
// in deepspeed/runtime/zero/stage_1_and_2.py and stage3.py), config reading, and the
// ZeRO-Infinity headline case (Rajbhandari et al. 2021, Sec. 1: a trillion parameters
// fine-tuned on one DGX-2 node) placed by offload.
#include <doctest/doctest.h>

#include <random>

#include "common/errors.hpp"
#include "common/json_mutate.hpp"
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

TEST_CASE("DeepSpeed config: AutoTP's tensor_parallel.autotp_size, and nothing else of it") {
  const auto c =
      deepspeed_config_from_json(nlohmann::json::parse(R"({"zero_optimization": {"stage": 2},
        "tensor_parallel": {"autotp_size": 4}})"),
                                 "ds.json");
  CHECK(c.autotp_size == 4);
  CHECK(deepspeed_config_from_json(nlohmann::json::parse("{}"), "ds.json").autotp_size == 0);
  auto refused = [](const char* text, const char* what) {
    CHECK_THROWS_WITH_AS((void)deepspeed_config_from_json(nlohmann::json::parse(text), "ds.json"),
                         doctest::Contains(what), ConfigError);
  };
  refused(R"({"tensor_parallel": 4})", "tensor_parallel: expected an object");
  refused(R"({"tensor_parallel": {"autotp_size": 0}})", "tensor_parallel.autotp_size = 0");
  refused(R"({"tensor_parallel": {"autotp_size": 2.5}})",
          "tensor_parallel.autotp_size = 2.5: must be a whole number");
  refused(R"({"tensor_parallel": {"tp_overlap_comm": true}})",
          "tensor_parallel.tp_overlap_comm: not modelled by trainsim");
}

TEST_CASE("DeepSpeed config: counts are whole numbers, switches are booleans") {
  auto refused = [](const char* text, const char* what) {
    CHECK_THROWS_WITH_AS((void)deepspeed_config_from_json(nlohmann::json::parse(text), "ds.json"),
                         doctest::Contains(what), ConfigError);
  };
  refused(R"({"train_micro_batch_size_per_gpu": 2.5})",
          "train_micro_batch_size_per_gpu = 2.5: must be a whole number");
  refused(R"({"zero_optimization": {"stage": 1.5}})",
          "zero_optimization.stage = 1.5: must be a whole number");
  refused(R"({"zero_optimization": {"stage": 2, "overlap_comm": "yes"}})",
          "zero_optimization.overlap_comm = \"yes\": must be true or false");
  refused(R"({"zero_optimization": {"stage": 2, "contiguous_gradients": 0}})",
          "zero_optimization.contiguous_gradients = 0: must be true or false");
  const auto c = deepspeed_config_from_json(
      nlohmann::json::parse(R"({"zero_optimization": {"contiguous_gradients": false}})"), "ds");
  CHECK_FALSE(c.contiguous_gradients);
}

TEST_CASE("DeepSpeed batch: the fields not given derived, the three checked, as DeepSpeed does") {
  auto cfg = [](std::int64_t train, std::int64_t micro, std::int64_t ga) {
    DeepSpeedConfig c;
    c.train_batch = train;
    c.micro_batch = micro;
    c.grad_accumulation = ga;
    return c;
  };
  auto same = [](DeepSpeedBatch b, std::int64_t micro, std::int64_t ga, std::int64_t train) {
    CHECK(b.micro == micro);
    CHECK(b.grad_acc == ga);
    CHECK(b.train == train);
  };
  same(deepspeed_batch(cfg(64, 0, 4), 8, "ds"), 2, 4, 64); // micro = 64 / 8 / 4
  same(deepspeed_batch(cfg(64, 2, 0), 8, "ds"), 2, 4, 64); // steps = 64 / 2 / 8
  same(deepspeed_batch(cfg(0, 2, 4), 8, "ds"), 2, 4, 64);  // train = 2 x 4 x 8
  same(deepspeed_batch(cfg(64, 0, 0), 8, "ds"), 8, 1, 64); // one step of 64 / 8
  same(deepspeed_batch(cfg(0, 3, 0), 8, "ds"), 3, 1, 24);  // one step of 3 per rank
  same(deepspeed_batch(cfg(64, 2, 4), 8, "ds"), 2, 4, 64); // all three, consistent
  same(deepspeed_batch(cfg(0, 0, 0), 8, "ds"), 0, 0, 0);   // none: trainsim's own batch
  // DeepSpeed's integer division, then its assertion: 100 / 4 / 8 = 3 steps, 4 x 3 x 8 != 100.
  CHECK_THROWS_WITH_AS(
      (void)deepspeed_batch(cfg(100, 4, 0), 8, "ds.json"),
      doctest::Contains("ds.json: train_batch_size (100) must equal train_micro_batch_size_per_gpu "
                        "(4) x gradient_accumulation_steps (not given) x data-parallel size (8)"),
      ConfigError);
  CHECK_THROWS_WITH_AS((void)deepspeed_batch(cfg(4, 0, 0), 8, "ds.json"),
                       doctest::Contains("train_batch_size (4) must equal"), ConfigError);
  CHECK_THROWS_WITH_AS((void)deepspeed_batch(cfg(0, 0, 4), 8, "ds.json"),
                       doctest::Contains("gradient_accumulation_steps = 4 needs train_batch_size"),
                       ConfigError);
}

TEST_CASE("fuzz: mutated DeepSpeed configs load or name the field, and their batch holds") {
  // A full config mutated at the top level and inside its sections: what loads must be a
  // usable config (stage 0-3, positive buckets) whose batch either follows DeepSpeed's rule
  // or is refused by name; anything else is a ConfigError naming the file.
  const auto base = nlohmann::json::parse(R"({"train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
    "bf16": {"enabled": true, "loss_scale": 0}, "fp16": {"enabled": false},
    "gradient_clipping": 1.0, "tensor_parallel": {"autotp_size": 2},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
      "offload_param": {"device": "nvme", "nvme_path": "/x"}, "overlap_comm": true,
      "contiguous_gradients": true, "reduce_bucket_size": 5e8, "allgather_bucket_size": 5e8,
      "stage3_prefetch_bucket_size": 5e7, "stage3_max_live_parameters": 1e9}})");
  std::mt19937_64 rng(20261204);
  // Besides the usual odd values: "auto" (the Hugging Face integration's), small counts, an
  // offload section, a huge number.
  const std::vector<nlohmann::json> extras{
      "auto", 0, 3, nlohmann::json::object({{"device", "cpu"}}), std::ldexp(1.0, 100)};
  auto mutate = [&](nlohmann::json& j) { testing::mutate_json_object(j, rng, extras); };
  int loaded = 0, refused = 0, batches = 0;
  for (int i = 0; i < 3000; ++i) {
    nlohmann::json doc = base;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 3); ++e) {
      const auto where = rng() % 4;
      if (where == 0 && doc.contains("zero_optimization") && doc["zero_optimization"].is_object())
        mutate(doc["zero_optimization"]);
      else if (where == 1 && doc.contains("bf16") && doc["bf16"].is_object())
        mutate(doc["bf16"]);
      else if (where == 2 && doc.contains("tensor_parallel") && doc["tensor_parallel"].is_object())
        mutate(doc["tensor_parallel"]);
      else
        mutate(doc);
    }
    try {
      const DeepSpeedConfig c = deepspeed_config_from_json(doc, "fuzz.json");
      CHECK(c.zero_stage >= 0);
      CHECK(c.zero_stage <= 3);
      CHECK(c.reduce_bucket_elems > 0);
      ++loaded;
      for (std::int64_t dp : {1, 8}) {
        try {
          const DeepSpeedBatch b = deepspeed_batch(c, dp, "fuzz.json");
          if (b.micro > 0)
            CHECK(b.train == b.micro * b.grad_acc * dp);
          ++batches;
        } catch (const ConfigError& e) {
          CHECK(std::string(e.what()).find("fuzz.json") != std::string::npos);
        }
      }
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find("fuzz.json") != std::string::npos);
      ++refused;
    }
  }
  CHECK(loaded > 0);
  CHECK(refused > 0);
  CHECK(batches > 0);
}
