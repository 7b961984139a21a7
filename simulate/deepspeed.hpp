// DeepSpeed ZeRO: its own model-state estimators, reproduced exactly, and a DeepSpeed config
// (ds_config.json) read into trainsim's plan and setup, with ZeRO-Offload / ZeRO-Infinity
// placement of model states on GPU, host RAM or NVMe and the PCIe/NVMe traffic that adds.
// Sources: deepspeedai/DeepSpeed, deepspeed/runtime/zero/stage_1_and_2.py
// (estimate_zero2_model_states_mem_needs) and stage3.py (estimate_zero3_model_states_mem_needs),
// both at commit 02aa38c3 / 007cca6a; deepspeed/runtime/zero/config.py for the defaults;
// Rajbhandari et al. 2021, ZeRO-Infinity, for the offload design.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "model/spec.hpp"

namespace trainsim::sim {

/// What DeepSpeed's estimators return: bytes per CPU (node) and per GPU for model states.
struct DeepSpeedStateEstimate {
  std::int64_t cpu_bytes = 0, gpu_bytes = 0;
  std::int64_t largest_layer_bytes = 0; // ZeRO-3: 4 B x the largest layer's parameters
};

/// estimate_zero2_model_states_mem_needs(total_params, num_gpus_per_node, num_nodes,
/// cpu_offload, additional_buffer_factor): with offload GPU 2P, CPU P max(4G, 16) f; without,
/// GPU 2P + int(18P / G), CPU 4P g f (G = all GPUs, g = per node, f = buffer factor).
[[nodiscard]] DeepSpeedStateEstimate
estimate_zero2_model_states(double total_params, std::int64_t gpus_per_node, std::int64_t num_nodes,
                            bool cpu_offload, double buffer_factor = 1.5);

/// estimate_zero3_model_states_mem_needs(total_params, largest_layer_params, ...): GPU holds
/// 4 L (the largest layer's 16-bit parameters and gradients) plus, without parameter offload,
/// int(2P / G) (offloaded optimizer) or int(18P / G) (no offload); CPU per node as DeepSpeed.
[[nodiscard]] DeepSpeedStateEstimate
estimate_zero3_model_states(double total_params, double largest_layer_params,
                            std::int64_t gpus_per_node, std::int64_t num_nodes, bool cpu_offload,
                            bool cpu_offload_params, bool zero_init, double buffer_factor = 1.5);

enum class OffloadDevice { none, cpu, nvme };
[[nodiscard]] std::string_view to_string(OffloadDevice d);

/// The parts of a DeepSpeed config trainsim models (others are refused by name).
struct DeepSpeedConfig {
  std::int64_t zero_stage = 0;
  OffloadDevice offload_optimizer = OffloadDevice::none;
  OffloadDevice offload_param = OffloadDevice::none;
  double reduce_bucket_elems = 5e8;    // zero_optimization.reduce_bucket_size (elements)
  double allgather_bucket_elems = 5e8; // zero_optimization.allgather_bucket_size
  double prefetch_bucket_elems = 5e7;  // stage3_prefetch_bucket_size
  double max_live_parameters = 1e9;    // stage3_max_live_parameters
  bool overlap_comm = false;           // two reduce buckets when on
  bool contiguous_gradients = true;
  std::int64_t micro_batch = 0; // train_micro_batch_size_per_gpu (0 = not given)
  std::int64_t grad_accumulation = 0;
  std::int64_t train_batch = 0;
  model::Precision precision = model::Precision::fp32; // bf16 / fp16 sections
  // tensor_parallel.autotp_size: AutoTP training's tensor-parallel degree (DeepSpeed 0.16.4 and
  // later, "Automatic Tensor Parallelism (Training)"); 0 = not given.
  std::int64_t autotp_size = 0;
};

/// Reads a ds_config.json. Keys trainsim does not model raise ConfigError naming the key
/// ("zero_optimization.zero_quantized_weights: not modelled by trainsim"); "auto" values
/// (Hugging Face integration) are refused with the field named.
[[nodiscard]] DeepSpeedConfig deepspeed_config_from_json(const nlohmann::json& j,
                                                         const std::string& source);

/// The batch a DeepSpeed config runs on `dp` data-parallel ranks: what it gives of
/// train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps, the rest
/// derived as DeepSpeed derives them. All zero when the config gives none (trainsim's own
/// micro-batch stands). ConfigError naming the fields when train_batch_size != micro-batch x
/// accumulation steps x dp, which DeepSpeed refuses at start.
struct DeepSpeedBatch {
  std::int64_t micro = 0, grad_acc = 0, train = 0;
};
[[nodiscard]] DeepSpeedBatch deepspeed_batch(const DeepSpeedConfig& c, std::int64_t dp,
                                             const std::string& source);

/// Model states of one GPU and its node under a DeepSpeed config, and the traffic offload
/// adds per optimizer step.
struct OffloadPlacement {
  double gpu_bytes = 0;  // model states left on each GPU (DeepSpeed's estimator)
  double host_bytes = 0; // host RAM per node (DeepSpeed's estimator, its buffer factor)
  double nvme_bytes = 0; // per node, when a device is nvme: the states DeepSpeed swaps there
  double pcie_bytes = 0; // per GPU per step: gradients down, parameters up (16-bit each)
  double pcie_s = 0, nvme_s = 0; // their time at the link rates given
};
[[nodiscard]] OffloadPlacement offload_placement(const DeepSpeedConfig& c, double total_params,
                                                 double largest_layer_params,
                                                 std::int64_t gpus_per_node, std::int64_t num_nodes,
                                                 double pcie_bytes_per_s, double nvme_bytes_per_s);

} // namespace trainsim::sim
