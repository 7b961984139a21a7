// Machines: one GPU's datasheet figures (GpuSpec) and a cluster of nodes (ClusterSpec).
// Datasheet peaks are dense (no sparsity) and kept apart from achieved efficiencies, which
// live in HardwareProfile (profile.hpp) and come from calibration files.
#pragma once

#include <cstdint>
#include <string>

#include "common/dtype.hpp"

namespace trainsim::hw {

struct GpuSpec {
  std::string name;                        // CLI handle, e.g. "h100-sxm"
  std::string source;                      // datasheet the figures come from
  PerDtype<double> peak_flops_per_s{};     // dense tensor-core peak per dtype (0 = unsupported)
  double memory_bytes = 0;                 // device memory a process sees (total, bytes)
  double hbm_bandwidth_bytes_per_s = 0;    // datasheet HBM bandwidth
  double nvlink_bandwidth_bytes_per_s = 0; // per GPU, one direction (0 = PCIe only)
  double pcie_bandwidth_bytes_per_s = 0;   // per GPU, one direction
  double l2_bytes = 0;                     // last-level cache size
  std::int64_t num_sms = 0;                // streaming multiprocessors (or CUs)
  bool mx_block_scaling = false; // tensor cores scale FP8 per 32-element block (MXFP8: Blackwell)
};

struct ClusterSpec {
  std::string name;
  std::string source;
  std::string gpu; // GPU preset handle
  std::int64_t gpus_per_node = 8;
  std::int64_t num_nodes = 1;
  double intra_node_bandwidth_bytes_per_s = 0; // per GPU, one direction (NVLink/NVSwitch)
  double inter_node_bandwidth_bytes_per_s = 0; // per GPU, one direction (InfiniBand/RoCE)
  [[nodiscard]] std::int64_t num_gpus() const { return gpus_per_node * num_nodes; }
};

/// Throws ConfigError listing every invalid field ("source: field = value: rule").
void validate(const GpuSpec& gpu, const std::string& source);
void validate(const ClusterSpec& cluster, const std::string& source);

} // namespace trainsim::hw
